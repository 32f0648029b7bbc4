"""The Python tool's sandbox: whatever the code does, the caller gets a ToolResult, quickly, and nothing leaks.

Real subprocesses, real limits. Timeouts here are small so the file stays fast; no assertion
depends on how long anything took beyond "it came back".
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import structlog
from beyondagent_plugin_math import sandbox as sandbox_module
from beyondagent_plugin_math.config import MathToolConfig, SandboxConfig
from beyondagent_plugin_math.sandbox import PythonSandbox, SandboxUnavailable, isolation_unavailable
from beyondagent_plugin_math.tool_workflow import MathToolWorkflow

NO_ISOLATION = isolation_unavailable()


@pytest.fixture(scope="module", params=["isolated", "unsafe_local"])
def sandbox(request: pytest.FixtureRequest) -> PythonSandbox:
    """The behaviour below holds in both modes; the isolated one where this machine allows it."""
    if request.param == "isolated" and NO_ISOLATION is not None:
        pytest.skip(f"no isolation on this machine: {NO_ISOLATION}")
    return PythonSandbox(SandboxConfig(timeout=2.0, cpu_seconds=2, memory_mb=512, max_output_chars=300,
                                       max_file_mb=1, unsafe_local=request.param == "unsafe_local"))


def sandbox_dirs() -> set[str]:
    return {p.name for p in Path(tempfile.gettempdir()).glob("beyondagent-sandbox-*")}


def test_output_comes_back(sandbox: PythonSandbox) -> None:
    result = sandbox.run("import math\nprint(math.factorial(10))")
    assert result.ok and result.stdout.strip() == "3628800"
    assert result.observation() == "```output\n3628800\n```"


def test_a_crash_shows_the_traceback_of_the_code_only(sandbox: PythonSandbox) -> None:
    result = sandbox.run("def f(x):\n    return 1 / x\nf(0)")
    assert result.exit_code == 1 and not result.ok
    assert "ZeroDivisionError" in result.stderr and 'File "<code>", line 2' in result.stderr
    assert "exec(" not in result.stderr  # the prelude's frame is left out


def test_a_syntax_error_is_reported(sandbox: PythonSandbox) -> None:
    result = sandbox.run("print(")
    assert result.exit_code == 1 and "SyntaxError" in result.stderr


@pytest.mark.parametrize("code", ["while True:\n    pass", "import time\ntime.sleep(60)"])
def test_an_infinite_loop_or_a_hang_is_stopped_at_the_timeout(sandbox: PythonSandbox, code: str) -> None:
    result = sandbox.run(code)
    # the wall clock (exit_code None) or, for a busy loop, the CPU limit (its signal) may fire first
    assert result.timed_out and result.exit_code in (None, -signal.SIGKILL, -signal.SIGXCPU)
    assert "ran out of time" in result.observation()


def test_the_memory_limit_raises_memory_error_in_the_code(sandbox: PythonSandbox) -> None:
    result = sandbox.run("blob = bytearray(2 * 1024 ** 3)\nprint(len(blob))")
    assert result.exit_code == 1 and "MemoryError" in result.stderr and not result.stdout


@pytest.mark.parametrize("code", [
    "import socket\nsocket.socket(socket.AF_INET, socket.SOCK_STREAM)",
    "import socket\nsocket.create_connection(('127.0.0.1', 9))",
    "import urllib.request\nurllib.request.urlopen('http://127.0.0.1:9/')",
])
def test_no_network(sandbox: PythonSandbox, code: str) -> None:
    result = sandbox.run(code)
    assert result.exit_code == 1
    assert "the sandbox does not allow socket" in result.stderr or "PermissionError" in result.stderr


@pytest.mark.parametrize("code", [
    "import os\nwhile True:\n    os.fork()",
    "import subprocess\nsubprocess.run(['echo', 'hi'])",
    "import os\nos.system('echo hi')",
    "import multiprocessing as mp\nmp.Process(target=print).start()",
])
def test_fork_bombs_and_subprocesses_are_refused(sandbox: PythonSandbox, code: str) -> None:
    result = sandbox.run(code)
    assert result.exit_code == 1 and "the sandbox does not allow" in result.stderr
    assert "hi" not in result.stdout


def test_a_flood_of_output_is_cut_and_stops_at_the_file_size_limit(sandbox: PythonSandbox) -> None:
    result = sandbox.run("while True:\n    print('x' * 10000)")
    assert result.truncated and not result.timed_out  # RLIMIT_FSIZE ends it, not the clock
    assert len(result.stdout) < 400 and "output truncated" in result.stdout
    assert "File too large" in result.stderr or "OSError" in result.stderr


def test_a_flood_that_ignores_errors_is_stopped_by_the_timeout(sandbox: PythonSandbox) -> None:
    result = sandbox.run("while True:\n    try:\n        print('y' * 10000)\n    except BaseException:\n        pass")
    assert result.timed_out and result.truncated
    assert len(result.observation()) < 1000


def test_runs_in_a_fresh_temporary_directory_that_is_removed(sandbox: PythonSandbox, tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    # a temporary directory of this test's own: another test process's sandboxes come and go in /tmp
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    before = sandbox_dirs()
    code = "import os\nopen('note.txt', 'w').write('hi')\nprint(os.getcwd())\nprint(sorted(os.listdir('.')))"
    result = sandbox.run(code)
    cwd, listing = result.stdout.splitlines()
    assert listing == "['main.py', 'note.txt']"
    assert Path(cwd).parent.parent == tmp_path and not Path(cwd).exists()
    assert sandbox_dirs() == before == set()


def test_the_environment_holds_nothing_of_ours(sandbox: PythonSandbox, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret")
    code = "import os\nprint(repr(os.environ.get('OPENAI_API_KEY')), repr(os.environ.get('https_proxy')))"
    result = sandbox.run(code)
    assert result.stdout.split() == ["None", "''"]


def test_exit_status_and_no_output_are_reported(sandbox: PythonSandbox) -> None:
    assert "status 3" in sandbox.run("import sys\nsys.exit(3)").observation()
    assert "no output" in sandbox.run("x = 1").observation()


def test_a_sandbox_that_cannot_start_reports_instead_of_raising(sandbox: PythonSandbox,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("beyondagent_plugin_math.sandbox.sys.executable", "/nonexistent/python")
    result = sandbox.run("print(1)")
    assert result.error and "FileNotFoundError" in result.error and not result.ok
    assert "could not be run" in result.observation()


def test_without_isolation_the_tool_refuses_and_names_the_opt_out(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sandbox_module, "isolation_unavailable", lambda: "user namespaces are disabled")
    with pytest.raises(SandboxUnavailable, match=r"user namespaces are disabled.*workflow\.sandbox\.unsafe_local"):
        PythonSandbox(SandboxConfig())
    with pytest.raises(SandboxUnavailable, match="unsafe_local: true"):
        MathToolWorkflow(MathToolConfig())  # the workflow fails when it is built, before any episode


def test_unsafe_local_runs_without_isolation_and_says_so_loudly(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sandbox_module, "isolation_unavailable", lambda: "user namespaces are disabled")
    with structlog.testing.capture_logs() as logs:
        unsafe = PythonSandbox(SandboxConfig(unsafe_local=True))
    assert [e["log_level"] for e in logs if e["event"] == "math.sandbox.UNSAFE_LOCAL"] == ["warning"]
    result = unsafe.run("import os\nprint(os.getpid() != 1)")
    assert result.ok and result.stdout.strip() == "True"  # not in a PID namespace of its own


@pytest.mark.skipif(NO_ISOLATION is not None or not Path("/usr/bin/unshare").exists(),
                    reason="needs isolation here, and unshare(1) to take it away")
def test_a_machine_where_isolation_fails_is_detected_for_real() -> None:
    # Inside a user namespace with no id map our uid is unmapped: the sandbox cannot map its user.
    code = ("from beyondagent_plugin_math.sandbox import isolation_unavailable, PythonSandbox\n"
            "print('REASON', isolation_unavailable())\n"
            "try:\n    PythonSandbox()\nexcept Exception as exc:\n    print('RAISED', type(exc).__name__, exc)\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run(["/usr/bin/unshare", "--user", sys.executable, "-c", code], env=env,
                          capture_output=True, text=True, timeout=60)
    assert "REASON isolation failed" in done.stdout and "user namespace" in done.stdout, done
    assert "RAISED SandboxUnavailable" in done.stdout and "unsafe_local" in done.stdout


def test_children_die_with_the_group_on_timeout(tmp_path: Path) -> None:
    # os.fork is refused, so reach for the lowest level there is to prove the group kill works
    # even when a child escapes the audit hook (ctypes is the documented hole).
    marker = tmp_path / "child-alive"
    code = (
        "import ctypes, time\n"
        "libc = ctypes.CDLL(None)\n"
        "pid = libc.fork()\n"
        "if pid == 0:\n"
        f"    time.sleep(4)\n    open({str(marker)!r}, 'w').write('alive')\n"
        "else:\n    time.sleep(60)\n"
    )
    result = PythonSandbox(SandboxConfig(timeout=1.0, unsafe_local=NO_ISOLATION is not None)).run(code)
    assert result.timed_out
    import time

    time.sleep(5)  # longer than the child would have slept: it was killed with its group
    assert not marker.exists()
    assert os.path.exists(tmp_path)
