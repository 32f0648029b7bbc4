"""A local OpenAI-compatible server that replays scripted completions: a stand-in for a hosted LLM.

Tests and benchmarks cannot reach a hosted model, so this server takes its place on loopback:
the real `openai` client talks real HTTP to it. It serves `POST /v1/chat/completions` and
`GET /v1/models` (Starlette + uvicorn on a background thread, on a free port) and answers each
request with the next scripted `Reply` from a queue, or with what a callable
`(request_json) -> Reply | str` returns. A reply is a text, or a fault: an HTTP status (429,
500, 503, 400...), a delay (to make the client time out), or a dropped connection. A latency
sampler adds a per-request delay (`lognormal_latency(mean=0.1)` is heavy-tailed). The server
records every request (`requests`: the JSON bodies; `headers`) and the most requests it had in
flight at once, and reports token usage (whitespace-separated words) in each response.

    with ScriptedOpenAIServer(["hello", Reply.fault(429), "again"]) as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="x")
"""

from __future__ import annotations

import asyncio
import collections
import itertools
import logging
import math
import random
import socket
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

import attrs

STARTUP_SECONDS = 20.0


@attrs.frozen
class Reply:
    """One scripted answer: `text` with status 200, or a fault.

    `status` other than 200 answers with an OpenAI-style error body (and `Retry-After` when
    `retry_after` is set); `delay` waits that many seconds first (the latency sampler's delay
    comes on top); `drop` closes the connection mid-response; `usage` overrides the token counts;
    `finish_reason` is the choice's (`"length"`: a reply cut off at its token limit).
    """

    text: str = ""
    status: int = 200
    delay: float = 0.0
    drop: bool = False
    retry_after: float | None = None
    usage: dict[str, int] | None = None
    finish_reason: str = "stop"

    @classmethod
    def fault(cls, status: int, *, retry_after: float | None = None) -> Reply:
        return cls(status=status, retry_after=retry_after)

    @classmethod
    def slow(cls, delay: float, text: str = "") -> Reply:
        return cls(text=text, delay=delay)

    @classmethod
    def dropped(cls) -> Reply:
        return cls(drop=True)


class _DropConnection(Exception):
    """Raised mid-response so uvicorn closes the socket: the client sees a broken connection."""


