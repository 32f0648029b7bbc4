"""The audit's escape probes against the Python tool's sandbox: each one escaped the old guarded
subprocess (an audit hook in the same process) and must be contained by the namespaces now.

Probes that would harm the machine if isolation failed (`kill(-1, 9)` as root, an unbounded fork
bomb) run only after a harmless probe showed the sandbox is PID 1 of its own PID namespace, and
their code checks that again itself and refuses to act outside one; the test then fails.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest
from beyondagent_plugin_math import sandbox as sandbox_module
from beyondagent_plugin_math.config import SandboxConfig

pytestmark = pytest.mark.skipif(sandbox_module.isolation_unavailable() is not None,
                                reason=f"no isolation on this machine: {sandbox_module.isolation_unavailable()}")

CONFIG = SandboxConfig(timeout=5.0, cpu_seconds=4, memory_mb=512, max_output_chars=2000, max_file_mb=1,
                       max_processes=16)
GUARD = (  # prepended to the dangerous probes: act only as PID 1 of a PID namespace that is not ours
    "import os, sys\n"
    "if os.getpid() != 1 or os.readlink('/proc/self/ns/pid') == {ours!r}:\n"
    "    print('NOT ISOLATED: refusing the probe')\n"
    "    sys.exit(3)\n"
)
FORK = "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\n"  # around the audit hook


def make_sandbox(config: SandboxConfig = CONFIG):
    return sandbox_module.PythonSandbox(config)


@pytest.fixture(scope="module")
def sandbox():
    return make_sandbox()


class Listener:
    """A TCP server on 127.0.0.1 of the test's own network: counts the connections it gets."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.connections = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.connections += 1
            conn.close()

    def close(self) -> None:
        time.sleep(0.3)
        self._stop.set()
        self._thread.join()
        self.sock.close()


@pytest.fixture
def listener():
    server = Listener()
    yield server
    server.close()


@pytest.fixture
def decoy():
    """A process of ours standing in for the trainer: the sandbox must not be able to kill it."""
    process = subprocess.Popen(["sleep", "60"])
    yield process
    process.kill()
    process.wait()


def assert_isolated_pid_namespace(sandbox) -> None:
    ours = os.readlink("/proc/self/ns/pid")
    result = sandbox.run("import os\nprint(os.getpid(), os.readlink('/proc/self/ns/pid'))")
    fields = result.stdout.split()
    if not result.ok or fields[:1] != ["1"] or fields[1:] == [ours]:
        pytest.fail(f"the sandbox is not PID 1 of its own PID namespace ({result}); not running the probe")


