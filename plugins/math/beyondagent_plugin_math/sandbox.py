"""The Python tool's sandbox: run untrusted model code in a limited subprocess, never raise.

`PythonSandbox(config).run(code) -> ToolResult`. Each run:

- is a fresh `python -I` process (isolated mode: no PYTHONPATH, no user site, cwd not on the path)
  in its own process group, in a new temporary directory that is removed afterwards, with a
  minimal environment (no proxies, no credentials from ours, HOME and TMPDIR in that directory);
- has a wall-clock `timeout`; past it the whole process group is killed (SIGKILL), so
  children and infinite loops die too; the group is also killed after a normal exit;
- sets, before the model's code starts, RLIMIT_AS (`memory_mb`), RLIMIT_CPU (`cpu_seconds`),
  RLIMIT_FSIZE (`max_file_mb`: its stdout/stderr are files, so a flood of output stops there),
  RLIMIT_NPROC (`max_processes`) and RLIMIT_CORE 0;
- installs an audit hook (which code cannot remove) that refuses to create sockets and to
  start processes (`os.fork`, `os.system`, `subprocess`, `os.exec*`, `os.spawn*`, `posix_spawn`,
  `pty.spawn`): no network, and a fork bomb ends at its first fork;
- returns at most `max_output_chars` of stdout (its start) and of stderr (its end, where a
  traceback names the error); what is cut is said so.

What is NOT isolated (this is a guard against accidents and a confused model, not a security
boundary against a determined attacker): the code runs as our user and can read any file we can
read and write where we can (the FSIZE limit caps each file's size, not their number); `ctypes`
can call libc directly and so get around the audit hook (sockets included); RLIMIT_NPROC is
per user and not enforced for root. For hostile code, run the trainer in a container or VM
(or point the tool at a jail such as nsjail/firejail).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import attrs
import structlog

from beyondagent_plugin_math.config import SandboxConfig

log = structlog.get_logger("beyondagent.math.sandbox")

CODE_FILE = "main.py"

# Runs first in the child: limits, the audit hook, then the model's code as __main__.
PRELUDE = r"""
import resource, sys
def _limit(name, value):
    try:
        resource.setrlimit(getattr(resource, name), (value, value))
    except (ValueError, OSError, AttributeError):
        pass
_MB = 1024 * 1024
_limit("RLIMIT_AS", {memory_mb} * _MB)
_limit("RLIMIT_CPU", {cpu_seconds})
_limit("RLIMIT_FSIZE", {max_file_mb} * _MB)
_limit("RLIMIT_NPROC", {max_processes})
_limit("RLIMIT_CORE", 0)

_BLOCKED = ("socket.", "os.fork", "os.forkpty", "os.system", "os.exec", "os.spawn", "os.posix_spawn",
            "subprocess.Popen", "pty.spawn", "os.startfile")
def _audit(event, args):
    if event.startswith(_BLOCKED):
        raise PermissionError(f"the sandbox does not allow {{event}}")
sys.addaudithook(_audit)

import traceback
with open({code_file!r}, encoding="utf-8") as _f:
    _source = _f.read()
try:
    _code = compile(_source, "<code>", "exec")
except SyntaxError:
    traceback.print_exc(limit=0)
    sys.exit(1)
_globals = {{"__name__": "__main__", "__builtins__": __builtins__}}
del _f, _source, _limit, _audit
try:
    exec(_code, _globals)
except SystemExit:
    raise
except BaseException as _exc:
    _tb = _exc.__traceback__.tb_next if _exc.__traceback__ is not None else None
    traceback.print_exception(type(_exc), _exc, _tb)
    sys.exit(1)