class _QuietDrops(logging.Filter):
    """Keeps uvicorn from printing a traceback for each scripted dropped connection."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.exc_info and isinstance(record.exc_info[1], _DropConnection))


_QUIET_DROPS = _QuietDrops()


def lognormal_latency(mean: float = 0.1, sigma: float = 1.0, seed: int = 0) -> Callable[[], float]:
    """A heavy-tailed latency sampler (seconds) with the given mean: lognormal(mu, sigma)."""
    rng = random.Random(seed)
    mu = math.log(mean) - sigma * sigma / 2.0  # E[lognormal] = exp(mu + sigma^2 / 2)
    lock = threading.Lock()

    def sample() -> float:
        with lock:
            return rng.lognormvariate(mu, sigma)

    return sample


class ScriptedOpenAIServer:
    """The stand-in server. `replies`: a list of `Reply`/str (a queue; `push` adds more) or a callable.

    When the queue is empty, requests get HTTP 400 "no scripted reply left", which the client
    does not retry, so a test that scripted too few replies fails with a clear message.
    """

    def __init__(self, replies: Iterable[Reply | str] | Callable[[dict[str, Any]], Reply | str] = (),
                 *, latency: Callable[[], float] | None = None, model: str = "stand-in",
                 host: str = "127.0.0.1"):
        self.responder = replies if callable(replies) else None
        self.queue: collections.deque[Reply | str] = collections.deque([] if callable(replies) else replies)
        self.latency = latency
        self.model = model
        self.host = host
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._server: Any = None
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping: asyncio.Event | None = None
        self.port: int | None = None

    # --- lifecycle ---------------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        if self.port is None:
            raise RuntimeError("the stand-in server is not started; call start() or use it as a context manager")
        return f"http://{self.host}:{self.port}/v1"

    def start(self) -> ScriptedOpenAIServer:
        import uvicorn

        logging.getLogger("uvicorn.error").addFilter(_QUIET_DROPS)  # adding the same filter twice is a no-op
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((self.host, 0))
        self.port = sock.getsockname()[1]
        config = uvicorn.Config(self._app(), log_config=None, access_log=False, lifespan="off",
                                timeout_graceful_shutdown=1, backlog=2048)
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._serve, args=(sock,), name="openai-stand-in", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + STARTUP_SECONDS
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"the stand-in OpenAI server did not start on {self.host}:{self.port}")
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        if self._server is None:
            return
        self._server.should_exit = True
        if self._loop is not None and self._stopping is not None:
            try:
                self._loop.call_soon_threadsafe(self._stopping.set)  # wake delayed replies
            except RuntimeError:  # the loop already closed
                pass
        if self._thread is not None:
            self._thread.join(timeout=10)
        self._server = None

    def __enter__(self) -> ScriptedOpenAIServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _serve(self, sock: socket.socket) -> None:
        async def serve() -> None:
            self._loop = asyncio.get_running_loop()
            self._stopping = asyncio.Event()
            await self._server.serve(sockets=[sock])

        asyncio.run(serve())

    # --- scripting ---------------------------------------------------------------------------

    def push(self, *replies: Reply | str) -> None:
        """Queue more scripted replies."""
        with self._lock:
            self.queue.extend(replies)

    @property
    def pending(self) -> int:
        """Scripted replies not yet served."""
        with self._lock:
            return len(self.queue)

    def _next_reply(self, body: dict[str, Any]) -> Reply | None:
        if self.responder is not None:
            reply = self.responder(body)
        else:
            with self._lock:
                if not self.queue:
                    return None
                reply = self.queue.popleft()
        return Reply(text=reply) if isinstance(reply, str) else reply

    # --- the HTTP app ------------------------------------------------------------------------

    def _app(self) -> Any:
        from starlette.applications import Starlette
        from starlette.routing import Route

        return Starlette(routes=[
            Route("/v1/chat/completions", self._chat, methods=["POST"]),
            Route("/v1/models", self._models, methods=["GET"]),
        ])

    async def _models(self, request: Any) -> Any:
        from starlette.responses import JSONResponse

        return JSONResponse({"object": "list", "data": [{"id": self.model, "object": "model", "owned_by": "stand-in"}]})

    async def _chat(self, request: Any) -> Any:
        from starlette.responses import JSONResponse

        try:
            body = await request.json()
        except ValueError:
            return _error(400, "request body is not JSON")
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
            return _error(400, "request body must be an object with a `messages` list")
        with self._lock:
            self.requests.append(body)
            self.headers.append(dict(request.headers))
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            reply = self._next_reply(body)
            delay = (reply.delay if reply else 0.0) + (self.latency() if self.latency else 0.0)
            if delay > 0:
                await self._sleep(delay)
            if reply is None:
                return _error(400, "stand-in server: no scripted reply left for this request")
            if reply.drop:
                return _DroppedResponse()
            if reply.status != 200:
                headers = {"retry-after": str(reply.retry_after)} if reply.retry_after is not None else None
                return _error(reply.status, f"scripted fault: HTTP {reply.status}", headers=headers)
            return JSONResponse(self._completion(body, reply))
        finally:
            with self._lock:
                self.in_flight -= 1

    async def _sleep(self, seconds: float) -> None:
        assert self._stopping is not None
        try:
            await asyncio.wait_for(self._stopping.wait(), seconds)
        except TimeoutError:
            pass

    def _completion(self, body: dict[str, Any], reply: Reply) -> dict[str, Any]:
        prompt_words = sum(len(str(m.get("content") or "").split()) for m in body["messages"] if isinstance(m, dict))
        usage = reply.usage or {"prompt_tokens": prompt_words, "completion_tokens": len(reply.text.split())}
        usage = {**usage, "total_tokens": usage["prompt_tokens"] + usage["completion_tokens"]}
        return {
            "id": f"chatcmpl-standin-{next(self._ids)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model") or self.model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": reply.text},
                         "finish_reason": reply.finish_reason, "logprobs": None}],
            "usage": usage,
        }


def _error(status: int, message: str, headers: dict[str, str] | None = None) -> Any:
    from starlette.responses import JSONResponse

    kind = "rate_limit_error" if status == 429 else "server_error" if status >= 500 else "invalid_request_error"
    return JSONResponse({"error": {"message": message, "type": kind, "code": status}}, status_code=status,
                        headers=headers)


class _DroppedResponse:
    """An ASGI response that promises a body, sends part of it, then breaks the connection."""

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", b"1000")]})
        await send({"type": "http.response.body", "body": b'{"id": "chatcmpl-dro', "more_body": True})
        raise _DropConnection("scripted dropped connection")


def run_context_with_llm(tmp_path: Any, manager: Any, server: ScriptedOpenAIServer, reward: dict[str, Any], *,
                         name: str = "with-llm") -> Any:
    """A real run context (as `beyondagent run` makes) over a one-task JSONL spec whose `llm` is `server`'s
    `spec-model` (no retries) and whose `reward` block is `reward`: for tests of a component's `bind`."""
    import yaml

    from beyondagent_core import pipeline
    from beyondagent_core.context import RunContext, RunInfo

    (tmp_path / "t.jsonl").write_text('{"task_id": "a", "query": "q"}\n')
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump({
        "run": {"name": name, "output_dir": str(tmp_path / "runs")},
        "tasks": {"train": {"name": "jsonl", "path": str(tmp_path / "t.jsonl")}},
        "llm": {"model": "spec-model", "base_url": server.base_url, "max_llm_retries": 0},
        "reward": reward, "backend": {"name": "export"}}))
    session = pipeline.prepare(path, [], manager=manager)
    return RunContext(spec=session.spec, manager=manager, info=RunInfo(name=name, run_dir=tmp_path, seed=0, spec={}))
