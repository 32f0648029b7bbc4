"""The LLM client (`beyondagent_core.llm`) with the real `openai` package over real HTTP.

The endpoint is `ScriptedOpenAIServer` on loopback (the `openai_server` fixture): it stands in
for a hosted LLM, which cannot be reached here, and replays scripted replies and faults.
"""

from __future__ import annotations

import asyncio
import threading

import pytest

from beyondagent_core.errors import BeyondAgentError
from beyondagent_core.llm import LLMConfig, LLMError, OpenAIChat
from beyondagent_core.testing.openai_server import Reply, ScriptedOpenAIServer, lognormal_latency

HELLO = [{"role": "user", "content": "say hello"}]


def client_for(server: ScriptedOpenAIServer, **options) -> OpenAIChat:
    settings = {"model": "judge-model", "base_url": server.base_url, "timeout": 0.2, "backoff_base": 0.001,
                "backoff_max": 0.01, **options}
    return OpenAIChat(LLMConfig(**settings))


def test_retries_429_5xx_timeouts_and_drops_then_succeeds(openai_server: ScriptedOpenAIServer) -> None:
    openai_server.push(Reply.fault(429), Reply.fault(500), Reply.fault(503), Reply.slow(1.0, "too late"),
                       Reply.dropped(), "hello there")
    llm = client_for(openai_server, max_llm_retries=5)

    turn = asyncio.run(llm.chat(HELLO))

    assert (turn.role, turn.content) == ("assistant", "hello there")
    assert len(openai_server.requests) == 6
    assert llm.usage["calls"] == 1
    assert llm.usage["retries"] == 5
    assert llm.usage["failures"] == 0


def test_no_retry_on_400_and_the_error_names_endpoint_model_status(openai_server: ScriptedOpenAIServer) -> None:
    openai_server.push(Reply.fault(400), "never sent")
    llm = client_for(openai_server)

    with pytest.raises(LLMError) as caught:
        asyncio.run(llm.chat(HELLO))

    assert caught.value.status == 400
    text = str(caught.value)
    assert openai_server.base_url in text and "judge-model" in text and "HTTP 400" in text
    assert len(openai_server.requests) == 1
    assert llm.usage == {"calls": 1, "retries": 0, "failures": 1, "prompt_tokens": 0, "completion_tokens": 0}


def test_gives_up_after_max_llm_retries(openai_server: ScriptedOpenAIServer) -> None:
    openai_server.push(*[Reply.fault(503)] * 3, "not reached")
    llm = client_for(openai_server, max_llm_retries=2)

    with pytest.raises(LLMError, match="failed after 3 attempt") as caught:
        asyncio.run(llm.chat(HELLO))

    assert caught.value.status == 503
    assert caught.value.hint and "max_llm_retries" in caught.value.hint
    assert len(openai_server.requests) == 3
    assert openai_server.pending == 1


def test_timeouts_count_as_retryable_and_then_give_up(openai_server: ScriptedOpenAIServer) -> None:
    openai_server.push(Reply.slow(1.0), Reply.slow(1.0))
    llm = client_for(openai_server, max_llm_retries=1)

    with pytest.raises(LLMError, match="Timeout") as caught:
        asyncio.run(llm.chat(HELLO))

    assert caught.value.status is None
    assert llm.usage["retries"] == 1 and llm.usage["failures"] == 1


def test_concurrency_limit_holds_at_the_server() -> None:
    with ScriptedOpenAIServer(lambda body: Reply.slow(0.1, "ok")) as server:
        llm = client_for(server, max_concurrency=3, timeout=5.0)

        async def many() -> list[str]:
            turns = await asyncio.gather(*(llm.chat(HELLO) for _ in range(12)))
            return [turn.content for turn in turns]

        assert asyncio.run(many()) == ["ok"] * 12
        assert 2 <= server.max_in_flight <= 3
        assert len(server.requests) == 12


def test_usage_counts_tokens_across_calls(openai_server: ScriptedOpenAIServer) -> None:
    openai_server.push("one two three", Reply(text="x", usage={"prompt_tokens": 10, "completion_tokens": 7}))
    llm = client_for(openai_server)

    asyncio.run(llm.chat([{"role": "user", "content": "a b"}]))
    asyncio.run(llm.chat([{"role": "user", "content": "ignored"}]))

    assert llm.usage == {"calls": 2, "retries": 0, "failures": 0, "prompt_tokens": 12, "completion_tokens": 10}


