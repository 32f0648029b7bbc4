"""`env.service: launch`: `beyondagent env serve` as a child process of the run.

`LaunchedServer.start(env, config)` runs the server on a free port (`--port 0`; the server
prints the URL it bound), with a fresh random bearer token passed through the environment,
waits for `/healthz`, and `stop()` sends SIGTERM (the server closes every instance) and waits,
killing it only if it does not exit. The child also watches its parent, so a run that is
killed does not leave a server behind; an `atexit` hook stops it on a normal interpreter exit.
Its output goes to a log file of its own (`log_dir`: a run's `logs/`, where each launch, resumed runs'
and verl's workers' included, gets a new `envservice-*.log`; without one a temporary file, removed when
the server stops cleanly and kept when it failed) whose tail is shown when it fails to start.
"""

from __future__ import annotations

import atexit
import json
import os
import secrets
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from beyondagent_core.errors import RunError
from beyondagent_core.logs import get_logger

log = get_logger("beyondagent.envservice")

TOKEN_VAR = "BEYONDAGENT_LAUNCHED_ENVSERVICE_TOKEN"
READY_PREFIX = "envservice listening on "


def _server_environment(token: str, python: str | None = None) -> dict[str, str]:
    """The child's environment: the run's, with the token, and this plugin among the plugins it loads.

    `env serve` is this plugin's own command, so a run that names the plugins to load
    (`BEYONDAGENT_PLUGINS`, or autoload off as the testing kit sets it) still gets a server. A
    server in an env's own venv (`python`, its interpreter) gets what every child in a venv gets
    (`venv_environ`: nothing of this interpreter's leaking in, its modules' byte-code kept).
    """
    from beyondagent_core.plugins import Switches  # the run's own reading of the switches
    from beyondagent_core.venvs import venv_environ

    extra = {TOKEN_VAR: token, "PYTHONUNBUFFERED": "1"}
    environment = {**os.environ, **extra} if python is None else venv_environ(Path(python).parent.parent, extra)
    allowed = environment.get("BEYONDAGENT_PLUGINS", "")
    if allowed.strip() or not Switches.from_environment().autoload:
        environment["BEYONDAGENT_PLUGINS"] = ",".join(filter(None, [allowed.strip(), "envservice"]))
    return environment


class LaunchedServer:
    """One child `beyondagent env serve` process."""

    def __init__(self, proc: subprocess.Popen, url: str, token: str, log_path: Path, *, temporary_log: bool = False):
        self.proc = proc
        self.url = url
        self.token = token
        self.log_path = log_path
        self.temporary_log = temporary_log  # removed after a clean stop: each launch would leave one behind

    @classmethod
    def start(cls, env: str, config: dict[str, Any] | None = None, *, args: list[str] | tuple[str, ...] = (),
              log_dir: Path | None = None, python: str | None = None, timeout: float = 120.0,
              where: str = "env.service") -> LaunchedServer:
        """Start the server for `env` with `config` (the env block's keys) and wait until it is healthy."""
        token = secrets.token_urlsafe(24)
        temporary_log = log_dir is None
        if log_dir is not None:
            Path(log_dir).mkdir(parents=True, exist_ok=True)
        handle, name = tempfile.mkstemp(prefix="envservice-" if log_dir else "beyondagent-envservice-",
                                        suffix=".log", dir=log_dir)  # a new file each launch: never another's
        os.close(handle)
        log_path = Path(name)
        command = [python or sys.executable, "-m", "beyondagent_core.cli", "env", "serve", "--env", env,
                   "--host", "127.0.0.1", "--port", "0", "--token-env", TOKEN_VAR,
                   "--exit-with-parent", str(os.getpid()), *args]
        pairs = [f"{key}={json.dumps(value, default=str)}" for key, value in (config or {}).items()]  # JSON is YAML
        if pairs:
            command += ["--config", *pairs]
        environment = _server_environment(token, python)
        with log_path.open("wb") as output:
            proc = subprocess.Popen(command, stdout=output, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    env=environment)
        server = cls(proc, "", token, log_path, temporary_log=temporary_log)
        atexit.register(server.stop)
        try:
            server.url = server._wait_ready(timeout, where)
        except BaseException:
            server.stop()
            raise
        log.info("envservice.launched", env=env, url=server.url, pid=proc.pid, log=str(log_path))
        return server

    def _wait_ready(self, timeout: float, where: str) -> str:
        deadline = time.monotonic() + timeout
        url: str | None = None
        while True:
            if url is None:
                for line in self.log_path.read_text(errors="replace").splitlines():
                    if line.startswith(READY_PREFIX):
                        url = line[len(READY_PREFIX):].strip()
            if url is not None:
                try:
                    if httpx.get(f"{url}/healthz", timeout=2, trust_env=False).status_code == 200:
                        return url
                except httpx.HTTPError:
                    pass
            code = self.proc.poll()
            if code is not None:
                raise RunError(f"the launched environment service exited with code {code} before it was ready",
                               where=where, hint=f"its output ({self.log_path}):\n{self.tail()}")
            if time.monotonic() > deadline:
                raise RunError(f"the launched environment service was not ready within {timeout:g}s",
                               where=where, hint=f"its output ({self.log_path}):\n{self.tail()}")
            time.sleep(0.05)

    def tail(self, lines: int = 15) -> str:
        try:
            text = self.log_path.read_text(errors="replace").splitlines()
        except OSError:
            return "(no output)"
        return "\n".join(text[-lines:]) or "(no output)"

    @property
    def running(self) -> bool:
        return self.proc.poll() is None

    def stop(self, timeout: float = 30.0) -> int | None:
        """SIGTERM (every instance is closed), then SIGKILL after `timeout`; returns the exit code."""
        atexit.unregister(self.stop)
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                log.warning("envservice.launched_kill", pid=self.proc.pid, waited_s=timeout)
                self.proc.kill()
                self.proc.wait()
            log.info("envservice.launched_stopped", pid=self.proc.pid, code=self.proc.returncode)
        # uvicorn re-raises the SIGTERM it handled once shut down gracefully: -SIGTERM is a clean stop too
        if self.temporary_log and self.proc.returncode in (0, -signal.SIGTERM):
            self.log_path.unlink(missing_ok=True)
        return self.proc.returncode
