"""The HTTP server: AgentEvolver's EnvService endpoints on Starlette, served by uvicorn.

`create_app(pool, token=..., max_body_bytes=...)` builds the app; `serve(...)` runs it on a
socket it binds itself (port 0 picks a free port), prints one `envservice listening on URL`
line to stdout once bound, and shuts down gracefully on SIGTERM/SIGINT: in-flight requests
finish, then every instance is closed. Errors are JSON with one line of text (`protocol.py`);
tracebacks go to the server log only. The bearer token is compared in constant time and never
logged. Only Starlette and uvicorn are needed (no pydantic), so the server installs next to an
env with old pins; uvicorn uses httptools and uvloop when they are installed.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import os
import socket
import sys
import threading
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from starlette.applications import Starlette
from starlette.requests import ClientDisconnect
from starlette.requests import Request as HttpRequest
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

from beyondagent_plugin_envservice import protocol
from beyondagent_plugin_envservice.instances import InstancePool
from beyondagent_plugin_envservice.protocol import Request, ServiceError
from beyondagent_core.serving import (
    DEFAULT_BODY_TIMEOUT,
    DEFAULT_HEADER_TIMEOUT,
    DEFAULT_MAX_CONNECTIONS,
    BodyTimeout,
    BodyTooLarge,
    SlowClients,
    guarded_protocol,
    read_bounded_body,
    url_of,
)
from beyondagent_core.logs import get_logger
from beyondagent_core.protocols import OPTIONAL_ENV_METHODS
from beyondagent_core.types import Task

log = get_logger("beyondagent.envservice")

DEFAULT_MAX_BODY_BYTES = 4 * 1024 * 1024
LOOPBACK = ("127.0.0.1", "localhost", "::1")


class JSONResponse(Response):
    media_type = "application/json"

    def render(self, content: Any) -> bytes:
        return protocol.dumps(content)


class EnvService:
    """The endpoints, over one `InstancePool`."""

    def __init__(self, pool: InstancePool, *, token: str | None = None,
                 max_body_bytes: int = DEFAULT_MAX_BODY_BYTES, body_timeout: float = DEFAULT_BODY_TIMEOUT):
        self.pool = pool
        self._token = None if not token else f"Bearer {token}".encode()
        self.max_body_bytes = max_body_bytes
        self.body_timeout = body_timeout
        self.calls: Counter[str] = Counter()
        self.errors: Counter[int] = Counter()
        self.slow_clients = SlowClients()  # filled by the protocol class `uvicorn_config` builds

    # --- endpoints -----------------------------------------------------------------------------

    async def create(self, req: Request) -> Any:
        self._check_env_type(req.require("env_type"))
        task_id = req.require("task_id")
        task = _task_from(req, task_id)
        return await self.pool.create(task, req.instance_id)

    async def step(self, req: Request) -> Any:
        if not isinstance(req.messages, dict):
            raise protocol.bad_request("messages must be the assistant message, a JSON object like "
                                       '{"role": "assistant", "content": "..."}')
        return protocol.step_reply(await self.pool.call(req.instance_id, "step", req.messages))

    async def evaluate(self, req: Request) -> Any:
        reward = await self.pool.call(req.instance_id, "evaluate")
        return protocol.evaluate_reply(reward, req.params)

    async def get_info(self, req: Request) -> Any:
        method = req.params.get("method")
        if method is None:
            return self.pool.info(req.instance_id)
        if method not in OPTIONAL_ENV_METHODS:  # an allowlist: a client may not call just any attribute
            self.pool.info(req.instance_id)  # an unknown instance is still a 404 first
            raise ServiceError(404, "unknown_method",
                               f"params.method {method!r} cannot be called through /get_info; "
                               f"callable: {', '.join(OPTIONAL_ENV_METHODS)}")
        args = req.params.get("args", [])
        if not isinstance(args, list):
            raise protocol.bad_request(f"params.args must be a JSON array, got {type(args).__name__}")
        return await self.pool.call(req.instance_id, method, *args)

    async def release(self, req: Request) -> tuple[Any, bool]:
        return None, await self.pool.release(req.instance_id)

    async def get_env_profile(self, req: Request) -> Any:
        self._check_env_type(req.require("env_type"))
        split = req.params.get("split", "train")
        if not isinstance(split, str) or not split:
            raise protocol.bad_request(f"params.split must be a non-empty string, got {split!r}")
        return await self.pool.task_ids(split)

    # --- plumbing ------------------------------------------------------------------------------

    def _check_env_type(self, env_type: str) -> None:
        served = self.pool.env_name
        if env_type.rpartition("/")[2] != served.rpartition("/")[2]:  # `plugin/name` or `name`
            raise ServiceError(404, "unknown_env",
                               f"this service hosts the env {served!r}, not {env_type!r}")

    def endpoint(self, name: str) -> Callable[[HttpRequest], Awaitable[Response]]:
        handler = getattr(self, name)

        async def handle(request: HttpRequest) -> Response:
            self.calls[name] += 1
            try:
                self._authorize(request)
                req = protocol.parse_request(await self._body(request))
                result = await handler(req)
                if name == "release":
                    data, success = result
                    return JSONResponse(protocol.ok(data, success))
                return JSONResponse(protocol.ok(result))
            except ServiceError as exc:
                return self._error(exc)
            except ClientDisconnect:  # the client went away mid-request: its business, not our error
                log.info("envservice.client_disconnected", endpoint=name)
                return Response(status_code=400)
            except Exception as exc:  # noqa: BLE001 - our bug: one line to the client, traceback in our log
                log.error("envservice.internal_error", endpoint=name, error=protocol.one_line(exc),
                          traceback=protocol.format_traceback(exc))
                return self._error(ServiceError(500, "internal_error",
                                                f"internal error in /{name}: {protocol.one_line(exc)}"))

        return handle

    async def stats(self, request: HttpRequest) -> Response:
        try:
            self._authorize(request)
        except ServiceError as exc:
            return self._error(exc)
        return JSONResponse({"success": True, "data": {
            **self.pool.stats(),
            "calls": dict(self.calls),
            "errors": {str(status): count for status, count in sorted(self.errors.items())},
            "slow_clients_closed": self.slow_clients.closed,
        }})

    async def healthz(self, request: HttpRequest) -> Response:
        return PlainTextResponse("OK")

    def _error(self, exc: ServiceError) -> Response:
        self.errors[exc.status] += 1
        headers = {"www-authenticate": "Bearer"} if exc.status == 401 else None
        return JSONResponse(exc.body(), status_code=exc.status, headers=headers)

    def _authorize(self, request: HttpRequest) -> None:
        if self._token is None:
            return
        given = request.headers.get("authorization", "").encode()
        if not hmac.compare_digest(given, self._token):
            raise ServiceError(401, "unauthorized",
                               "missing or wrong bearer token: send 'Authorization: Bearer <token>'")

    async def _body(self, request: HttpRequest) -> bytes:
        """The body, at most `max_body_bytes` (413), within `body_timeout` (408): `read_bounded_body`."""
        try:
            return await read_bounded_body(request, limit=self.max_body_bytes, timeout=self.body_timeout)
        except BodyTooLarge:
            raise _too_large(self.max_body_bytes) from None
        except BodyTimeout:
            raise ServiceError(408, "body_timeout", f"the request body did not arrive within {self.body_timeout:g}s "
                               "(--body-timeout)") from None


def _too_large(limit: int) -> ServiceError:
    return ServiceError(413, "too_large", f"the request body is larger than the limit of {limit} bytes "
                        "(--max-body-bytes)")


def _task_from(req: Request, task_id: str) -> Task:
    """`params.task` (a full Task record, what our client sends) or a bare task id."""
    raw = req.params.get("task")
    if raw is None:
        return Task(task_id=task_id, env=req.env_type)
    try:
        task = Task.from_dict(raw)
    except (ValueError, TypeError) as exc:
        raise protocol.bad_request(f"params.task is not a valid Task record: {exc}") from None
    if task.task_id != task_id:
        raise protocol.bad_request(f"params.task.task_id {task.task_id!r} differs from task_id {task_id!r}")
    return task


def create_app(pool: InstancePool, *, token: str | None = None, max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
               body_timeout: float = DEFAULT_BODY_TIMEOUT) -> Starlette:
    """The Starlette app; its lifespan runs the idle reaper and closes every instance at shutdown."""
    service = EnvService(pool, token=token, max_body_bytes=max_body_bytes, body_timeout=body_timeout)
    routes = [Route(f"/{name}", service.endpoint(name), methods=["POST"]) for name in protocol.POST_ENDPOINTS]
    routes += [Route("/healthz", service.healthz, methods=["GET"]),
               Route("/stats", service.stats, methods=["GET"])]

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        reaper = asyncio.create_task(pool.reaper(), name="envservice-reaper")
        start = getattr(pool.host, "start", None)  # a host with work to do up front (warm workers)
        if start is not None:
            await start()
        try:
            yield
        finally:
            reaper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reaper
            service.slow_clients.flush()
            closed = await pool.close_all()
            log.info("envservice.shutdown", closed=closed, **{k: pool.counts[k] for k in ("created", "reaped")})

    async def not_found(request: HttpRequest, exc: Exception) -> Response:
        status = getattr(exc, "status_code", 404)
        message = (f"no endpoint {request.url.path}; POST one of " + ", ".join(f"/{n}" for n in protocol.POST_ENDPOINTS)
                   + ", or GET /healthz, /stats")
        if status == 405:
            message = f"{request.method} is not allowed on {request.url.path}"
        return service._error(ServiceError(status, "not_found" if status == 404 else "method_not_allowed", message))

    app = Starlette(routes=routes, lifespan=lifespan, exception_handlers={404: not_found, 405: not_found})
    app.state.service = service
    return app


# --- running it ---------------------------------------------------------------------------------


def uvicorn_config(app: Starlette, *, graceful_s: float, header_timeout: float = DEFAULT_HEADER_TIMEOUT,
                   max_connections: int = DEFAULT_MAX_CONNECTIONS) -> Any:
    """uvicorn tuned for many small requests: httptools/uvloop when installed, no access log; a
    deadline on request headers and a connection cap (`slow_clients`)."""
    import uvicorn
    from uvicorn.config import HTTP_PROTOCOLS
    from uvicorn.importer import import_from_string

    protocol = import_from_string(HTTP_PROTOCOLS["httptools" if _installed("httptools") else "h11"])
    return uvicorn.Config(
        app,
        http=guarded_protocol(protocol, header_timeout, _slow_clients(app)),
        limit_concurrency=max_connections,
        loop="uvloop" if _installed("uvloop") else "asyncio",
        lifespan="on",
        log_level="warning",
        access_log=False,  # one line per step is noise, and a log is no place for request details
        proxy_headers=False,  # served directly; X-Forwarded-* from a client is not to be trusted
        timeout_graceful_shutdown=max(1, int(graceful_s)),
        backlog=2048,
    )


def serve(app: Starlette, sock: socket.socket, *, graceful_s: float, exit_with_parent: int | None = None,
          header_timeout: float = DEFAULT_HEADER_TIMEOUT, max_connections: int = DEFAULT_MAX_CONNECTIONS) -> None:
    """Run until SIGTERM/SIGINT (uvicorn's handlers) or until the parent `exit_with_parent` dies."""
    import uvicorn

    server = uvicorn.Server(uvicorn_config(app, graceful_s=graceful_s, header_timeout=header_timeout,
                                           max_connections=max_connections))
    if exit_with_parent:
        threading.Thread(target=_watch_parent, args=(server, exit_with_parent), daemon=True).start()
    print(f"envservice listening on {url_of(sock)}", flush=True)
    server.run(sockets=[sock])


def _watch_parent(server: Any, parent: int) -> None:
    """A launched server must not outlive the run that launched it (even a killed one)."""
    import time

    while not server.should_exit:
        if os.getppid() != parent:
            log.warning("envservice.parent_gone", parent=parent)
            server.should_exit = True
            return
        time.sleep(0.5)


def _slow_clients(app: Starlette) -> SlowClients | None:
    service = getattr(app.state, "service", None)
    return service.slow_clients if isinstance(service, EnvService) else None


def _installed(module: str) -> bool:
    if module in sys.modules:
        return True
    import importlib.util

    return importlib.util.find_spec(module) is not None
