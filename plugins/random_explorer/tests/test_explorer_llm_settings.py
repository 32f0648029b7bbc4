"""The `random` explorer's LLM settings, class-wide: each sampling key reaching the request (unset: the
client's own), `max_llm_retries` at 0 and the doubling `retry_backoff`, and the documented defaults.

The eighth audit's follow-up (mutation testing of the LLM roles). The sampling check goes through
the real `openai` client to `ScriptedOpenAIServer` on loopback (the `openai_server` fixture, a
stand-in for a hosted LLM); the retry checks use `FlakyLLM` from test_random_explorer_llm.py
(a model whose connection drops), with the jitter's draws recorded instead of slept.
"""

from __future__ import annotations

import random

import attrs
import pytest
from beyondagent_plugin_random_explorer.config import RandomExplorerConfig
from test_random_explorer_llm import FlakyLLM, client, explore, llm_explorer

from beyondagent_core.testing.openai_server import ScriptedOpenAIServer


def test_each_sampling_key_reaches_the_request(openai_server: ScriptedOpenAIServer) -> None:
    openai_server.push("Action: right", "Action: right")
    explore(llm_explorer(max_explore_step=1, temperature=0.0, top_p=0.5, top_k=7, max_tokens=12),
            client(openai_server))
    explore(llm_explorer(max_explore_step=1, temperature=None, top_p=None),
            client(openai_server, temperature=0.4, top_p=0.8, max_tokens=30))
    chosen, unset = openai_server.requests
    assert [chosen.get(key) for key in ("temperature", "top_p", "top_k", "max_tokens")] == [0.0, 0.5, 7, 12]
    assert [unset.get(key) for key in ("temperature", "top_p", "top_k", "max_tokens")] == [0.4, 0.8, None, 30]


def test_no_retries_means_one_call(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(random, "uniform", lambda low, high: pytest.fail("no retry, no backoff"))
    llm = FlakyLLM(failures=1)
    trajectory = explore(llm_explorer(max_explore_step=2, max_llm_retries=0), llm)
    assert llm.calls == 1 and trajectory.metrics["steps"] == 0
    assert (trajectory.metrics["stopped"], trajectory.metrics["llm_retries"]) == ("llm_error", 0)


def test_the_backoff_doubles_from_retry_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    drawn: list[tuple[float, float]] = []
    monkeypatch.setattr(random, "uniform", lambda low, high: drawn.append((low, high)) or 0.0)
    llm = FlakyLLM(failures=3)
    trajectory = explore(llm_explorer(max_explore_step=1, max_llm_retries=3, retry_backoff=0.25), llm)
    assert drawn == [(0, 0.25), (0, 0.5), (0, 1.0)]
    assert (llm.calls, trajectory.metrics["llm_retries"], trajectory.metrics["steps"]) == (4, 3, 1)


def test_the_documented_defaults() -> None:
    # the config's docstring and AgentEvolver's strategy_args
    assert attrs.asdict(RandomExplorerConfig()) == {
        "mode": "llm", "max_explore_step": 15, "max_llm_retries": 3, "retry_backoff": 1.0, "temperature": 1.0,
        "top_p": 1.0, "top_k": None, "max_tokens": None, "task_summary_history_length": 10, "seed": 0}
