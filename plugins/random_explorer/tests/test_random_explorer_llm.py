"""The `random` explorer in `llm` mode: the real openai client against the local stand-in server.

`openai_server` (from `beyondagent_core.testing`) is an OpenAI-compatible server on loopback
that replays scripted completions: it stands in for a hosted LLM, which tests cannot reach.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from beyondagent_plugin_gym.config import FrozenLakeConfig
from beyondagent_plugin_gym.frozenlake import FrozenLake
from beyondagent_plugin_random_explorer.config import RandomExplorerConfig
from beyondagent_plugin_random_explorer.explorer import RandomExplorer
from beyondagent_plugin_random_explorer.prompt import HIDDEN_QUERY

from beyondagent_core.envs.local import LocalAsyncEnv
from beyondagent_core.llm import LLMConfig, OpenAIChat
from beyondagent_core.runtime.tokens import ContextLengthExceeded
from beyondagent_core.testing.openai_server import Reply
from beyondagent_core.types import Task, Trajectory, Turn

SEED = Task(task_id="frozenlake-train-0", env="frozenlake", query="Reach G in four moves.",
            metadata={"map": ["SFF", "FHF", "FFG"]})


def explore(explorer: RandomExplorer, llm) -> Trajectory:
    async def run() -> Trajectory:
        async with LocalAsyncEnv(FrozenLake(FrozenLakeConfig(max_steps=50))) as env:
            return await explorer.explore(SEED, env, llm)

    return asyncio.run(run())


def llm_explorer(**config) -> RandomExplorer:
    return RandomExplorer(RandomExplorerConfig(mode="llm", **config))


def client(server, **config) -> OpenAIChat:
    return OpenAIChat(LLMConfig(model="stand-in", base_url=server.base_url, backoff_base=0.0, **config))


def test_the_model_is_told_to_map_the_env_and_never_sees_the_seed_query(openai_server) -> None:
    replies = ["I will look around. Action: right", "Action: right", "Action: left"]
    openai_server.push(*replies)
    trajectory = explore(llm_explorer(max_explore_step=3), client(openai_server))

    first, last = openai_server.requests[0], openai_server.requests[-1]
    system, user = first["messages"]
    assert system["role"] == "system"
    assert "not to complete a task" in system["content"] and "Do NOT try to solve" in system["content"]
    assert "You play FrozenLake on a 3x3 grid" in system["content"]  # the env's own rules come along
    assert user["content"].startswith(HIDDEN_QUERY) and user["content"].endswith("Actions available now: down, right.")
    assert all("Reach G in four moves." not in m["content"] for r in openai_server.requests for m in r["messages"])
    assert (first["temperature"], first["top_p"]) == (1.0, 1.0)
    # One env step per model turn: each request holds the previous replies and observations.
    assert [m["role"] for m in last["messages"]] == ["system", "user", "assistant", "user", "assistant", "user"]
    assert last["messages"][2]["content"] == replies[0]
    assert "You are at row 0, column 1." in last["messages"][3]["content"]

    assert [t.content for t in trajectory.turns if t.role == "assistant"] == replies
    assert trajectory.metrics["stopped"] == "max_explore_step"
    assert trajectory.metrics["llm_calls"] == 3 and trajectory.metrics["llm_retries"] == 0
    goals = [goal["goal"] for goal in trajectory.metrics["achieved"][-1]["goals"]]
    assert goals == [{"kind": "reach", "row": 0, "col": 1}, {"kind": "reach", "row": 0, "col": 2}]
    assert trajectory.turns[1].content.startswith(HIDDEN_QUERY)


def test_an_llm_that_fails_after_its_retries_ends_the_exploration_with_what_it_has(openai_server) -> None:
    openai_server.push("Action: right", Reply.fault(500), Reply.fault(503))
    trajectory = explore(llm_explorer(max_explore_step=5), client(openai_server, max_llm_retries=1))

    assert trajectory.metrics["steps"] == 1
    assert [t.content for t in trajectory.turns if t.role == "assistant"] == ["Action: right"]
    assert trajectory.metrics["stopped"] == "llm_error"
    assert trajectory.metrics["llm_error"].startswith("LLMError: ")
    # The client retried once; the explorer does not retry an error the client already gave up on.
    assert len(openai_server.requests) == 3 and trajectory.metrics["llm_calls"] == 2
    assert trajectory.metrics["achieved"][0]["goals"][0]["goal"] == {"kind": "reach", "row": 0, "col": 1}


class FlakyLLM:
    """Stands in for a hosted model that fails `failures` times (a dropped connection), then answers."""

    def __init__(self, failures: int, error: Exception | None = None):
        self.failures = failures
        self.error = error or ConnectionError("connection reset by peer")
        self.calls = 0

    async def chat(self, messages: Sequence[dict], **sampling) -> Turn:
        self.calls += 1
        if self.calls <= self.failures:
            raise self.error
        return Turn(role="assistant", content="Action: down")


def test_other_llm_errors_are_retried_up_to_max_llm_retries() -> None:
    llm = FlakyLLM(failures=2)
    trajectory = explore(llm_explorer(max_explore_step=2, max_llm_retries=2, retry_backoff=0.0), llm)
    assert trajectory.metrics["steps"] == 2 and trajectory.metrics["llm_retries"] == 2
    assert trajectory.metrics["stopped"] == "max_explore_step"

    llm = FlakyLLM(failures=10)
    trajectory = explore(llm_explorer(max_explore_step=2, max_llm_retries=2, retry_backoff=0.0), llm)
    assert llm.calls == 3 and trajectory.metrics["steps"] == 0
    assert trajectory.metrics["stopped"] == "llm_error"
    assert trajectory.metrics["llm_error"] == "ConnectionError: connection reset by peer"


def test_a_full_context_ends_the_exploration() -> None:
    llm = FlakyLLM(failures=1, error=ContextLengthExceeded("the episode reached 4096 tokens"))
    trajectory = explore(llm_explorer(max_explore_step=2), llm)
    assert llm.calls == 1 and trajectory.metrics["stopped"] == "context_length"
