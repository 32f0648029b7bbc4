"""The gateway's HTTP server: Starlette on uvicorn, on loopback, in a thread of its own.

`Gateway.open(episode, loop)` gives an episode its `Endpoint`: its base URL,
`http://127.0.0.1:<port>/<id>/v1`, and its API key. The routes under it are `POST
chat/completions`, `GET models` and, beside `v1`, `POST /<id>/reward` (`{"score": 1.0, "success":
true, "reason": "..."}`: an agent that knows its reward posts it; a score must be a finite number
within +-`api.REWARD_LIMIT`). Each call is handed to the episode's `complete` on the event loop the
episode lives on (the rollout's), so the server never blocks the generator and the generator never
blocks the server. `close(id)` ends an episode: later calls to its URL get 410 with the reason.
Errors are OpenAI-shaped JSON with one line of text; tracebacks go to the log only. Streaming
sends the whole reply as `chat.completion.chunk` events once it is sampled (the generator samples
whole turns), then `data: [DONE]`.

The gateway is a boundary: any local process can reach the port.
- Every route but `/healthz` takes only callers that send the episode's key (`Authorization:
  Bearer <key>`, what an OpenAI client sends as its `api_key`), checked in constant time as soon
  as the headers are in, before the body is read; anything else is a 401 that says nothing about
  the episode. A key is an HMAC of the episode id under a secret drawn when the gateway starts,
  which never leaves this process: a key opens its own episode only, and only the workflow, which
  hands it to that episode's agent, ever sees it. Episode ids are not secrets and are logged and
  quoted only shortened (`short_id`).
- Request headers have a deadline (`header_timeout`), bodies another (`body_timeout`, 408) and a
  size cap (`max_body_bytes`, 413), connections a cap (`max_connections`, 503): the env service's
  guards (`beyondagent_core.serving`). JSON nested too deeply is a 400.

`shared_gateway()` is the process's gateway, started on first use.
"""

from __future__ import annotations

import asyncio
import collections
import hashlib
import hmac
import importlib.util
import json
import secrets
import socket
import threading
import uuid
from collections.abc import AsyncIterator
from typing import Any

import attrs

from beyondagent_core.serving import (
    DEFAULT_BODY_TIMEOUT,
    DEFAULT_HEADER_TIMEOUT,
    DEFAULT_MAX_CONNECTIONS,
    BodyTimeout,
    BodyTooLarge,
    SlowClients,
    guarded_protocol,
    read_bounded_body,
)
from beyondagent_plugin_gateway.api import (
    MAX_REASON_CHARS,
    ApiError,
    completion_body,
    parse_request,
    reward_score,
    stream_chunks,
)
from beyondagent_plugin_gateway.episode import EpisodeEnded, GatewayEpisode
from beyondagent_core.logs import get_logger
from beyondagent_core.types import Reward

log = get_logger("beyondagent.gateway")

MAX_BODY_BYTES = 8 << 20
ENDED_REMEMBERED = 10_000  # ended episode ids kept to answer 410 instead of 404
KEY_PREFIX = "ba-episode-"
# An idle keep-alive connection is closed after 8 s: after the clients' own expiry (httpx: 5 s), so a
# client never sends on a connection the server is closing, and before the header deadline (10 s),
# which would count it as a slow client.
KEEP_ALIVE_S = 8


def short_id(episode_id: str) -> str:
    """An episode id as logs and error messages show it: enough to tell episodes apart."""
    return f"{episode_id[:8]}…" if len(episode_id) > 8 else episode_id


@attrs.frozen
class Endpoint:
    """What an episode's agent gets: its base URL and the key its client sends (`api_key`)."""

    episode_id: str
    base_url: str
    api_key: str = attrs.field(repr=False)


