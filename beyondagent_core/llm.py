"""The OpenAI-compatible chat client used for exploring, summarizing and judging.

`OpenAIChat(LLMConfig(...))` talks to any endpoint that speaks the OpenAI chat-completions
API (vLLM, DashScope, OpenAI, a local server) through the `openai` package, and implements
the core's `ChatLLM` protocol: `await llm.chat(messages, **sampling) -> Turn`.

The `openai` client's own retries are off; ours retry timeouts, dropped connections, 429 and
5xx with exponential backoff and full jitter, up to `max_llm_retries` times, and fail at once
on any other 4xx with an error naming the endpoint, the model and the status. A semaphore caps
the requests in flight, and `usage` tallies calls, retries, failures and tokens for the whole
life of the object.

Backends call `asyncio.run` once per step, so one `OpenAIChat` sees many event loops (and, in
threads, several at once): the `AsyncOpenAI` client and the semaphore belong to one loop, so
each running loop gets its own, created on first use. `openai` is imported only then, never
when the CLI starts.
"""

from __future__ import annotations

import asyncio
import os
import random
import threading
import weakref
from collections.abc import AsyncGenerator, Sequence
from typing import TYPE_CHECKING, Any

import attrs

from beyondagent_core.errors import BeyondAgentError, RunError
from beyondagent_core.llm_config import LLMConfig
from beyondagent_core.logs import get_logger
from beyondagent_core.secrets import remember
from beyondagent_core.types import Turn

if TYPE_CHECKING:
    from openai import AsyncOpenAI

log = get_logger("beyondagent.llm")

# A local server (vLLM, the test stand-in) needs no key, but the openai client insists on one.
PLACEHOLDER_API_KEY = "not-needed"
SAMPLING_KEYS = ("temperature", "top_p", "top_k", "max_tokens", "stop", "seed", "presence_penalty",
                 "frequency_penalty")
RETRY_STATUSES = frozenset({408, 429})  # plus every 5xx


class LLMError(RunError):
    """A chat request failed for good: a status that is not worth retrying, or retries used up."""

    def __init__(self, message: str, *, where: str | None = None, hint: str | None = None,
                 status: int | None = None):
        super().__init__(message, where=where, hint=hint)
        self.status = status


@attrs.define
class _LoopState:
    client: AsyncOpenAI
    semaphore: asyncio.Semaphore
    closer: AsyncGenerator[None, None] | None = None


# Closers stay referenced until their loop goes away: one dropped with its `OpenAIChat` would be
# finalized by a task that `asyncio.run` cancels at once, leaving the sockets open.
_PARKED: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, set[AsyncGenerator[None, None]]] = (
    weakref.WeakKeyDictionary())
_PARKED_LOCK = threading.Lock()


async def _close_at_loop_shutdown(client: AsyncOpenAI) -> AsyncGenerator[None, None]:
    """Parked after its first step; `asyncio.run` closes open async generators before it closes
    the loop, which runs the `finally` while the loop still works: pooled connections get closed."""
    try:
        yield
    finally:
        await client.close()
        await asyncio.sleep(0)  # let the closed transports' connection_lost callbacks run