def survivors(name: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and (entry / "comm").read_text().strip() == name:
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def kill_all(pids: list[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


def test_the_sandbox_runs_in_its_own_namespaces_without_privileges(sandbox) -> None:
    code = ("import os\n"
            "print(os.getpid())\n"
            "for ns in ('pid', 'net', 'mnt', 'user', 'ipc', 'uts'):\n"
            "    print(ns, os.readlink(f'/proc/self/ns/{ns}'))\n"
            "print(open('/proc/self/uid_map').read().split())\n"
            "print([l.split()[1] for l in open('/proc/self/status') if l.startswith('CapEff')])\n")
    lines = sandbox.run(code).stdout.splitlines()
    assert lines[0] == "1"
    for line in lines[1:7]:
        ns, inode = line.split()
        assert inode != os.readlink(f"/proc/self/ns/{ns}"), ns
    inner, outer, count = eval(lines[7])  # noqa: S307 - our own print of a list
    assert (inner, count) == ("0", "1") and int(outer) == (65534 if os.geteuid() == 0 else os.geteuid())
    assert eval(lines[8]) == ["0000000000000000"]  # noqa: S307 - no capability at all


def test_switching_the_guard_off_still_gives_no_network(sandbox, listener) -> None:
    code = ("import gc, sys, socket\n"
            "sys.modules['__main__'].__dict__['_BLOCKED'] = ()\n"  # the old guard's state
            "for f in gc.get_objects():\n"  # any audit hook's closure
            "    if callable(f) and getattr(f, '__closure__', None) and getattr(f, '__name__', '').endswith('audit'):\n"
            "        for cell in f.__closure__:\n"
            "            if isinstance(cell.cell_contents, tuple):\n"
            "                cell.cell_contents = ()\n"
            "s = socket.socket()\n"
            "print('socket created')\n"
            f"s.connect(('127.0.0.1', {listener.port}))\n"
            "print('CONNECTED')\n")
    result = sandbox.run(code)
    assert "socket created" in result.stdout  # the guard is off: the network namespace holds
    assert "CONNECTED" not in result.stdout and result.exit_code == 1
    assert listener.connections == 0


def test_a_raw_socket_through_ctypes_reaches_no_loopback_server(sandbox, listener) -> None:
    code = (FORK +
            "import struct, socket\n"
            "fd = libc.socket(2, 1, 0)\n"
            f"addr = struct.pack('!HH4s8x', 2, {listener.port}, socket.inet_aton('127.0.0.1'))\n"
            "addr = struct.pack('=H', 2) + addr[2:]\n"
            "rc = libc.connect(fd, addr, len(addr))\n"
            "print('fd', fd, 'connect', rc, 'errno', ctypes.get_errno())\n")
    result = sandbox.run(code)
    assert "connect 0 " not in result.stdout, result
    assert listener.connections == 0


def test_a_multiprocessing_spawn_child_gets_no_network(sandbox, listener) -> None:
    code = ("import multiprocessing as mp, socket\n"
            "ctx = mp.get_context('spawn')\n"
            f"p = ctx.Process(target=socket.create_connection, args=(('127.0.0.1', {listener.port}),))\n"
            "p.start()\n"
            "p.join(4)\n"
            "print('child exit', p.exitcode)\n")
    sandbox.run(code)
    assert listener.connections == 0


def _fork_exec_code(command: str) -> str:
    return ("import _posixsubprocess, os\n"
            "args = [b'/bin/sh', b'-c', %r]\n"
            "r, w = os.pipe()\n"
            "common = (args, [b'/bin/sh'], True, (w,), None, None, -1, -1, -1, -1, -1, -1, r, w, True, False, -1,"
            " None, None, None, -1, None)\n"
            "try:\n"
            "    pid = _posixsubprocess.fork_exec(*common, False)\n"
            "except TypeError:\n"
            "    pid = _posixsubprocess.fork_exec(*common)\n"
            "print('status', os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))\n") % command.encode()


def test_posixsubprocess_fork_exec_cannot_write_outside_the_sandbox(sandbox, tmp_path: Path) -> None:
    marker = tmp_path / "escaped"
    result = sandbox.run(_fork_exec_code(f"echo escaped > {marker}"))
    assert "status" in result.stdout  # the process ran (it is not the boundary)...
    assert not marker.exists()  # ...but it could not write outside


def test_nothing_is_written_outside_the_working_directory(sandbox, tmp_path: Path) -> None:
    targets = [tmp_path / "escaped", Path("/etc") / f"beyondagent-probe-{uuid.uuid4().hex}",
               Path("/var/tmp") / f"beyondagent-probe-{uuid.uuid4().hex}"]
    code = ("import os\n"
            f"for path in {[str(t) for t in targets] + ['../escaped']!r}:\n"
            "    try:\n"
            "        open(path, 'w').write('escaped')\n"
            "        print('WROTE', path)\n"
            "    except OSError as exc:\n"
            "        print('refused', path, type(exc).__name__)\n"
            "open('inside.txt', 'w').write('fine')\n"
            "print('inside ok')\n")
    try:
        result = sandbox.run(code)
        assert "WROTE" not in result.stdout and "inside ok" in result.stdout
        assert not any(target.exists() for target in targets)
    finally:
        for target in targets:
            target.unlink(missing_ok=True)


def test_the_trainers_environment_is_out_of_reach(tmp_path: Path) -> None:
    # /proc/<pid>/environ shows a process's environment at its start: start a "trainer" holding a secret.
    secret = f"sk-probe-{uuid.uuid4().hex}"
    code = ("import os, glob\n"
            "hits = []\n"
            "for path in [f'/proc/{os.getppid()}/environ'] + glob.glob('/proc/*/environ'):\n"
            "    try:\n"
            "        hits.append(open(path, 'rb').read().decode(errors='replace'))\n"
            "    except OSError as exc:\n"
            "        pass\n"
            "print('\\n'.join(hits))\n"
            "print(dict(os.environ))\n")
    trainer = ("import json, sys\n"
               f"from {sandbox_module.PythonSandbox.__module__} import PythonSandbox\n"
               "from beyondagent_plugin_math.config import SandboxConfig\n"
               "result = PythonSandbox(SandboxConfig(max_output_chars=100000)).run(sys.stdin.read())\n"
               "print(json.dumps([result.stdout, result.stderr, result.error]))\n")
    env = {**os.environ, "OPENAI_API_KEY": secret, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run([sys.executable, "-c", trainer], input=code, env=env, capture_output=True, text=True,
                          timeout=60, check=True)
    stdout, stderr, error = json.loads(done.stdout.splitlines()[-1])
    assert error is None and "PATH" in stdout  # it ran and printed its own environment
    assert secret not in stdout + stderr


def test_the_sandbox_cannot_signal_or_kill_the_trainer(sandbox, decoy) -> None:
    received = []
    previous = signal.signal(signal.SIGUSR1, lambda *_: received.append("SIGUSR1"))
    try:
        code = ("import os, signal\n"
                f"for pid, sig in (({os.getpid()}, signal.SIGUSR1), ({decoy.pid}, signal.SIGKILL)):\n"
                "    try:\n"
                "        os.kill(pid, sig)\n"
                "        print('SIGNALLED', pid)\n"
                "    except OSError as exc:\n"
                "        print('refused', pid, type(exc).__name__)\n"
                "if os.getppid() > 1:\n"
                "    os.kill(os.getppid(), signal.SIGUSR1)\n"
                "    print('SIGNALLED the parent')\n")
        result = sandbox.run(code)
        time.sleep(0.3)
    finally:
        signal.signal(signal.SIGUSR1, previous)
    assert "SIGNALLED" not in result.stdout, result
    assert received == [] and decoy.poll() is None


def test_a_setsid_child_does_not_survive_the_kill() -> None:
    name = f"ba-{uuid.uuid4().hex[:10]}"
    code = (FORK +
            "import os, time\n"
            "if libc.fork() == 0:\n"
            "    os.setsid()\n"
            f"    libc.prctl(15, {name.encode()!r}, 0, 0, 0)\n"
            "    time.sleep(30)\n"
            "    os._exit(0)\n"
            "time.sleep(60)\n")
    result = make_sandbox(SandboxConfig(timeout=1.5)).run(code)
    try:
        assert result.timed_out
        deadline = time.monotonic() + 3
        while survivors(name) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert survivors(name) == []
    finally:
        kill_all(survivors(name))


def test_its_pid_1_does_not_outlive_the_timeout_by_leaving_the_group_and_its_death_signal() -> None:
    name = f"ba-{uuid.uuid4().hex[:10]}"
    code = (FORK +
            "import os, time\n"
            "libc.prctl(1, 0, 0, 0, 0)\n"  # PR_SET_PDEATHSIG 0: no longer dies with its parent
            "os.setsid()\n"  # out of the launcher's process group
            f"libc.prctl(15, {name.encode()!r}, 0, 0, 0)\n"
            "time.sleep(60)\n")
    result = make_sandbox(SandboxConfig(timeout=1.5)).run(code)
    try:
        assert result.timed_out
        deadline = time.monotonic() + 3
        while survivors(name) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert survivors(name) == []
    finally:
        kill_all(survivors(name))


def test_kill_minus_one_kills_only_the_sandbox(sandbox, decoy) -> None:
    assert_isolated_pid_namespace(sandbox)
    code = (GUARD.format(ours=os.readlink("/proc/self/ns/pid")) + FORK +
            "import time, signal\n"
            "child = libc.fork()\n"
            "if child == 0:\n"
            "    time.sleep(30)\n"
            "    os._exit(0)\n"
            "time.sleep(0.2)\n"
            "os.kill(-1, signal.SIGKILL)\n"
            "print('killed', os.waitpid(child, 0)[1] & 0x7f)\n")
    result = sandbox.run(code)
    assert result.ok and result.stdout.strip() == "killed 9", result  # its own child died...
    assert decoy.poll() is None  # ...ours did not (nor did we)


def test_a_bounded_fork_burst_stops_at_max_processes(sandbox) -> None:
    code = (FORK +
            "import os, time\n"
            "made = 0\n"
            "for _ in range(100):\n"
            "    pid = libc.fork()\n"
            "    if pid == 0:\n"
            "        time.sleep(5)\n"
            "        os._exit(0)\n"
            "    if pid < 0:\n"
            "        break\n"
            "    made += 1\n"
            "print('forked', made)\n")
    result = sandbox.run(code)
    made = int(result.stdout.split()[-1])
    assert made < CONFIG.max_processes, result  # RLIMIT_NPROC holds, although we are root outside


def test_a_fork_bomb_ends_with_the_run_and_leaves_nothing(sandbox) -> None:
    assert_isolated_pid_namespace(sandbox)
    name = f"ba-{uuid.uuid4().hex[:10]}"
    code = (GUARD.format(ours=os.readlink("/proc/self/ns/pid")) + FORK +
            f"libc.prctl(15, {name.encode()!r}, 0, 0, 0)\n"
            "while True:\n"
            "    libc.fork()\n")
    result = make_sandbox(SandboxConfig(timeout=1.5, max_processes=16)).run(code)
    try:
        assert result.timed_out and "NOT ISOLATED" not in result.stdout
        deadline = time.monotonic() + 3
        while survivors(name) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert survivors(name) == []
    finally:
        kill_all(survivors(name))


def test_a_cpu_bomb_is_stopped_by_the_cpu_limit() -> None:
    result = make_sandbox(SandboxConfig(timeout=10.0, cpu_seconds=1)).run(
        "import signal\nsignal.signal(signal.SIGXCPU, signal.SIG_IGN)\nwhile True:\n    pass")
    assert result.timed_out and result.exit_code == -signal.SIGKILL  # out of CPU time, not of wall time


def test_a_memory_bomb_in_a_child_process_hits_the_limit(sandbox) -> None:
    code = (FORK +
            "import os\n"
            "pid = libc.fork()\n"
            "if pid == 0:\n"
            "    try:\n"
            "        blob = bytearray(2 * 1024 ** 3)\n"
            "        os._exit(0)\n"
            "    except MemoryError:\n"
            "        os._exit(42)\n"
            "print('child', os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))\n")
    assert sandbox.run(code).stdout.strip() == "child 42"


def test_the_host_proc_is_not_visible(sandbox) -> None:
    result = sandbox.run("import os\nprint(sorted(int(p) for p in os.listdir('/proc') if p.isdigit()))")
    assert result.stdout.strip() == "[1]"
