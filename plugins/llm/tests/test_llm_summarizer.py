"""The `llm` summarizer: its prompt (window, masked seed query, known objectives, profile) and
how it turns `<task>` blocks into tasks, skipping malformed ones without raising.

The summarizer model is `ScriptedOpenAIServer` on loopback (the `openai_server` fixture),
reached through the real `openai` client: it stands in for a hosted LLM.
"""

from __future__ import annotations

import asyncio
import json

import pytest
from beyondagent_plugin_llm.summarizer import MASK, LLMSummarizer, LLMSummarizerConfig

from beyondagent_core.errors import RunError
from beyondagent_core.llm import LLMConfig, OpenAIChat
from beyondagent_core.registry import Registry
from beyondagent_core.spec import structured
from beyondagent_core.testing.openai_server import ScriptedOpenAIServer
from beyondagent_core.types import Task, Trajectory, Turn

SEED = Task(task_id="lake-1", env="frozenlake", query="Reach the gift at row 3, column 3.",
            metadata={"map": "4x4", "seed": 7})
MOVES = ["right", "right", "down", "down", "left", "down"]


def exploration(seed: Task = SEED) -> Trajectory:
    """Six answered moves, then one the env never answered."""
    turns = [Turn(role="system", content="You explore a frozen lake."),
             Turn(role="user", content=f"Task: {seed.query} You are at row 0, column 0.")]
    for step, move in enumerate(MOVES):
        turns.append(Turn(role="assistant", content=move))
        turns.append(Turn(role="user", content=f"obs-{step}: moved {move}. The goal was: {seed.query}"))
    turns.append(Turn(role="assistant", content="up"))
    return Trajectory(task=seed, turns=turns)


def block(query: str, actions: object = ("right", "down"), confidence: object = 0.9) -> str:
    return "<task>" + json.dumps({"query": query, "confidence": confidence, "action_sequence": actions}) + "</task>"


def summarize(server: ScriptedOpenAIServer, summarizer: LLMSummarizer, known: list[Task] = (),
              trajectory: Trajectory | None = None) -> list[Task]:
    llm = OpenAIChat(LLMConfig(model="summarizer", base_url=server.base_url, timeout=5.0, max_llm_retries=0))
    return asyncio.run(summarizer.summarize(SEED, trajectory or exploration(), list(known), llm))


def prompt_of(server: ScriptedOpenAIServer, index: int = -1) -> str:
    return server.requests[index]["messages"][-1]["content"]


def test_several_blocks_become_distinct_tasks(openai_server: ScriptedOpenAIServer) -> None:
    answer = "\n".join([
        "Here are the tasks.",
        block("Walk two squares to the right.", "right\nright", confidence=1.7),
        '<task>\n```json\n{"query": "Go down twice from the start.", "confidence": "0.8",\n'
        ' "action_sequence": ["down", "down"],}\n```\n</task>',
        block("Step left once after going down.", ["down", "left"], confidence=-0.2),
    ])
    openai_server.push(answer)
    summarizer = LLMSummarizer()

    tasks = summarize(openai_server, summarizer)

    assert [t.query for t in tasks] == ["Walk two squares to the right.", "Go down twice from the start.",
                                        "Step left once after going down."]
    assert len({t.task_id for t in tasks}) == 3
    assert all(t.task_id.startswith("lake-1/syn-") for t in tasks)
    assert [t.ground_truth for t in tasks] == ["right\nright", ["down", "down"], ["down", "left"]]
    assert [t.confidence for t in tasks] == [1.0, 0.8, 0.0]  # clamped to 0..1
    for task in tasks:
        assert (task.origin, task.seed_task_id, task.env, task.judge) == ("synthetic", "lake-1", "frozenlake", None)
        assert task.metadata == SEED.metadata and task.metadata is not SEED.metadata
    assert summarizer.stats["blocks"] == 3 and summarizer.stats["tasks"] == 3 and summarizer.stats["malformed"] == 0


def test_malformed_and_partial_blocks_are_counted_and_skipped(openai_server: ScriptedOpenAIServer) -> None:
    answer = "\n".join([
        block("Reach row 1, column 2."),
        "<task>{query: 'not json'}</task>",
        '<task>{"query": "No actions given.", "confidence": 0.5}</task>',
        '<task>{"query": "   ", "action_sequence": "down"}</task>',
        '<task>["a list", "not an object"]</task>',
        '<task>{"query": "Cut off mid-way", "action_seq',  # the answer ran out of tokens
    ])
    openai_server.push(answer, "I could not find any tasks.")
    summarizer = LLMSummarizer()

    tasks = summarize(openai_server, summarizer)
    assert [t.query for t in tasks] == ["Reach row 1, column 2."]
    assert summarizer.stats["blocks"] == 6
    assert summarizer.stats["malformed"] == 5

    assert summarize(openai_server, summarizer) == []  # no blocks at all: no tasks, no error
    assert summarizer.stats["calls"] == 2 and summarizer.stats["blocks"] == 6


