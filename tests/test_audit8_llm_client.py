"""The LLM client's settings reaching each request, Retry-After, an answer with no choices, defaults.

From the eighth audit (mutation testing of the LLM roles and the client side): each test here
fails on a plausible bug the earlier tests let through: a `chat(..., temperature=None)` call that
erases the configured temperature, a server's `Retry-After` ignored by the backoff, a 200 answer
with no choices taken for an empty reply, and a default `max_llm_retries` other than the
documented 3. The endpoint is `ScriptedOpenAIServer` on loopback (the `openai_server` fixture),
reached through the real `openai` client: it stands in for a hosted LLM, which cannot be reached here.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from beyondagent_core.llm import LLMConfig, LLMError, OpenAIChat
from beyondagent_core.testing.openai_server import Reply, ScriptedOpenAIServer

HELLO = [{"role": "user", "content": "say hello"}]


def client_for(server: ScriptedOpenAIServer, **options: Any) -> OpenAIChat:
    settings = {"model": "audit-model", "base_url": server.base_url, "timeout": 5.0, "backoff_base": 0.001,
                "backoff_max": 0.01, **options}
    return OpenAIChat(LLMConfig(**settings))


def test_a_none_sampling_option_keeps_the_configured_value(openai_server: ScriptedOpenAIServer) -> None:
    # "None means the default" (a role passing its own unset temperature): the config's values are sent.
    openai_server.push("a", "b")
    llm = client_for(openai_server, temperature=0.7, top_p=0.85, max_tokens=33)

    asyncio.run(llm.chat(HELLO, temperature=None, max_tokens=None, top_p=None))
    asyncio.run(llm.chat(HELLO, temperature=0.2, max_tokens=None))

    first, second = openai_server.requests
    sent = [(request.get("temperature"), request.get("top_p"), request.get("max_tokens"))
            for request in (first, second)]
    assert sent == [(0.7, 0.85, 33), (0.2, 0.85, 33)]


def spy_on_backoff(llm: OpenAIChat, monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, float | None, float]]:
    """Record each backoff the client computes, and sleep 0 instead (no waiting in a test)."""
    seen: list[tuple[int, float | None, float]] = []
    compute = llm._backoff

    def recorded(attempt: int, retry_after: float | None) -> float:
        seen.append((attempt, retry_after, compute(attempt, retry_after)))
        return 0.0

    monkeypatch.setattr(llm, "_backoff", recorded)
    return seen


def test_retry_after_lengthens_the_backoff_up_to_backoff_max(openai_server: ScriptedOpenAIServer,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    openai_server.push(Reply.fault(429, retry_after=2.5), Reply.fault(503, retry_after=100.0), Reply.fault(500), "ok")
    llm = client_for(openai_server, max_llm_retries=3, backoff_base=0.001, backoff_max=4.0)
    seen = spy_on_backoff(llm, monkeypatch)

    assert asyncio.run(llm.chat(HELLO)).content == "ok"

    assert [(attempt, after) for attempt, after, _ in seen] == [(0, 2.5), (1, 100.0), (2, None)]
    # jitter is at most backoff_base * 2**attempt (0.001, 0.002, 0.004): Retry-After wins, capped at backoff_max
    assert seen[0][2] == 2.5
    assert seen[1][2] == 4.0
    assert 0.0 <= seen[2][2] <= 0.004


class NoChoicesServer(ScriptedOpenAIServer):
    """The stand-in whose every answer is a 200 with an empty `choices` list (a broken proxy's)."""

    def _completion(self, body: dict[str, Any], reply: Reply) -> dict[str, Any]:
        return {**super()._completion(body, reply), "choices": []}


def test_an_answer_with_no_choices_is_an_error_not_an_empty_reply() -> None:
    with NoChoicesServer(["ignored"]) as server:
        llm = client_for(server)
        with pytest.raises(LLMError, match="answered with no choices") as caught:
            asyncio.run(llm.chat(HELLO))
    assert server.base_url in str(caught.value)
    assert llm.usage["calls"] == 1 and llm.usage["failures"] == 1


def test_the_documented_defaults() -> None:
    # docs/spec.md: api_key_env OPENAI_API_KEY, timeout 60, max_llm_retries 3, max_concurrency 64
    config = LLMConfig(model="m")
    assert (config.api_key_env, config.timeout, config.max_llm_retries, config.max_concurrency) == (
        "OPENAI_API_KEY", 60.0, 3, 64)
    assert (config.temperature, config.top_p, config.top_k, config.max_tokens) == (None, None, None, None)


def test_by_default_three_failures_are_retried_and_a_fourth_is_not(openai_server: ScriptedOpenAIServer,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    openai_server.push(*[Reply.fault(503)] * 3, "third retry answers")
    llm = OpenAIChat(LLMConfig(model="audit-model", base_url=openai_server.base_url, timeout=5.0))
    spy_on_backoff(llm, monkeypatch)
    assert asyncio.run(llm.chat(HELLO)).content == "third retry answers"
    assert llm.usage["retries"] == 3 and len(openai_server.requests) == 4

    openai_server.push(*[Reply.fault(503)] * 4, "not reached")
    with pytest.raises(LLMError, match="failed after 4 attempt"):
        asyncio.run(llm.chat(HELLO))
    assert len(openai_server.requests) == 8 and openai_server.pending == 1
