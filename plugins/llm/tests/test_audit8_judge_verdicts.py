"""`llm_judge`: the success threshold's boundary, the cache key's turns, and replies it must not misread.

From the eighth audit (mutation testing of the LLM roles): each test here fails on a plausible
bug the earlier tests let through: a score equal to `threshold` counted as a failure, a cache
key without the turns' content (two different episodes with the same roles sharing one verdict),
a reply opening with "No, ..." read as yes, a JSON score outside 0..1 accepted, and a verdict
inside unfinished (cut-off) `<think>` reasoning taken as the answer. The judge model is
`ScriptedOpenAIServer` on loopback (the `openai_server` fixture), reached through the real
`openai` client: it stands in for a hosted LLM, which cannot be reached here.
"""

from __future__ import annotations

import asyncio

import pytest
from beyondagent_plugin_llm.judge import LLMJudge, LLMJudgeConfig, parse_verdict

from beyondagent_core.llm import LLMConfig
from beyondagent_core.testing.openai_server import ScriptedOpenAIServer
from beyondagent_core.types import Task, Trajectory, Turn

TASK = Task(task_id="t-audit8", env="frozenlake", query="Walk to the square at row 0, column 2.",
            ground_truth=["right", "right"])


def episode(*moves: str) -> Trajectory:
    turns = [Turn(role="user", content="You are at row 0, column 0.")]
    for move in moves:
        turns += [Turn(role="assistant", content=move), Turn(role="user", content=f"You moved {move}.")]
    return Trajectory(task=TASK, turns=turns)


def judge_for(server: ScriptedOpenAIServer, **options) -> LLMJudge:
    llm = LLMConfig(model="grader", base_url=server.base_url, timeout=5.0, max_llm_retries=0)
    return LLMJudge(LLMJudgeConfig(llm=llm, **options))


def test_a_score_equal_to_the_threshold_is_a_success(openai_server: ScriptedOpenAIServer) -> None:
    openai_server.push("Score: 0.6", "Score: 0.59")
    at = asyncio.run(judge_for(openai_server, mode="score", threshold=0.6).score(TASK, episode("right")))
    below = asyncio.run(judge_for(openai_server, mode="score", threshold=0.6).score(TASK, episode("down")))
    assert (at.score, at.success) == (pytest.approx(0.6), True)
    assert (below.score, below.success) == (pytest.approx(0.59), False)


def test_an_even_binary_vote_meets_the_default_threshold(openai_server: ScriptedOpenAIServer) -> None:
    answers = iter(["<verdict>yes</verdict>", "<verdict>no</verdict>"])
    openai_server.responder = lambda body: next(answers)
    reward = asyncio.run(judge_for(openai_server, k=2).score(TASK, episode("right", "right")))
    assert (reward.score, reward.success) == (0.5, True)  # 1/2 >= 0.5


def test_episodes_with_the_same_roles_but_other_content_are_judged_apart(openai_server: ScriptedOpenAIServer) -> None:
    openai_server.push("<verdict>yes</verdict>", "<verdict>no</verdict>")
    judge = judge_for(openai_server)

    good = asyncio.run(judge.score(TASK, episode("right", "right")))
    bad = asyncio.run(judge.score(TASK, episode("down", "left")))  # same roles, other moves

    assert (good.score, bad.score) == (1.0, 0.0)
    assert bad.details["cached"] is False and judge.stats["cache_hits"] == 0
    assert len(openai_server.requests) == 2
    again = asyncio.run(judge.score(TASK, episode("down", "left")))
    assert (again.score, again.details["cached"]) == (0.0, True)  # the same episode is still cached


@pytest.mark.parametrize(("answer", "expected"), [
    ("No, the agent stopped one square short.", 0.0),
    ("No - it fell into the hole.", 0.0),
    ("Yes, it reached the square.", 1.0),
    ("Incorrect; it went down.", 0.0),
])
def test_a_reply_that_opens_with_its_verdict(answer: str, expected: float) -> None:
    assert parse_verdict(answer) == expected


def test_a_no_reply_through_the_endpoint_scores_zero(openai_server: ScriptedOpenAIServer) -> None:
    openai_server.push("No, it walked into a hole.")
    reward = asyncio.run(judge_for(openai_server).score(TASK, episode("down")))
    assert (reward.score, reward.success) == (0.0, False)


@pytest.mark.parametrize(("answer", "expected"), [
    ('{"score": 7}', None),
    ('{"score": -0.5}', None),
    ('{"score": 2, "verdict": "no"}', 0.0),  # the out-of-range score is skipped, the next key read
    ('{"score": 0.75}', 0.75),
    ('{"score": 1}', 1.0),
    ('{"score": 0}', 0.0),
])
def test_a_json_score_outside_zero_to_one_is_not_a_verdict(answer: str, expected: float | None) -> None:
    value = parse_verdict(answer)
    assert value == (pytest.approx(expected) if expected is not None else None)


def test_an_out_of_range_json_score_is_unparseable_not_a_reward(openai_server: ScriptedOpenAIServer) -> None:
    openai_server.push('{"score": 7}')
    reward = asyncio.run(judge_for(openai_server, mode="score").score(TASK, episode("right")))
    assert (reward.score, reward.success) == (0.0, False)
    assert reward.details["parsed"] == 0 and reward.details["errors"] == ["unparseable verdict"]


@pytest.mark.parametrize(("answer", "expected"), [
    ("<think>It reached row 0, column 2, so <verdict>yes</verdict> unless", None),  # cut off mid-thought
    ("<think>Maybe <verdict>yes</verdict>. Wait, it stopped at column 1", None),
    ("<think>Maybe <verdict>yes</verdict>.</think> It stopped at column 1. <verdict>no</verdict>", 0.0),
    ("<think>It stopped at column 1.</think><verdict>yes</verdict>", 1.0),
])
def test_a_verdict_inside_unfinished_thinking_does_not_count(answer: str, expected: float | None) -> None:
    assert parse_verdict(answer) == expected


@pytest.mark.parametrize(("answer", "expected"), [
    ("Success rate: 0%", None),                     # a verdict word used as a noun is not the verdict
    ("No doubt, the agent succeeded.", None),
    ("No problem: the task is solved.", None),
    ("Yes the agent did it", None),                 # not a clause of its own: unparseable, never a guess
    ("Correct - the moves reach the goal.", 1.0),   # a clause of its own: the verdict
    ("FAIL!", 0.0),
])
def test_an_opening_verdict_word_counts_only_as_a_clause_of_its_own(answer: str, expected: float | None) -> None:
    """A short reply without the asked-for format was read by its first word: "Success rate: 0%" scored 1.0
    and "No doubt, the agent succeeded." 0.0 (a real bug the audit found)."""
    assert parse_verdict(answer) == expected
