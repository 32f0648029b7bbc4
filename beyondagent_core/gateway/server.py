"""The gateway's HTTP server: Starlette on uvicorn, on loopback, in a thread of its own.

`Gateway.open(episode, loop)` gives an episode its base URL, `http://127.0.0.1:<port>/<id>/v1`;
the routes under it are `POST chat/completions`, `GET models` and, beside `v1`, `POST
/<id>/reward` (`{"score": 1.0, "success": true, "reason": "..."}`: an agent that knows its reward
posts it). Each call is handed to the episode's `complete` on the event loop the episode lives on
(the rollout's), so the server never blocks the generator and the generator never blocks the
server. `close(id)` ends an episode: later calls to its URL get 410 with the reason, calls to an
id never opened get 404. Errors are OpenAI-shaped JSON with one line of text; tracebacks go to the
log only. Streaming sends the whole reply as `chat.completion.chunk` events once it is sampled
(the generator samples whole turns), then `data: [DONE]`.

`shared_gateway()` is the process's gateway, started on first use.
"""

from __future__ import annotations

import asyncio
import collections
import json
import socket
import threading
import uuid
from collections.abc import AsyncIterator
from typing import Any

from beyondagent_core.gateway.api import ApiError, completion_body, parse_request, stream_chunks
from beyondagent_core.gateway.episode import EpisodeEnded, GatewayEpisode
from beyondagent_core.logs import get_logger
from beyondagent_core.types import Reward

log = get_logger("beyondagent.gateway")

MAX_BODY_BYTES = 8 << 20
ENDED_REMEMBERED = 10_000  # ended episode ids kept to answer 410 instead of 404


class Gateway:
    def __init__(self, host: str = "127.0.0.1", port: int = 0, *, max_body_bytes: int = MAX_BODY_BYTES):
        self.host, self.port = host, port
        self.max_body_bytes = max_body_bytes
        self._episodes: dict[str, tuple[GatewayEpisode, asyncio.AbstractEventLoop]] = {}
        self._ended: collections.OrderedDict[str, str] = collections.OrderedDict()
        self._lock = threading.Lock()
        self._server: Any = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    # --- episodes -------------------------------------------------------------------------------

    def open(self, episode: GatewayEpisode, loop: asyncio.AbstractEventLoop | None = None) -> tuple[str, str]:
        """Serve `episode`; returns (its id, its base URL for an OpenAI client)."""
        self.start()
        episode_id = uuid.uuid4().hex
        with self._lock:
            self._episodes[episode_id] = (episode, loop or asyncio.get_running_loop())
        return episode_id, f"{self.url}/{episode_id}/v1"

    def close(self, episode_id: str, reason: str = "the episode has ended") -> None:
        with self._lock:
            found = self._episodes.pop(episode_id, None)
            self._ended[episode_id] = reason
            while len(self._ended) > ENDED_REMEMBERED:
                self._ended.popitem(last=False)
        if found is not None:
            found[0].close()

    def _episode(self, episode_id: str) -> tuple[GatewayEpisode, asyncio.AbstractEventLoop]:
        with self._lock:
            found = self._episodes.get(episode_id)
            ended = self._ended.get(episode_id)
        if found is not None:
            return found
        if ended is not None:
            raise ApiError(410, f"episode {episode_id} is over ({ended}); its base URL takes no more calls",
                           code="episode_ended")
        raise ApiError(404, f"no episode {episode_id} at this gateway: each episode's agent gets its own base URL "
                            "(the llm_base_url argument of its run function)", code="unknown_episode")

    # --- serving --------------------------------------------------------------------------------

    def start(self) -> None:
        if self._thread is not None:
            return
        import uvicorn

        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((self.host, self.port))
        self.port = sock.getsockname()[1]
        config = uvicorn.Config(self.app(), log_level="warning", access_log=False, lifespan="off",
                                timeout_keep_alive=30)
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

    async def _chat(self, http: Any) -> Any:
        from starlette.responses import JSONResponse, StreamingResponse

        try:
            episode, loop = self._episode(http.path_params["episode"])
            request = parse_request(await self._json(http))
            future = asyncio.run_coroutine_threadsafe(episode.complete(request), loop)
            result = await asyncio.wrap_future(future)
        except ApiError as error:
            return JSONResponse(error.body(), status_code=error.status)
        except EpisodeEnded as ended:
            return JSONResponse(ApiError(410, f"episode {http.path_params['episode']}: {ended}",
                                         code="episode_ended").body(), status_code=410)
        except Exception as exc:  # noqa: BLE001 - the client gets one line, the log the traceback
            log.error("gateway.call_failed", episode=http.path_params["episode"], exc_info=True)
            return JSONResponse(ApiError(500, f"the policy could not answer: {type(exc).__name__}: {exc}").body(),
                                status_code=500)
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
            self._episode(http.path_params["episode"])
        except ApiError as error:
            return JSONResponse(error.body(), status_code=error.status)
        return JSONResponse({"object": "list", "data": [{"id": "policy", "object": "model", "owned_by": "beyondagent"}]})

    async def _reward(self, http: Any) -> Any:
        from starlette.responses import JSONResponse

        try:
            episode, _ = self._episode(http.path_params["episode"])
            body = await self._json(http)
            episode.posted_reward = reward_from(body)
        except ApiError as error:
            return JSONResponse(error.body(), status_code=error.status)
        return JSONResponse({"ok": True})

    async def _health(self, http: Any) -> Any:
        from starlette.responses import JSONResponse

        return JSONResponse({"ok": True, "episodes": len(self._episodes)})

    async def _json(self, http: Any) -> Any:
        body = b""
        async for chunk in http.stream():
            body += chunk
            if len(body) > self.max_body_bytes:
                raise ApiError(413, f"the request body is larger than {self.max_body_bytes} bytes")
        try:
            return json.loads(body)
        except ValueError as exc:
            raise ApiError(400, f"the request body is not JSON: {exc}") from exc


def reward_from(body: Any) -> Reward:
    """A posted reward: `{"score": number, "success": bool?, "reason": str?}`, or a bare number."""
    if isinstance(body, (int, float)) and not isinstance(body, bool):
        return Reward(float(body), success=float(body) > 0)
    score = body.get("score") if isinstance(body, dict) else None
    if isinstance(score, bool) or not isinstance(score, (int, float)):
        raise ApiError(400, 'a reward is {"score": <number>, "success": <bool>, "reason": <text>}', param="score")
    success = body.get("success", float(score) > 0)
    if not isinstance(success, bool):
        raise ApiError(400, "success must be true or false", param="success")
    return Reward(float(score), success=success, reason=str(body.get("reason", "posted by the agent")))


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
