"""The run's env opener for `env.service: http://...`, `https://...` and `launch`.

`RunContext.env_opener()` calls `remote_opener(env_name, service, where=..., config=...)`.
A URL opener checks `/healthz` at once (a wrong URL fails the run at start, not every episode),
then each `open()` is a `RemoteEnv` for one episode. `launch` first starts `beyondagent env
serve` for the env with the spec's env config as a child process (`launch.py`) and stops it
in `aclose()`. The token of a remote service comes from `BEYONDAGENT_ENVSERVICE_TOKEN`; a
launched server gets a fresh random one.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import httpx

from beyondagent_plugin_envservice.client import TOKEN_VAR, EnvServiceClient, RemoteEnv
from beyondagent_core.errors import RunError, SpecError


class RemoteEnvOpener:
    """Opens `RemoteEnv`s on one service; `aclose()` closes the connection pools (and a launched server)."""

    def __init__(self, client: EnvServiceClient, env_type: str, launched: Any = None):
        self.client = client
        self.env_type = env_type
        self.launched = launched

    async def open(self) -> RemoteEnv:
        return self.client.env(self.env_type)

    async def aclose(self) -> None:
        await self.client.aclose()
        if self.launched is not None:
            self.launched.stop()  # idempotent: a second aclose() finds it stopped


def remote_opener(env_name: str, service: str, *, where: str, config: dict[str, Any],
                  launch: dict[str, Any] | None = None) -> RemoteEnvOpener:
    """The opener of `env.service` = a service URL or `launch`, for the env named `env_name`.

    `launch` holds how to start a launched server: `python` (an env's own venv), `log_dir` (where its
    output goes: the run directory's `logs/`; else a temporary file), `args` and
    `call_timeout` (the server's `--call-timeout`, when the spec sets one: the client waits longer).
    """
    if service == "launch":
        from beyondagent_plugin_envservice.client import ClientOptions
        from beyondagent_plugin_envservice.launch import LaunchedServer

        launch = launch or {}
        args = tuple(launch.get("args", ()))
        options = ClientOptions()
        if launch.get("call_timeout") is not None:
            args = (*args, "--call-timeout", f"{launch['call_timeout']:g}")
            # The server's 504 must arrive before the client gives up on the call.
            options = ClientOptions(timeout=max(options.timeout, launch["call_timeout"] + 30))
        log_dir = Path(launch["log_dir"]) if launch.get("log_dir") else None
        server = LaunchedServer.start(env_name, config, where=where, python=launch.get("python"), args=args,
                                      log_dir=log_dir)
        return RemoteEnvOpener(EnvServiceClient(server.url, token=server.token, options=options), env_name,
                               launched=server)
    if not service.startswith(("http://", "https://")):
        raise SpecError(f"env.service must be local, launch or an http(s):// URL, got {service!r}", where=where,
                        hint="e.g. env.service: http://127.0.0.1:8000 (start it with `beyondagent env serve`)")
    token = os.environ.get(TOKEN_VAR) or None
    try:
        client = EnvServiceClient(service, token=token)
    except ValueError as exc:
        raise SpecError(str(exc), where=where) from None
    _check_reachable(service, where)
    return RemoteEnvOpener(client, env_name)


def _check_reachable(url: str, where: str) -> None:
    try:
        response = httpx.get(f"{url.rstrip('/')}/healthz", timeout=10)
    except httpx.HTTPError as exc:
        raise RunError(f"cannot reach the environment service at {url}: {exc}", where=where,
                       hint="start it with `beyondagent env serve --env NAME --port PORT`, or use "
                       "env.service: launch to start one for the run") from None
    if response.status_code != 200:
        raise RunError(f"the environment service at {url} is not healthy: /healthz answered "
                       f"{response.status_code}", where=where)