def test_known_objectives_are_in_the_prompt_and_grow(openai_server: ScriptedOpenAIServer) -> None:
    openai_server.push(block("Task A: go right.") + block("Task B: go down."),
                       block("task b:  GO DOWN.") + block("Task C: go left."),
                       block("Task D: stay."))
    summarizer = LLMSummarizer()

    first = summarize(openai_server, summarizer)
    assert "(none yet)" in prompt_of(openai_server)
    second = summarize(openai_server, summarizer, known=first)
    prompt = prompt_of(openai_server)
    assert "do not repeat these" in prompt
    assert "- Task A: go right.\n- Task B: go down." in prompt
    assert [t.query for t in second] == ["Task C: go left."]  # the repeat of B is dropped
    assert summarizer.stats["duplicates"] == 1

    summarize(openai_server, summarizer, known=first + second)
    assert "- Task A: go right.\n- Task B: go down.\n- Task C: go left." in prompt_of(openai_server)


def test_the_seed_query_is_masked(openai_server: ScriptedOpenAIServer) -> None:
    openai_server.push("")
    summarize(openai_server, LLMSummarizer(LLMSummarizerConfig(task_summary_history_length=0)))

    prompt = prompt_of(openai_server)
    assert SEED.query not in prompt
    assert f"The goal was: {MASK}" in prompt


def test_the_window_is_the_last_n_answered_steps(openai_server: ScriptedOpenAIServer) -> None:
    openai_server.push("", "")
    summarize(openai_server, LLMSummarizer(LLMSummarizerConfig(task_summary_history_length=2)))
    summarize(openai_server, LLMSummarizer(LLMSummarizerConfig(task_summary_history_length=0)))

    window, everything = prompt_of(openai_server, 0), prompt_of(openai_server, 1)
    assert "steps 0 to 3 are not shown" in window
    assert [f">>> STEP {i} <<<" in window for i in range(6)] == [False] * 4 + [True] * 2
    assert "obs-4: moved left" in window and "obs-3" not in window
    assert all(f">>> STEP {i} <<<" in everything for i in range(6))
    assert ">>> STEP 6 <<<" not in everything  # the unanswered last action is not a pair
    assert "not shown" not in everything


def test_max_tasks_profile_and_sampling(openai_server: ScriptedOpenAIServer) -> None:
    openai_server.push("".join(block(f"Task number {i}.") for i in range(4)))
    config = LLMSummarizerConfig(max_tasks=2, entities=["holes", "the gift"], operations=["left", "right"],
                                 difficulty="two to four moves", temperature=0.3, max_tokens=256)
    summarizer = LLMSummarizer(config)

    tasks = summarize(openai_server, summarizer)

    assert [t.query for t in tasks] == ["Task number 0.", "Task number 1."]
    assert summarizer.stats["over_limit"] == 2
    prompt = prompt_of(openai_server)
    assert "Entities: holes, the gift" in prompt and "Operations: left, right" in prompt
    assert "Preferred difficulty: two to four moves" in prompt and "at most 2 new task(s)" in prompt
    request = openai_server.requests[-1]
    assert (request["temperature"], request["max_tokens"], request["model"]) == (0.3, 256, "summarizer")


def test_its_own_llm_and_no_llm_at_all(openai_server: ScriptedOpenAIServer) -> None:
    own = LLMConfig(model="own-summarizer", base_url=openai_server.base_url, timeout=5.0)
    openai_server.push(block("Go right."))
    summarizer = LLMSummarizer(LLMSummarizerConfig(llm=own))

    tasks = asyncio.run(summarizer.summarize(SEED, exploration(), [], None))

    assert [t.query for t in tasks] == ["Go right."]
    assert openai_server.requests[-1]["model"] == "own-summarizer"
    with pytest.raises(RunError, match="no LLM"):
        asyncio.run(LLMSummarizer().summarize(SEED, exploration(), [], None))


@pytest.mark.beyondagent_plugins("llm")
def test_registered_and_built_from_a_spec_block(registry: Registry, openai_server: ScriptedOpenAIServer) -> None:
    registration = registry.resolve("summarizer", "llm", key_path="explore.summarizer")
    config = structured(registration.spec.config_cls, {"task_summary_history_length": 3, "max_tasks": 1},
                        "explore.summarizer", "spec.yaml")
    summarizer = registration.spec.load_factory()(config)
    openai_server.push(block("Only one.") + block("Over the limit."))

    assert [t.query for t in summarize(openai_server, summarizer)] == ["Only one."]
