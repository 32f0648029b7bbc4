"""The Python tool's sandbox: run untrusted model code in an isolated process, never raise.

`PythonSandbox(config).run(code) -> ToolResult`. Each run is a fresh `python -I` process
(`jail.py`) in its own session, in a new temporary directory removed afterwards, with a minimal
environment (none of the trainer's variables: no keys, no proxies, no PYTHONPATH). On Linux,
where user namespaces are allowed, the code runs isolated (see `jail.py` and docs/security.md):

- as an unprivileged user: a new user namespace whose root is, outside it, uid 65534 (nobody)
  when the trainer is root, else the trainer's own uid; every capability dropped, no_new_privs;
- in a new PID namespace (it is PID 1; it cannot see or signal any process outside, `kill(-1)`
  reaches only its own), a new network namespace (no interface but a down loopback), new IPC
  and UTS namespaces, and a mount namespace where the whole tree is read-only, /tmp /var/tmp
  /run /dev/shm are empty, /proc shows only its own processes, and the working directory is a
  tmpfs of `max_disk_mb` (the only writable place);
- with RLIMIT_AS (`memory_mb`), RLIMIT_CPU (`cpu_seconds`), RLIMIT_FSIZE (`max_file_mb`: its
  stdout/stderr are files, so a flood of output stops there), RLIMIT_NPROC (`max_processes`,
  counted per sandbox and enforced even for root, since the code is not root outside),
  RLIMIT_NOFILE (`max_open_files`), RLIMIT_CORE 0;
- past the wall-clock `timeout` the launcher's process group is killed; the namespace's PID 1
  dies with it, and with PID 1 the kernel kills every process of the namespace (`setsid` or a
  double fork does not survive). The same happens when the code exits.

**Fail closed**: when isolation is not available (not Linux, user namespaces disabled, a
container that forbids them), `PythonSandbox(config)` raises `SandboxUnavailable` naming the
opt-out, `unsafe_local: true` in the tool's sandbox config: then code runs in the old guarded
subprocess (same limits and audit hook, no namespaces, a warning logged at every start).

An audit hook (refusing sockets and process creation with a clear message) is installed in both
modes; it is a courtesy for the common cases, not the boundary (ctypes gets around it).

Returns at most `max_output_chars` of stdout (its start) and of stderr (its end, where a
traceback names the error); what is cut is said so.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import attrs

from beyondagent_core.logs import get_logger
from beyondagent_plugin_math.config import SandboxConfig
from beyondagent_plugin_math.jail import UNAVAILABLE_EXIT, UNAVAILABLE_MARK

log = get_logger("beyondagent.math.sandbox")

CODE_FILE = "main.py"
JAIL = Path(__file__).with_name("jail.py")
NOBODY = 65534
UNSAFE_HINT = ("set `unsafe_local: true` in the tool's sandbox config (`workflow.sandbox.unsafe_local`) to run "
               "model code in a guarded subprocess WITHOUT isolation (trusted models only); see docs/security.md")


class SandboxUnavailable(RuntimeError):
    """Isolation cannot be had on this machine and the spec did not opt into `unsafe_local`."""


@attrs.frozen
class ToolResult:
    """What one run produced. `timed_out`: stopped by the wall clock (`exit_code` None) or by the CPU limit
    (`exit_code` the signal, negative); `error`: the sandbox itself failed."""

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
    """Runs code with the limits of a `SandboxConfig`; thread-safe, at most `max_concurrent` at once.

    Raises `SandboxUnavailable` when isolation cannot be had here and `unsafe_local` is off.
    """

    def __init__(self, config: SandboxConfig | None = None):
        self.config = config or SandboxConfig()
        self._slots = threading.BoundedSemaphore(self.config.max_concurrent)
        self.isolated = not self.config.unsafe_local
        if self.isolated:
            reason = isolation_unavailable()
            if reason is not None:
                raise SandboxUnavailable(f"the math tool's sandbox cannot isolate model code here ({reason}); "
                                         f"refusing to run it. Run the trainer where Linux user namespaces are "
                                         f"allowed, or {UNSAFE_HINT}")
        else:
            log.warning("math.sandbox.UNSAFE_LOCAL",
                        message="unsafe_local: true - model code runs WITHOUT isolation (as the trainer's user, "
                                "with its network and files); use it only for trusted models")

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
            code_path = workdir / CODE_FILE if not self.isolated else root / CODE_FILE
            code_path.write_text(code, encoding="utf-8", errors="replace")
            settings = _settings(config, workdir, code_path, isolate=self.isolated)
            (root / "settings.json").write_text(json.dumps(settings), encoding="utf-8")
            if self.isolated:
                os.chmod(root, 0o711)  # the sandbox's user must pass through to mount over `work`
            with open(root / "stdout", "wb") as out, open(root / "stderr", "wb") as err:
                process = subprocess.Popen(
                    [sys.executable, "-I", str(JAIL), str(root / "settings.json")], cwd=workdir,
                    env=_environment(workdir), stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                    start_new_session=True, close_fds=True)
                timed_out = False
                try:
                    process.wait(timeout=config.timeout)
                except subprocess.TimeoutExpired:
                    timed_out = True
                finally:
                    _kill_group(process, isolated=self.isolated)
            # RLIMIT_CPU (soft == hard) ends the code with SIGKILL, or SIGXCPU: out of time as well, and
            # whichever of the two clocks fires first is a race, so both read the same.
            exit_code = None if timed_out else process.returncode
            if not timed_out and process.returncode in (-signal.SIGKILL, -signal.SIGXCPU):
                timed_out = True
            stdout, cut_out = _read_head(root / "stdout", config.max_output_chars)
            stderr, cut_err = _read_tail(root / "stderr", config.max_output_chars)  # a traceback ends in its error
            if process.returncode == UNAVAILABLE_EXIT and UNAVAILABLE_MARK in stderr:
                reason = stderr.split(UNAVAILABLE_MARK, 1)[1].strip().splitlines()[0]
                log.error("math.sandbox.isolation_failed", reason=reason)
                return ToolResult(exit_code=None, error=f"isolation failed, the code was not run ({reason})")
            return ToolResult(stdout=stdout, stderr=stderr, exit_code=exit_code,
                              timed_out=timed_out, truncated=cut_out or cut_err)
        finally:
            shutil.rmtree(root, ignore_errors=True)


def _settings(config: SandboxConfig, workdir: Path, code_path: Path, *, isolate: bool) -> dict[str, Any]:
    uid, gid = (NOBODY, NOBODY) if os.geteuid() == 0 else (os.geteuid(), os.getegid())
    return {"isolate": isolate, "timeout": config.timeout, "uid": uid, "gid": gid, "workdir": str(workdir), "code_path": str(code_path),
            "code_file_name": CODE_FILE, "memory_mb": config.memory_mb, "cpu_seconds": config.cpu_seconds,
            "max_file_mb": config.max_file_mb, "max_processes": config.max_processes,
            "max_open_files": config.max_open_files, "disk_mb": config.max_disk_mb}


_PROBE = "import os\nassert os.getpid() == 1, os.getpid()\nprint('isolated')"
_probe_lock = threading.Lock()
_probe_results: dict[str, str | None] = {}


def isolation_unavailable() -> str | None:
    """None when this machine can isolate the sandbox, else why not. Tried once per interpreter path."""
    if not sys.platform.startswith("linux"):
        return f"isolation needs Linux namespaces; this is {sys.platform}"
    with _probe_lock:
        if sys.executable not in _probe_results:
            _probe_results[sys.executable] = _probe()
        return _probe_results[sys.executable]


def _probe() -> str | None:
    sandbox = object.__new__(PythonSandbox)  # not __init__: that is what asks us
    sandbox.config = SandboxConfig(timeout=30.0, max_output_chars=2000)
    sandbox._slots = threading.BoundedSemaphore(1)
    sandbox.isolated = True
    result = sandbox.run(_PROBE)
    if result.ok and result.stdout.strip() == "isolated":
        return None
    if result.error:
        return result.error
    return f"a test run failed (exit {result.exit_code}): {(result.stderr or result.stdout).strip()[-300:]}"


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


def _kill_group(process: subprocess.Popen[bytes], *, isolated: bool) -> None:
    if isolated and process.poll() is None:
        # The isolated launcher ends its namespace by the PID of its init on SIGTERM (the code
        # may have left the group and cleared its death signal); then everything gets SIGKILL.
        try:
            os.killpg(process.pid, signal.SIGTERM)
            process.wait(timeout=2)
        except (ProcessLookupError, PermissionError, subprocess.TimeoutExpired):
            pass
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