def test_the_turn_says_whether_the_reply_was_cut_off(openai_server: ScriptedOpenAIServer) -> None:
    openai_server.push("done", Reply(text="The answer is 3, but to", finish_reason="length"))
    llm = client_for(openai_server)
    turns = [asyncio.run(llm.chat([{"role": "user", "content": "q"}])) for _ in range(2)]
    assert [turn.finish_reason for turn in turns] == ["stop", "length"]


def test_one_client_works_across_event_loops_and_threads(openai_server: ScriptedOpenAIServer) -> None:
    openai_server.responder = lambda body: "pong"
    llm = client_for(openai_server, timeout=5.0)

    # Backends call asyncio.run once per step: every call below runs on a loop of its own.
    assert asyncio.run(llm.chat(HELLO)).content == "pong"
    assert asyncio.run(llm.chat(HELLO)).content == "pong"
    results: list[str] = []
    threads = [threading.Thread(target=lambda: results.append(asyncio.run(llm.chat(HELLO)).content))
               for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert results == ["pong", "pong"]
    assert llm.usage["calls"] == 4


def test_sampling_overrides_config_and_top_k_goes_in_the_body(openai_server: ScriptedOpenAIServer) -> None:
    openai_server.push("a", "b")
    llm = client_for(openai_server, temperature=1.0, top_p=0.9, top_k=20, max_tokens=64)

    asyncio.run(llm.chat(HELLO))
    asyncio.run(llm.chat(HELLO, temperature=0.0, top_k=1, max_tokens=8, stop=["\n"]))

    first, second = openai_server.requests
    assert first["model"] == "judge-model" and first["messages"] == HELLO
    assert (first["temperature"], first["top_p"], first["top_k"], first["max_tokens"]) == (1.0, 0.9, 20, 64)
    assert (second["temperature"], second["top_p"], second["top_k"], second["max_tokens"]) == (0.0, 0.9, 1, 8)
    assert second["stop"] == ["\n"]
    with pytest.raises(TypeError, match="unknown sampling option.*tempreature"):
        asyncio.run(llm.chat(HELLO, tempreature=0.5))


def test_api_key_comes_from_the_named_env_var(openai_server: ScriptedOpenAIServer,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    openai_server.push("a", "b")
    monkeypatch.setenv("MY_ENDPOINT_KEY", "sk-test-123")
    monkeypatch.delenv("UNSET_KEY_VAR", raising=False)

    asyncio.run(client_for(openai_server, api_key_env="MY_ENDPOINT_KEY").chat(HELLO))
    asyncio.run(client_for(openai_server, api_key_env="UNSET_KEY_VAR").chat(HELLO))  # a local server needs none

    assert openai_server.headers[0]["authorization"] == "Bearer sk-test-123"
    assert openai_server.headers[1]["authorization"] == "Bearer not-needed"


def test_a_missing_model_is_a_user_error() -> None:
    with pytest.raises(BeyondAgentError, match="no model name") as caught:
        OpenAIChat(LLMConfig(base_url="http://127.0.0.1:1/v1"), key_path="reward.llm")
    assert "reward.llm.model" in str(caught.value)


def test_stand_in_serves_models_and_reports_an_empty_script(openai_server: ScriptedOpenAIServer) -> None:
    import openai

    client = openai.OpenAI(base_url=openai_server.base_url, api_key="x", max_retries=0)
    assert [model.id for model in client.models.list()] == ["stand-in"]
    with pytest.raises(LLMError, match="no scripted reply left"):
        asyncio.run(client_for(openai_server).chat(HELLO))


def test_lognormal_latency_has_the_mean_asked_for() -> None:
    sample = lognormal_latency(mean=0.1, sigma=1.0, seed=3)
    draws = [sample() for _ in range(20000)]
    assert abs(sum(draws) / len(draws) - 0.1) < 0.01
    assert max(draws) > 5 * 0.1  # heavy tail


def test_aclose_then_use_again_on_a_new_loop(openai_server: ScriptedOpenAIServer) -> None:
    openai_server.responder = lambda body: "pong"
    llm = client_for(openai_server, timeout=5.0)

    async def chat_and_close() -> str:
        turn = await llm.chat(HELLO)
        await llm.aclose()
        return turn.content

    assert asyncio.run(chat_and_close()) == "pong"
    assert asyncio.run(llm.chat(HELLO)).content == "pong"
