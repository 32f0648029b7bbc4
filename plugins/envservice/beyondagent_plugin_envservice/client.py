"""The async client of the environment service, and `RemoteEnv`: an `AsyncEnv` over HTTP.

`EnvServiceClient` pools connections with httpx. Training backends call `asyncio.run` once per
step, so one client is used from several event loops in turn, and an httpx client must never
cross loops: the client keeps one `httpx.AsyncClient` per running loop. Each is closed on its
own loop when that loop ends (a keeper task that `asyncio.run` cancels at its end closes it),
or by `aclose()`.

Retries (`retries`, exponential backoff with jitter) cover what cannot do harm twice: a
connection that never opened (any call), and for idempotent calls (create with the
client-chosen instance_id, evaluate, get_info, release, get_env_profile) a dropped connection
or a 5xx the server marks retryable. A `step` that may have reached the server is never sent
twice. Every call has a timeout (`timeout`, longer than the server's own call timeout so the
server's 504 arrives first).

`RemoteEnv` releases its instance on `close()`, on `async with` exit and when its task is
cancelled (the release is shielded); an instance whose client died is reaped by the server's TTL.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import uuid
from types import TracebackType
from typing import Any
from urllib.parse import urlsplit

import attrs
import httpx

from beyondagent_plugin_envservice import protocol
from beyondagent_plugin_envservice.transport import LeanTransport
from beyondagent_core.errors import EnvMethodMissing, RunError
from beyondagent_core.logs import get_logger
from beyondagent_core.protocols import EnvReset, EnvStep, Message
from beyondagent_core.secrets import remember
from beyondagent_core.types import Reward, Task

log = get_logger("beyondagent.envservice")

TOKEN_VAR = "BEYONDAGENT_ENVSERVICE_TOKEN"
"""Where a run reads the bearer token of a remote environment service."""


class EnvServiceError(RunError):
    """An environment service answered with an error (or could not be reached)."""

    def __init__(self, message: str, *, where: str | None = None, hint: str | None = None,
                 status: int | None = None, code: str | None = None):
        super().__init__(message, where=where, hint=hint)
        self.status = status
        self.code = code


@attrs.define
class ClientOptions:
    """`timeout`: seconds per call; `retries`: extra attempts; `backoff`: the first wait in seconds."""

    timeout: float = 120.0
    connect_timeout: float = 10.0
    retries: int = 3
    backoff: float = 0.2
    max_connections: int = 512


@attrs.define(eq=False)
class _LoopClient:
    loop: asyncio.AbstractEventLoop
    http: httpx.AsyncClient
    keeper: asyncio.Task | None = None
    closing: bool = False


class EnvServiceClient:
    """Calls one environment service at `url` (e.g. `http://127.0.0.1:8000`)."""

    def __init__(self, url: str, *, token: str | None = None, options: ClientOptions | None = None):
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ValueError(f"an environment service URL looks like http://host:port, got {url!r}")
        self.url = url.rstrip("/")
        self.options = options or ClientOptions()
        self._headers = {"content-type": "application/json"}
        if token:
            remember(token)
            self._headers["authorization"] = f"Bearer {token}"
        # Loopback needs no proxy; a proxy variable must not send local traffic elsewhere.
        self._trust_env = parts.hostname not in ("127.0.0.1", "localhost", "::1")
        self._clients: dict[int, _LoopClient] = {}

    # --- connections, one pool per event loop ---------------------------------------------------

    def _http(self) -> httpx.AsyncClient:
        loop = asyncio.get_running_loop()
        entry = self._clients.get(id(loop))
        if entry is not None and entry.loop is loop:
            return entry.http
        for key, other in list(self._clients.items()):
            if other.loop.is_closed():
                del self._clients[key]  # its loop ended without running our keeper: drop it
        opts = self.options
        http = httpx.AsyncClient(
            timeout=httpx.Timeout(opts.timeout, connect=opts.connect_timeout),
            limits=httpx.Limits(max_connections=opts.max_connections, max_keepalive_connections=opts.max_connections),
            headers=self._headers, trust_env=self._trust_env,
            transport=LeanTransport() if self.url.startswith("http://") else None,
        )
        entry = _LoopClient(loop, http)
        entry.keeper = loop.create_task(self._keep(entry), name="envservice-client-keeper")
        self._clients[id(loop)] = entry
        return http

    async def _keep(self, entry: _LoopClient) -> None:
        """Wait until the loop ends (`asyncio.run` cancels us), then close the pool on its own loop."""
        try:
            await asyncio.get_running_loop().create_future()
        finally:
            if not entry.closing:
                # `asyncio.run` cancels every task at once: episodes cancelled with us still
                # release their instances through this pool, so it closes after them.
                others = asyncio.all_tasks() - {asyncio.current_task()}
                if others:
                    await asyncio.wait(others, timeout=self.options.timeout)
            if self._clients.get(id(entry.loop)) is entry:
                del self._clients[id(entry.loop)]
            await entry.http.aclose()

    async def aclose(self) -> None:
        """Close every connection pool: this loop's now, other live loops' on their own loop."""
        current = asyncio.get_running_loop()
        for entry in list(self._clients.values()):
            if entry.keeper is not None and not entry.keeper.done():
                entry.closing = True
                if entry.loop is current:
                    entry.keeper.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await entry.keeper
                elif not entry.loop.is_closed():
                    entry.loop.call_soon_threadsafe(entry.keeper.cancel)
        self._clients.clear()

    # --- requests --------------------------------------------------------------------------------

    async def request(self, endpoint: str, *, idempotent: bool, env_type: str | None = None,
                      task_id: str | None = None, instance_id: str | None = None, messages: Any = None,
                      params: dict[str, Any] | None = None) -> tuple[Any, bool]:
        """POST one endpoint; returns `(data, success)` or raises `EnvServiceError`."""
        body = protocol.dumps({"env_type": env_type, "task_id": task_id, "instance_id": instance_id,
                               "messages": {} if messages is None else messages, "params": params or {}})
        reply = await self._send("POST", endpoint, body, idempotent=idempotent)
        if not isinstance(reply, dict) or "success" not in reply:
            raise EnvServiceError(f"{self.url}/{endpoint} did not answer {{success, data}}: {_short(reply)}",
                                  where=f"{self.url}/{endpoint}")
        return reply.get("data"), bool(reply["success"])

    async def healthz(self) -> bool:
        try:
            response = await self._http().get(f"{self.url}/healthz", timeout=self.options.connect_timeout)
        except httpx.HTTPError:
            return False
        return response.status_code == 200

    async def stats(self) -> dict[str, Any]:
        reply = await self._send("GET", "stats", None, idempotent=True)
        return reply["data"]

    async def task_ids(self, env_type: str, split: str = "train") -> list[str]:
        data, _ = await self.request("get_env_profile", idempotent=True, env_type=env_type, params={"split": split})
        if not isinstance(data, list):
            raise EnvServiceError(f"/get_env_profile must return a list of task ids, got {_short(data)}",
                                  where=f"{self.url}/get_env_profile")
        return [str(task_id) for task_id in data]

    def env(self, env_type: str) -> RemoteEnv:
        """A `RemoteEnv` for one episode of `env_type`."""
        return RemoteEnv(self, env_type)

    async def _send(self, method: str, endpoint: str, body: bytes | None, *, idempotent: bool) -> Any:
        url = f"{self.url}/{endpoint}"
        attempts = 1 + max(0, self.options.retries)
        for attempt in range(attempts):
            last = attempt == attempts - 1
            try:
                response = await self._http().request(method, url, content=body)
            except (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout) as exc:
                if last:  # nothing reached the server: always safe to resend
                    raise _unreachable(self.url, exc) from None
            except httpx.TimeoutException as exc:
                if last or not idempotent or isinstance(exc, httpx.ReadTimeout):
                    raise EnvServiceError(f"{url} did not answer within {self.options.timeout:g}s "
                                          f"({type(exc).__name__})", where=url,
                                          hint="the env may be slow: raise the client timeout") from None
            except httpx.TransportError as exc:  # the connection broke mid-request
                if last or not idempotent:
                    raise EnvServiceError(f"{url}: the connection failed: {type(exc).__name__}: {exc}",
                                          where=url) from None
            else:
                reply = _decode(response)
                if response.status_code < 400:
                    return reply
                error = _error(url, response.status_code, reply)
                retryable = response.status_code >= 500 or response.status_code == 429
                if isinstance(reply, dict) and reply.get("retryable") is not None:
                    retryable = bool(reply["retryable"])  # ours says; a proxy's 5xx may be retried
                if last or not idempotent or not retryable:
                    raise error
            delay = self.options.backoff * (2 ** attempt) * (0.5 + random.random())
            log.debug("envservice.retry", url=url, attempt=attempt + 1, delay_s=round(delay, 3))
            await asyncio.sleep(delay)
        raise AssertionError("unreachable")  # pragma: no cover


class RemoteEnv:
    """One episode's env on an environment service (the `AsyncEnv` protocol).

    The instance id is chosen here, before `/create` is sent, so a create that is retried or
    cancelled halfway can still be released.
    """

    def __init__(self, client: EnvServiceClient, env_type: str):
        self.client = client
        self.env_type = env_type
        self.instance_id: str | None = None
        self._closed = False
        self._releasing: asyncio.Future | None = None

    async def reset(self, task: Task) -> EnvReset:
        self._check_open("reset")
        if self.instance_id is not None:
            await self._release()  # a second episode on the same RemoteEnv: free the first
        self.instance_id = f"ba-{uuid.uuid4().hex}"
        data, _ = await self.client.request("create", idempotent=True, env_type=self.env_type, task_id=task.task_id,
                                            instance_id=self.instance_id, params={"task": task.to_dict()})
        return self._parse(protocol.parse_reset, data, "create")

    async def step(self, action: Message) -> EnvStep:
        data, _ = await self.client.request("step", idempotent=False, instance_id=self._instance("step"),
                                            messages=dict(action))
        return self._parse(protocol.parse_step, data, "step")

    async def evaluate(self) -> Reward:
        data, _ = await self.client.request("evaluate", idempotent=True, instance_id=self._instance("evaluate"),
                                            params={protocol.FULL_REWARD_PARAM: "full"})
        return self._parse(protocol.parse_reward, data, "evaluate")

    async def call(self, method: str, *args: Any) -> Any:
        """An optional env method through `/get_info`; `EnvMethodMissing` when the env lacks it."""
        try:
            data, _ = await self.client.request("get_info", idempotent=True, instance_id=self._instance(method),
                                                params={"method": method, "args": list(args)})
        except EnvServiceError as exc:
            if exc.code == "unknown_method":
                raise EnvMethodMissing(self.env_type, method) from None
            raise
        return data

    async def close(self) -> None:
        """Release the instance once; shielded, so a cancelled episode still frees it."""
        if self._closed:
            return
        self._closed = True
        if self.instance_id is not None:
            # Held here so a second cancel (which interrupts only our wait) leaves it running.
            self._releasing = asyncio.ensure_future(self._release())
            await asyncio.shield(self._releasing)

    async def __aenter__(self) -> RemoteEnv:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.close()

    async def _release(self) -> None:
        instance_id, self.instance_id = self.instance_id, None
        try:
            await self.client.request("release", idempotent=True, instance_id=instance_id)
        except EnvServiceError as exc:  # the server's TTL reaps what we could not release
            log.warning("envservice.release_failed", instance=instance_id, error=exc.message)

    def _instance(self, method: str) -> str:
        self._check_open(method)
        if self.instance_id is None:
            raise RuntimeError(f"RemoteEnv.{method}() before reset()")
        return self.instance_id

    def _check_open(self, method: str) -> None:
        if self._closed:
            raise RuntimeError(f"RemoteEnv.{method}() called after close()")

    def _parse(self, parse: Any, data: Any, endpoint: str) -> Any:
        try:
            return parse(data)
        except (ValueError, TypeError) as exc:
            raise EnvServiceError(f"{self.client.url}/{endpoint}: {exc}", where=f"{self.client.url}/{endpoint}") \
                from None


def _decode(response: httpx.Response) -> Any:
    try:
        return protocol.loads(response.content)
    except ValueError:
        return response.text


def _error(url: str, status: int, reply: Any) -> EnvServiceError:
    if isinstance(reply, dict):
        message = reply.get("error") or reply.get("detail") or _short(reply)
        code = reply.get("code")
    else:
        message, code = _short(reply) or f"HTTP {status}", None
    hint = {401: f"set {TOKEN_VAR} to the service's token",
            429: "the service is full: raise its --max-instances or run fewer episodes at once"}.get(status)
    return EnvServiceError(f"{url} answered {status}: {message}", where=url, hint=hint, status=status, code=code)


def _unreachable(url: str, exc: Exception) -> EnvServiceError:
    return EnvServiceError(f"cannot reach the environment service at {url}: {exc}", where=url,
                           hint="start it with `beyondagent env serve --env NAME`, or check the URL in env.service")


def _short(value: Any, limit: int = 200) -> str:
    text = value if isinstance(value, str) else repr(value)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."