class Gateway:
    def __init__(self, host: str = "127.0.0.1", port: int = 0, *, max_body_bytes: int = MAX_BODY_BYTES,
                 body_timeout: float = DEFAULT_BODY_TIMEOUT, header_timeout: float = DEFAULT_HEADER_TIMEOUT,
                 max_connections: int = DEFAULT_MAX_CONNECTIONS):
        self.host, self.port = host, port
        self.max_body_bytes = max_body_bytes
        self.body_timeout = body_timeout
        self.header_timeout = header_timeout
        self.max_connections = max_connections
        self.slow_clients = SlowClients(name="gateway", setting="the gateway's header timeout")
        self.refused: collections.Counter[int] = collections.Counter()  # 401s, 413s...: counted, not logged
        self._secret = secrets.token_bytes(32)  # never leaves this object: keys are derived from it
        self._episodes: dict[str, tuple[GatewayEpisode, asyncio.AbstractEventLoop]] = {}
        self._ended: collections.OrderedDict[str, str] = collections.OrderedDict()
        self._lock = threading.Lock()
        self._server: Any = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    # --- episodes -------------------------------------------------------------------------------

    def open(self, episode: GatewayEpisode, loop: asyncio.AbstractEventLoop | None = None) -> Endpoint:
        """Serve `episode`; returns its endpoint (base URL and key) for its agent's OpenAI client."""
        self.start()
        episode_id = uuid.uuid4().hex
        with self._lock:
            self._episodes[episode_id] = (episode, loop or asyncio.get_running_loop())
        return Endpoint(episode_id, f"{self.url}/{episode_id}/v1", self._key(episode_id))

    def close(self, episode_id: str, reason: str = "the episode has ended") -> None:
        with self._lock:
            found = self._episodes.pop(episode_id, None)
            self._ended[episode_id] = reason
            while len(self._ended) > ENDED_REMEMBERED:
                self._ended.popitem(last=False)
        if found is not None:
            found[0].close()

    def _key(self, episode_id: str) -> str:
        return KEY_PREFIX + hmac.new(self._secret, episode_id.encode(), hashlib.sha256).hexdigest()

    def _authorize(self, http: Any, episode_id: str) -> None:
        """A 401 unless the request carries `episode_id`'s key (whether the episode exists or not)."""
        given = http.headers.get("authorization", "").encode()
        if not hmac.compare_digest(given, f"Bearer {self._key(episode_id)}".encode()):
            raise ApiError(401, "missing or wrong API key: each episode's agent gets its own key with its base URL "
                                "(run(task, llm_base_url, env, api_key)); give it to the client as its api_key",
                           code="invalid_api_key")

    def _episode(self, episode_id: str) -> tuple[GatewayEpisode, asyncio.AbstractEventLoop]:
        with self._lock:
            found = self._episodes.get(episode_id)
            ended = self._ended.get(episode_id)
        if found is not None:
            return found
        if ended is not None:
            raise ApiError(410, f"episode {short_id(episode_id)} is over ({ended}); its base URL takes no more calls",
                           code="episode_ended")
        raise ApiError(404, f"no episode {short_id(episode_id)} at this gateway any more: each episode's agent gets "
                            "its own base URL (the llm_base_url argument of its run function)",
                       code="unknown_episode")

    # --- serving --------------------------------------------------------------------------------

    def start(self) -> None:
        if self._thread is not None:
            return
        import uvicorn
        from uvicorn.config import HTTP_PROTOCOLS
        from uvicorn.importer import import_from_string

        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((self.host, self.port))
        sock.listen(2048)  # now: a client connecting before uvicorn is up waits in the backlog, not refused
        self.port = sock.getsockname()[1]
        http = "httptools" if importlib.util.find_spec("httptools") else "h11"
        config = uvicorn.Config(self.app(), log_level="warning", access_log=False, lifespan="off",
                                timeout_keep_alive=KEEP_ALIVE_S, proxy_headers=False,
                                http=guarded_protocol(import_from_string(HTTP_PROTOCOLS[http]), self.header_timeout,
                                                      self.slow_clients),
                                limit_concurrency=self.max_connections)
        self._server = uvicorn.Server(config)
        started = threading.Event()

        def serve() -> None:
            loop = asyncio.new_event_loop()
            asyncio.set_event_loop(loop)
            loop.call_soon(started.set)
            loop.run_until_complete(self._server.serve(sockets=[sock]))

        self._thread = threading.Thread(target=serve, name="beyondagent-gateway", daemon=True)
        self._thread.start()
        started.wait(10)
        log.info("gateway.started", url=self.url)

    def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(10)
        self._thread = self._server = None

    def app(self) -> Any:
        from starlette.applications import Starlette
        from starlette.routing import Route

        return Starlette(routes=[
            Route("/{episode}/v1/chat/completions", self._chat, methods=["POST"]),
            Route("/{episode}/v1/models", self._models, methods=["GET"]),
            Route("/{episode}/reward", self._reward, methods=["POST"]),
            Route("/healthz", self._health, methods=["GET"]),
        ])

    def _error(self, error: ApiError) -> Any:
        from starlette.responses import JSONResponse

        self.refused[error.status] += 1
        headers = {"www-authenticate": "Bearer"} if error.status == 401 else None
        return JSONResponse(error.body(), status_code=error.status, headers=headers)

    async def _chat(self, http: Any) -> Any:
        from starlette.responses import JSONResponse, StreamingResponse

        episode_id = http.path_params["episode"]
        try:
            self._authorize(http, episode_id)
            episode, loop = self._episode(episode_id)
            request = parse_request(await self._json(http))
            future = asyncio.run_coroutine_threadsafe(episode.complete(request), loop)
            result = await asyncio.wrap_future(future)
        except ApiError as error:
            return self._error(error)
        except EpisodeEnded as ended:
            return self._error(ApiError(410, f"episode {short_id(episode_id)}: {ended}", code="episode_ended"))
        except RecursionError:  # JSON the parser took but the template or an encoder cannot walk
            return self._error(ApiError(400, "the request is nested too deeply"))
        except Exception as exc:  # noqa: BLE001 - the client gets one line, the log the traceback
            log.error("gateway.call_failed", episode=short_id(episode_id), exc_info=True)
            return self._error(ApiError(500, f"the policy could not answer: {type(exc).__name__}: {exc}"))
        if not request.stream:
            return JSONResponse(completion_body(result, request.model))
        chunks = stream_chunks(result, request.model, include_usage=request.include_usage)

        async def events() -> AsyncIterator[bytes]:
            for chunk in chunks:
                yield f"data: {json.dumps(chunk, ensure_ascii=False)}\n\n".encode()
            yield b"data: [DONE]\n\n"

        return StreamingResponse(events(), media_type="text/event-stream")

    async def _models(self, http: Any) -> Any:
        from starlette.responses import JSONResponse

        try:
            self._authorize(http, http.path_params["episode"])
            self._episode(http.path_params["episode"])
        except ApiError as error:
            return self._error(error)
        return JSONResponse({"object": "list",
                             "data": [{"id": "policy", "object": "model", "owned_by": "beyondagent"}]})

    async def _reward(self, http: Any) -> Any:
        from starlette.responses import JSONResponse

        episode: GatewayEpisode | None = None
        try:
            self._authorize(http, http.path_params["episode"])
            episode, _ = self._episode(http.path_params["episode"])
            body = await self._json(http)
            episode.posted_reward = reward_from(body)
        except ApiError as error:
            if episode is not None and error.status == 400:
                episode.refused_reward = error.message  # the workflow fails the episode with it
            return self._error(error)
        return JSONResponse({"ok": True})

    async def _health(self, http: Any) -> Any:
        from starlette.responses import JSONResponse

        return JSONResponse({"ok": True, "episodes": len(self._episodes),
                             "refused": {str(status): count for status, count in sorted(self.refused.items())},
                             "slow_clients_closed": self.slow_clients.closed})

    async def _json(self, http: Any) -> Any:
        """The body as JSON: at most `max_body_bytes` (413), within `body_timeout` (408): the env
        service's `read_bounded_body`."""
        try:
            body = await read_bounded_body(http, limit=self.max_body_bytes, timeout=self.body_timeout)
        except BodyTooLarge:
            raise _too_large(self.max_body_bytes) from None
        except BodyTimeout:
            raise ApiError(408, f"the request body did not arrive within {self.body_timeout:g} s") from None
        try:
            return json.loads(body)
        except RecursionError:
            raise ApiError(400, "the request body is JSON nested too deeply") from None
        except ValueError as exc:
            raise ApiError(400, f"the request body is not JSON: {exc}") from None


