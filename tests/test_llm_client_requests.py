"""The LLM client: which statuses it retries, what a refusal says, what each request carries, the backoff.

Class-wide checks of `beyondagent_core/llm.py` (the eighth audit's follow-up): every HTTP status
class on either side of the retry rule (408, 429 and 5xx retried; other 4xx refused at once, with
a hint naming the key to fix), every sampling option reaching the request and none sent unset,
the backoff's ceiling `min(backoff_max, backoff_base * 2**attempt)` and Retry-After on either side
of the jitter, the documented defaults of the backoff, and a reply's tool calls and empty content.
The endpoint is `ScriptedOpenAIServer` on loopback (the `openai_server` fixture), reached
through the real `openai` client: it stands in for a hosted LLM, which cannot be reached here.
"""

from __future__ import annotations

import asyncio
import random
from typing import Any

import pytest
from test_llm_client import HELLO, client_for

from beyondagent_core.llm import SAMPLING_KEYS, LLMConfig, LLMError, OpenAIChat
from beyondagent_core.testing.openai_server import Reply, ScriptedOpenAIServer


RETRIED = (408, 429, 500, 502, 504)
REFUSED = {
    400: "the endpoint rejected the request; check llm.model and the sampling options",
    401: "check the API key: it is read from the environment variable named by llm.api_key_env",
    403: "check the API key: it is read from the environment variable named by llm.api_key_env",
    404: "check llm.base_url (it usually ends in /v1) and llm.model (see `GET /v1/models`)",
    409: "the endpoint rejected the request; check llm.model and the sampling options",
    422: "the endpoint rejected the request; check llm.model and the sampling options",
}


def test_408_429_and_5xx_are_retried(openai_server: ScriptedOpenAIServer) -> None:
    for status in RETRIED:
        openai_server.push(Reply.fault(status), f"answered after {status}")
    llm = client_for(openai_server, max_llm_retries=1, timeout=5.0)

    async def each() -> list[str]:  # one event loop: one HTTP client for all the calls
        return [(await llm.chat(HELLO)).content for _ in RETRIED]

    assert asyncio.run(each()) == [f"answered after {status}" for status in RETRIED]
    assert len(openai_server.requests) == 2 * len(RETRIED)
    assert (llm.usage["retries"], llm.usage["failures"]) == (len(RETRIED), 0)


def test_another_4xx_is_refused_at_once_with_a_hint_naming_the_key(openai_server: ScriptedOpenAIServer) -> None:
    for status in REFUSED:
        openai_server.push(Reply.fault(status))
    llm = client_for(openai_server, max_llm_retries=3, timeout=5.0)

    async def each() -> list[LLMError]:
        errors = []
        for _ in REFUSED:
            with pytest.raises(LLMError) as caught:
                await llm.chat(HELLO)
            errors.append(caught.value)
        return errors

    errors = asyncio.run(each())
    assert {error.status: error.hint for error in errors} == REFUSED
    for status, error in zip(REFUSED, errors, strict=True):
        # the server's own message (from the error body), not the exception's repr
        assert f"was refused: HTTP {status}: scripted fault: HTTP {status}" in error.message
    assert len(openai_server.requests) == len(REFUSED)
    assert (llm.usage["retries"], llm.usage["failures"]) == (0, len(REFUSED))


def test_an_unset_sampling_option_is_not_sent_at_all(openai_server: ScriptedOpenAIServer) -> None:
    # The endpoint's own defaults apply: a null temperature is an error on some servers.
    openai_server.push("a")
    asyncio.run(OpenAIChat(LLMConfig(model="m", base_url=openai_server.base_url)).chat(HELLO))
    assert sorted(openai_server.requests[0]) == ["messages", "model"]


def test_every_sampling_option_of_a_call_reaches_the_request(openai_server: ScriptedOpenAIServer) -> None:
    options = {"temperature": 0.25, "top_p": 0.5, "top_k": 3, "max_tokens": 7, "stop": ["END"], "seed": 11,
               "presence_penalty": 0.5, "frequency_penalty": -0.75}
    assert sorted(options) == sorted(SAMPLING_KEYS)
    openai_server.push("a")
    asyncio.run(client_for(openai_server, timeout=5.0).chat(HELLO, **options))
    request = openai_server.requests[0]
    assert {key: request.get(key) for key in options} == options


def test_every_configured_sampling_default_reaches_the_request(openai_server: ScriptedOpenAIServer) -> None:
    openai_server.push("a")
    llm = client_for(openai_server, temperature=0.3, top_p=0.6, top_k=9, max_tokens=17, timeout=5.0)
    asyncio.run(llm.chat(HELLO))
    request = openai_server.requests[0]
    assert [request.get(key) for key in ("temperature", "top_p", "top_k", "max_tokens")] == [0.3, 0.6, 9, 17]


@pytest.fixture
def jitter_at_its_ceiling(monkeypatch: pytest.MonkeyPatch) -> list[tuple[float, float]]:
    """Full jitter draws uniform(0, ceiling): here it draws the ceiling, and the bounds asked are recorded."""
    asked: list[tuple[float, float]] = []

    def uniform(low: float, high: float) -> float:
        asked.append((low, high))
        return high

    monkeypatch.setattr(random, "uniform", uniform)
    return asked


@pytest.mark.parametrize(("attempt", "retry_after", "delay"), [
    (0, None, 0.5),    # backoff_base * 2**0
    (1, None, 1.0),
    (2, None, 2.0),
    (3, None, 3.0),    # 4.0 capped at backoff_max
    (0, 0.2, 0.5),     # a Retry-After shorter than the jitter does not shorten it
    (0, 2.5, 2.5),     # a longer one lengthens it
    (2, 3.0, 3.0),     # exactly backoff_max
    (0, 10.0, 3.0),    # and never past backoff_max
])
def test_the_backoff_ceiling_and_retry_after(jitter_at_its_ceiling: list[tuple[float, float]], attempt: int,
                                             retry_after: float | None, delay: float) -> None:
    llm = OpenAIChat(LLMConfig(model="m", backoff_base=0.5, backoff_max=3.0))
    assert llm._backoff(attempt, retry_after) == pytest.approx(delay)
    assert jitter_at_its_ceiling == [(0.0, min(3.0, 0.5 * 2 ** attempt))]


def test_the_documented_backoff_defaults() -> None:
    # docs/self-evolve.md: backoff_base 0.5, backoff_max 30.0; base_url None: the openai package's default
    config = LLMConfig(model="m")
    assert (config.backoff_base, config.backoff_max, config.base_url, config.model) == (0.5, 30.0, None, "m")
    assert LLMConfig().model == ""


class ToolCallServer(ScriptedOpenAIServer):
    """The stand-in answering with a tool call and no text (`content: null`), as an OpenAI endpoint does."""

    def _completion(self, body: dict[str, Any], reply: Reply) -> dict[str, Any]:
        completion = super()._completion(body, reply)
        call = {"id": "call_1", "type": "function", "function": {"name": "move", "arguments": '{"to": "left"}'}}
        completion["choices"][0]["message"] = {"role": "assistant", "content": None, "tool_calls": [call]}
        completion["choices"][0]["finish_reason"] = "tool_calls"
        return completion


def test_a_tool_call_reply_keeps_its_calls_and_has_empty_text() -> None:
    with ToolCallServer(["ignored"]) as server:
        turn = asyncio.run(client_for(server, timeout=5.0).chat(HELLO))
    assert (turn.content, turn.finish_reason) == ("", "tool_calls")
    assert turn.tool_calls == [{"id": "call_1", "type": "function",
                                "function": {"name": "move", "arguments": '{"to": "left"}'}}]