class OpenAIChat:
    """`ChatLLM` over an OpenAI-compatible endpoint, with retries, backoff and a concurrency cap."""

    def __init__(self, config: LLMConfig, *, key_path: str = "llm"):
        """`key_path` is where `config` sits in the spec, for error messages."""
        if not config.model:
            raise BeyondAgentError(
                "no model name for the LLM client",
                where=f"spec key {key_path}.model",
                hint=f"set {key_path}.model to the model the endpoint serves (`GET /v1/models` lists them)",
            )
        self.config = config
        self._states: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _LoopState] = weakref.WeakKeyDictionary()
        self._lock = threading.Lock()  # guards the per-loop table and the tally across threads
        self._usage = dict.fromkeys(("calls", "retries", "failures", "prompt_tokens", "completion_tokens"), 0)

    @property
    def endpoint(self) -> str:
        return f"{self.config.base_url or 'the openai default endpoint'} (model {self.config.model})"

    @property
    def usage(self) -> dict[str, int]:
        """Cumulative tallies: chat calls, retried requests, failed calls, prompt and completion tokens."""
        with self._lock:
            return dict(self._usage)

    def _count(self, **amounts: int) -> None:
        with self._lock:
            for key, amount in amounts.items():
                self._usage[key] += amount

    async def chat(self, messages: Sequence[dict[str, Any]], **sampling: Any) -> Turn:
        """Send `messages`; return the assistant's `Turn`. Raises `LLMError` when it cannot."""
        request = self._request(messages, sampling)
        state = self._state()
        if state.closer is None:
            state.closer = _close_at_loop_shutdown(state.client)
            with _PARKED_LOCK:
                _PARKED.setdefault(asyncio.get_running_loop(), set()).add(state.closer)
            await anext(state.closer)
        import openai  # imported by `_state` already

        self._count(calls=1)
        attempt = 0
        while True:
            try:
                async with state.semaphore:
                    response = await state.client.chat.completions.create(**request)
                break
            except openai.APIError as exc:  # HTTP statuses, timeouts, broken connections
                status, retry_after = _status_of(exc)
                retryable = _is_retryable(exc, status)
                if not retryable or attempt >= self.config.max_llm_retries:
                    self._count(failures=1)
                    raise self._error(exc, status, attempt, retryable) from exc
                delay = self._backoff(attempt, retry_after)
                attempt += 1
                self._count(retries=1)
                log.debug("llm.retry", endpoint=self.endpoint, attempt=attempt, status=status,
                          error=type(exc).__name__, sleep=round(delay, 3))
                await asyncio.sleep(delay)
        return self._turn(response)

    async def aclose(self) -> None:
        """Close the HTTP client of the running event loop (others close with their loops)."""
        loop = asyncio.get_running_loop()
        with self._lock:
            state = self._states.pop(loop, None)
        if state is None:
            return
        if state.closer is None:
            await state.client.close()
            return
        with _PARKED_LOCK:
            _PARKED.get(loop, set()).discard(state.closer)
        await state.closer.aclose()

    def _state(self) -> _LoopState:
        loop = asyncio.get_running_loop()
        with self._lock:
            state = self._states.get(loop)
            if state is None:
                try:
                    from openai import AsyncOpenAI
                except ImportError:
                    raise BeyondAgentError(
                        "the LLM client needs the `openai` package, which is not installed",
                        where=self.endpoint, hint="pip install openai",
                    ) from None

                api_key = os.environ.get(self.config.api_key_env)
                remember(api_key)  # a server echoing it back in an error body must not log it
                client = AsyncOpenAI(
                    api_key=api_key or PLACEHOLDER_API_KEY,
                    base_url=self.config.base_url,
                    timeout=self.config.timeout,
                    max_retries=0,  # retries are ours: backoff with jitter, counted
                )
                state = self._states[loop] = _LoopState(client, asyncio.Semaphore(self.config.max_concurrency))
            return state

    def _request(self, messages: Sequence[dict[str, Any]], sampling: dict[str, Any]) -> dict[str, Any]:
        unknown = sorted(set(sampling) - set(SAMPLING_KEYS))
        if unknown:
            raise TypeError(f"unknown sampling option(s) for chat(): {', '.join(unknown)}; "
                            f"known: {', '.join(SAMPLING_KEYS)}")
        config = self.config
        params: dict[str, Any] = {"temperature": config.temperature, "top_p": config.top_p,
                                  "top_k": config.top_k, "max_tokens": config.max_tokens}
        params.update({key: value for key, value in sampling.items() if value is not None})
        top_k = params.pop("top_k", None)
        request = {"model": config.model, "messages": [dict(m) for m in messages]}
        request.update({key: value for key, value in params.items() if value is not None})
        if top_k is not None:
            request["extra_body"] = {"top_k": top_k}  # not in the OpenAI API; vLLM and others read it
        return request

    def _turn(self, response: Any) -> Turn:
        usage = getattr(response, "usage", None)
        if usage is not None:
            self._count(prompt_tokens=usage.prompt_tokens or 0, completion_tokens=usage.completion_tokens or 0)
        if not response.choices:
            self._count(failures=1)
            raise LLMError(f"{self.endpoint} answered with no choices", where=self.endpoint)
        message = response.choices[0].message
        tool_calls = None
        if getattr(message, "tool_calls", None):
            tool_calls = [call.model_dump() for call in message.tool_calls]
        finish_reason = getattr(response.choices[0], "finish_reason", None)
        return Turn(role="assistant", content=message.content or "", tool_calls=tool_calls,
                    finish_reason=finish_reason if isinstance(finish_reason, str) else None)

    def _backoff(self, attempt: int, retry_after: float | None) -> float:
        ceiling = min(self.config.backoff_max, self.config.backoff_base * 2 ** attempt)
        delay = random.uniform(0.0, ceiling)  # full jitter: concurrent clients do not retry in step
        if retry_after is not None:
            delay = max(delay, min(retry_after, self.config.backoff_max))
        return delay

    def _error(self, exc: Exception, status: int | None, attempt: int, retryable: bool) -> LLMError:
        what = f"HTTP {status}" if status is not None else type(exc).__name__
        detail = _detail(exc)
        if retryable:
            message = f"LLM request to {self.endpoint} failed after {attempt + 1} attempt(s): {what}: {detail}"
            hint = "check that the endpoint is up and not overloaded; raise llm.max_llm_retries or llm.timeout"
        else:
            message = f"LLM request to {self.endpoint} was refused: {what}: {detail}"
            hint = _hint_for(status)
        return LLMError(message, where=self.endpoint, hint=hint, status=status)


def _status_of(exc: Exception) -> tuple[int | None, float | None]:
    """The HTTP status of a failed request (None for timeouts and connection errors), and Retry-After."""
    response = getattr(exc, "response", None)
    status = getattr(exc, "status_code", None)
    if status is None or response is None:
        return status, None
    try:
        retry_after = float(response.headers.get("retry-after"))
    except (TypeError, ValueError):
        retry_after = None
    return status, retry_after


def _is_retryable(exc: Exception, status: int | None) -> bool:
    import openai

    if isinstance(exc, openai.APIConnectionError):  # also covers APITimeoutError
        return True
    if isinstance(exc, openai.APIStatusError) and status is not None:
        return status in RETRY_STATUSES or status >= 500
    return False


def _detail(exc: Exception) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        inner = body["error"] if isinstance(body.get("error"), dict) else body
        if inner.get("message"):
            return str(inner["message"])
    text = str(exc).strip()
    return text.splitlines()[0] if text else "(no message)"


def _hint_for(status: int | None) -> str:
    if status in (401, 403):
        return "check the API key: it is read from the environment variable named by llm.api_key_env"
    if status == 404:
        return "check llm.base_url (it usually ends in /v1) and llm.model (see `GET /v1/models`)"
    return "the endpoint rejected the request; check llm.model and the sampling options"
