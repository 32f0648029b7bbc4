"""The `llm` summarizer, class-wide: the window on either side of its length, the documented defaults,
its sampling reaching the request (0 included), which turns make a step, and every `<task>` block
form the parser keeps or skips.

The eighth audit's follow-up (mutation testing of the LLM roles). Most checks read the prompt
and the parser directly (pure functions); the sampling one goes through the real `openai` client
to `ScriptedOpenAIServer` on loopback (the `openai_server` fixture), which stands in for a hosted
LLM that cannot be reached here.
"""

from __future__ import annotations

import asyncio
import json

import attrs
import pytest
from beyondagent_plugin_llm.summarizer import (
    MASK,
    LLMSummarizer,
    LLMSummarizerConfig,
    action_observation_pairs,
    mask,
    parse_task_blocks,
)
from test_llm_summarizer import MOVES, SEED, block, exploration

from beyondagent_core.llm import LLMConfig, OpenAIChat
from beyondagent_core.testing.openai_server import ScriptedOpenAIServer
from beyondagent_core.types import Task, Trajectory, Turn


def prompt(config: LLMSummarizerConfig | None = None, trajectory: Trajectory | None = None,
           known: list[Task] = ()) -> str:
    return LLMSummarizer(config).user_prompt(SEED, trajectory or exploration(), list(known))


def steps_shown(text: str, total: int) -> list[int]:
    return [step for step in range(total) if f">>> STEP {step} <<<" in text]


def test_a_window_as_long_as_the_exploration_shows_every_step() -> None:
    assert len(MOVES) == 6
    whole = prompt(LLMSummarizerConfig(task_summary_history_length=6))
    assert steps_shown(whole, 6) == [0, 1, 2, 3, 4, 5] and "not shown" not in whole

    one_short = prompt(LLMSummarizerConfig(task_summary_history_length=5))
    assert steps_shown(one_short, 6) == [1, 2, 3, 4, 5]
    assert "(steps 0 to 0 are not shown; these are the last 5 steps)" in one_short

    longer = prompt(LLMSummarizerConfig(task_summary_history_length=7))
    assert steps_shown(longer, 6) == [0, 1, 2, 3, 4, 5] and "not shown" not in longer


def test_the_documented_defaults() -> None:
    # docs/spec.md's summarizer keys; the config's docstring: a window of 10, at most 3 tasks
    assert attrs.asdict(LLMSummarizerConfig()) == {
        "task_summary_history_length": 10, "max_tasks": 3, "entities": [], "operations": [], "difficulty": None,
        "temperature": None, "max_tokens": None, "llm": None}
    turns = [Turn(role="user", content="start")]
    for step in range(12):
        turns += [Turn(role="assistant", content=f"act-{step}"), Turn(role="user", content=f"obs-{step}")]
    text = prompt(trajectory=Trajectory(task=SEED, turns=turns))
    assert steps_shown(text, 12) == list(range(2, 12))
    assert "(steps 0 to 1 are not shown; these are the last 10 steps)" in text
    assert text.endswith("Write at most 3 new task(s) in <task> blocks.")
    assert "# The environment" not in text  # no profile given: no section


def test_no_answered_step_is_said_and_the_profile_parts_stand_alone() -> None:
    text = prompt(LLMSummarizerConfig(difficulty="hard"), Trajectory(task=SEED, turns=[Turn("assistant", "up")]))
    assert "(the agent took no steps that the environment answered)" in text
    assert "# The environment\nPreferred difficulty: hard\n" in text
    assert "Entities" not in text and "Operations" not in text
    assert "# The environment\nOperations: a, b\n" in prompt(LLMSummarizerConfig(operations=["a", "b"]))


def test_only_known_tasks_with_a_query_are_listed() -> None:
    text = prompt(known=[Task(task_id="x", query=None), Task(task_id="y", query="Go left.")])
    assert "# Objectives already found (do not repeat these)\n\n- Go left.\n" in text
    assert "None" not in text


def test_an_action_pairs_with_the_user_or_tool_turn_right_after_it() -> None:
    turns = [Turn("user", "intro"), Turn("assistant", "a1"), Turn("tool", "t1"), Turn("assistant", "a2"),
             Turn("assistant", "a3"), Turn("system", "s"), Turn("assistant", "a4"), Turn("user", "u4")]
    assert action_observation_pairs(turns) == [("a1", "t1"), ("a4", "u4")]