def _too_large(limit: int) -> ApiError:
    return ApiError(413, f"the request body is larger than {limit} bytes")


def reward_from(body: Any) -> Reward:
    """A posted reward: `{"score": number, "success": bool?, "reason": str?}`, or a bare number; the
    score finite and within +-REWARD_LIMIT."""
    score = body.get("score") if isinstance(body, dict) else body
    if not isinstance(body, dict) and (isinstance(body, bool) or not isinstance(body, (int, float))):
        raise ApiError(400, 'a reward is {"score": <number>, "success": <bool>, "reason": <text>} or a number',
                       param="score")
    try:
        score = reward_score(score)
    except ValueError as exc:
        raise ApiError(400, f"{exc} (the reward posted to /reward)", param="score") from None
    success = body.get("success", score > 0) if isinstance(body, dict) else score > 0
    if not isinstance(success, bool):
        raise ApiError(400, "success must be true or false", param="success")
    reason = body.get("reason", "posted by the agent") if isinstance(body, dict) else "posted by the agent"
    if not isinstance(reason, str):
        raise ApiError(400, "reason must be text", param="reason")
    return Reward(score, success=success, reason=reason[:MAX_REASON_CHARS])


_shared: Gateway | None = None
_shared_lock = threading.Lock()


def shared_gateway() -> Gateway:
    """The process's gateway (started on first use, stopped with the process)."""
    global _shared
    with _shared_lock:
        if _shared is None:
            _shared = Gateway()
            _shared.start()
        return _shared