"""


@attrs.frozen
class ToolResult:
    """What one run produced. `exit_code` None: killed at the timeout; `error`: the sandbox itself failed."""

    stdout: str = ""
    stderr: str = ""
    exit_code: int | None = 0
    timed_out: bool = False
    truncated: bool = False
    seconds: float = 0.0
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None and not self.timed_out and self.exit_code == 0

    def observation(self) -> str:
        """The text the model is shown."""
        parts = []
        if self.stdout:
            parts.append(self.stdout.rstrip("\n"))
        if self.stderr:
            parts.append(self.stderr.rstrip("\n"))
        if self.timed_out:
            parts.append("[the code was stopped: it ran out of time]")
        elif self.error:
            parts.append(f"[the code could not be run: {self.error}]")
        elif self.exit_code not in (0, None) and not self.stderr:
            parts.append(f"[the code exited with status {self.exit_code}]")
        if not parts:
            parts.append("[no output: print what you need]")
        return "```output\n" + "\n".join(parts) + "\n```"


class PythonSandbox:
    """Runs code with the limits of a `SandboxConfig`; thread-safe, at most `max_concurrent` at once."""

    def __init__(self, config: SandboxConfig | None = None):
        self.config = config or SandboxConfig()
        self._slots = threading.BoundedSemaphore(self.config.max_concurrent)

    def run(self, code: str) -> ToolResult:
        """Run `code`; never raises (a failure of the sandbox itself comes back in `error`)."""
        started = time.monotonic()
        try:
            with self._slots:
                result = self._run(code if isinstance(code, str) else str(code))
        except Exception as exc:  # noqa: BLE001 - the trainer must never see a tool exception
            log.warning("math.sandbox.failed", error=f"{type(exc).__name__}: {exc}", exc_info=True)
            result = ToolResult(exit_code=None, error=f"{type(exc).__name__}: {exc}")
        return attrs.evolve(result, seconds=round(time.monotonic() - started, 3))

    def _run(self, code: str) -> ToolResult:
        config = self.config
        root = Path(tempfile.mkdtemp(prefix="beyondagent-sandbox-"))
        workdir = root / "work"  # the code's cwd; its output files live beside it, out of its sight
        try:
            workdir.mkdir()
            (workdir / CODE_FILE).write_text(code, encoding="utf-8", errors="replace")
            prelude = PRELUDE.format(memory_mb=config.memory_mb, cpu_seconds=config.cpu_seconds,
                                     max_file_mb=config.max_file_mb, max_processes=config.max_processes,
                                     code_file=CODE_FILE)
            with open(root / "stdout", "wb") as out, open(root / "stderr", "wb") as err:
                process = subprocess.Popen(
                    [sys.executable, "-I", "-c", prelude], cwd=workdir, env=_environment(workdir),
                    stdin=subprocess.DEVNULL, stdout=out, stderr=err, start_new_session=True, close_fds=True)
                timed_out = False
                try:
                    process.wait(timeout=config.timeout)
                except subprocess.TimeoutExpired:
                    timed_out = True
                finally:
                    _kill_group(process)
            stdout, cut_out = _read_head(root / "stdout", config.max_output_chars)
            stderr, cut_err = _read_tail(root / "stderr", config.max_output_chars)  # a traceback ends in its error
            return ToolResult(stdout=stdout, stderr=stderr, exit_code=None if timed_out else process.returncode,
                              timed_out=timed_out, truncated=cut_out or cut_err)
        finally:
            shutil.rmtree(root, ignore_errors=True)


def _environment(workdir: Path) -> dict[str, str]:
    # Nothing of ours leaks in (keys, proxies, PYTHONPATH); one thread per math library.
    env = {"PATH": os.defpath, "HOME": str(workdir), "TMPDIR": str(workdir), "LANG": "C.UTF-8",
           "PYTHONIOENCODING": "utf-8", "PYTHONDONTWRITEBYTECODE": "1", "MPLBACKEND": "Agg"}
    for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMEXPR_NUM_THREADS"):
        env[name] = "1"
    for name in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"):
        env[name] = ""
    env["no_proxy"] = env["NO_PROXY"] = "*"
    return env


def _kill_group(process: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:  # pragma: no cover - SIGKILL does not fail
        log.warning("math.sandbox.unkillable", pid=process.pid)


def _read_head(path: Path, limit: int) -> tuple[str, bool]:
    """The first `limit` characters of a file (read in bounded bytes), and whether more was there."""
    try:
        with open(path, "rb") as handle:
            data = handle.read(limit * 4 + 1)
            more = bool(handle.read(1))
    except OSError:
        return "", False
    text = data.decode("utf-8", errors="replace")
    if len(text) > limit or more:
        total = path.stat().st_size
        return text[:limit] + f"\n[... output truncated: {total} bytes in all, {limit} characters shown]", True
    return text, False


def _read_tail(path: Path, limit: int) -> tuple[str, bool]:
    """The last `limit` characters of a file, and whether there was more before them."""
    try:
        size = path.stat().st_size
        with open(path, "rb") as handle:
            handle.seek(max(0, size - limit * 4))
            data = handle.read()
    except OSError:
        return "", False
    text = data.decode("utf-8", errors="replace")
    if len(text) > limit or size > len(data):
        return f"[... {size} bytes in all, the last {limit} characters shown]\n" + text[-limit:], True
    return text, False