@pytest.mark.parametrize(("text", "query", "expected"), [
    ("goal: Reach it. again: Reach it.", "Reach it.", f"goal: {MASK} again: {MASK}"),
    ("goal: Reach it.", "  Reach it.\n", f"goal: {MASK}"),   # the query's surrounding blanks do not matter
    ("goal: Reach it.", None, "goal: Reach it."),
    ("goal: Reach it.", " ", "goal: Reach it."),
])
def test_the_seed_query_mask(text: str, query: str | None, expected: str) -> None:
    assert mask(text, query) == expected


def test_its_sampling_reaches_the_request_and_zero_counts(openai_server: ScriptedOpenAIServer) -> None:
    llm = OpenAIChat(LLMConfig(model="summarizer", base_url=openai_server.base_url, temperature=0.9, max_tokens=500,
                               max_llm_retries=0))
    openai_server.push("", "")

    async def both() -> None:
        await LLMSummarizer(LLMSummarizerConfig(temperature=0.0)).summarize(SEED, exploration(), [], llm)
        await LLMSummarizer(LLMSummarizerConfig(max_tokens=1)).summarize(SEED, exploration(), [], llm)

    asyncio.run(both())
    sent = [(request.get("temperature"), request.get("max_tokens")) for request in openai_server.requests]
    assert sent == [(0.0, 500), (0.9, 1)]  # unset: the client's own


# --- `<task>` blocks -------------------------------------------------------------------------


def parse(text: str, **options) -> tuple[list[Task], dict[str, int]]:
    return parse_task_blocks(text, SEED, **options)


def test_a_block_in_capitals_and_one_closed_by_the_next_block() -> None:
    tasks, counts = parse('<TASK>{"query": "Go up.", "action_sequence": "up"}</TASK>'
                          '<task>{"query": "Unclosed.", "action_sequence": "down"}' + block("Go left."))
    assert [task.query for task in tasks] == ["Go up.", "Go left."]
    assert counts == {"blocks": 3, "tasks": 2, "malformed": 1, "duplicates": 0, "over_limit": 0}


@pytest.mark.parametrize("actions", ["", [], {}, None])
def test_an_empty_action_sequence_is_malformed(actions: object) -> None:
    body = json.dumps({"query": "Do nothing.", "action_sequence": actions})
    assert parse(f"<task>{body}</task>") == ([], {"blocks": 1, "tasks": 0, "malformed": 1, "duplicates": 0,
                                                 "over_limit": 0})


def test_a_repeat_in_the_same_answer_is_a_duplicate_even_past_the_limit() -> None:
    tasks, counts = parse(block("  Go Right. ") + block("go   right.") + block("Go down.") + block("GO RIGHT."),
                          max_tasks=1)
    assert [task.query for task in tasks] == ["Go Right."]  # kept without its surrounding blanks
    assert counts == {"blocks": 4, "tasks": 1, "malformed": 0, "duplicates": 2, "over_limit": 1}
    assert len(parse("".join(block(f"Task {i}.") for i in range(5)))[0]) == 5  # no max_tasks: no limit


@pytest.mark.parametrize(("confidence", "expected"), [
    ("80%", 0.8), (" 0.5 ", 0.5), ("high", None), (True, None), (float("nan"), None), (None, None), (1, 1.0),
])
def test_each_form_of_confidence(confidence: object, expected: float | None) -> None:
    [task], _ = parse(block("Go right.", confidence=confidence))
    assert task.confidence == (pytest.approx(expected) if expected is not None else None)


def test_the_task_id_is_the_seeds_and_a_digest_of_query_and_actions() -> None:
    [first], _ = parse(block("Go right.", ["right"]))
    [same], _ = parse(block("go  RIGHT.", ["right"]))
    [other], _ = parse(block("Go right.", ["right", "right"]))
    assert first.task_id == same.task_id and first.task_id != other.task_id
    assert first.task_id.startswith(f"{SEED.task_id}/syn-") and len(first.task_id) == len(SEED.task_id) + 15
