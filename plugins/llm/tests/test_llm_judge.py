"""`llm_judge`: verdict parsing, k-vote averaging, the cache, unparseable and failed judgements.

The judge model is `ScriptedOpenAIServer` on loopback (the `openai_server` fixture), reached
through the real `openai` client: it stands in for a hosted LLM, which cannot be reached here.
"""

from __future__ import annotations

import asyncio

import pytest
from beyondagent_plugin_llm.judge import LLMJudge, LLMJudgeConfig, parse_verdict

from beyondagent_core.llm import LLMConfig, LLMError
from beyondagent_core.registry import Registry
from beyondagent_core.spec import structured
from beyondagent_core.testing.openai_server import Reply, ScriptedOpenAIServer
from beyondagent_core.types import Task, Trajectory, Turn

TASK = Task(task_id="t1", env="frozenlake", query="Walk to the square at row 2, column 3.",
            ground_truth=["right", "right", "down", "down", "right"])
EPISODE = Trajectory(task=TASK, turns=[
    Turn(role="system", content="You are on a frozen lake."),
    Turn(role="user", content="You are at row 0, column 0."),
    Turn(role="assistant", content="right"),
    Turn(role="user", content="You are at row 0, column 1."),
])


def judge_for(server: ScriptedOpenAIServer, **options) -> LLMJudge:
    llm = LLMConfig(model="grader", base_url=server.base_url, timeout=2.0, max_llm_retries=0)
    return LLMJudge(LLMJudgeConfig(llm=llm, **options))


@pytest.mark.parametrize(("answer", "expected"), [
    ("The agent reached the goal.\n<verdict>yes</verdict>", 1.0),
    ("<verdict> No </verdict>", 0.0),
    ("<verdict>no</verdict> ... on reflection <verdict>YES</verdict>", 1.0),
    ("<score>0.7</score>", 0.7),
    ("Reasoning...\nScore: 0.25", 0.25),
    ("**Score:** 8/10", 0.8),
    ("score = 85%", 0.85),
    ('{"score": 1}', 1.0),
    ('The grade:\n```json\n{"verdict": "no", "reason": "wrong square"}\n```', 0.0),
    ('{"success": true}', 1.0),
    ("YES", 1.0),
    ("No.", 0.0),
    ("Correct", 1.0),
    ("0.4", 0.4),
    ("Let me check each step.\nThe final position matches.\nYes, it did.", 1.0),
    ("<think>maybe <verdict>no</verdict></think> <verdict>yes</verdict>", 1.0),
    ("Verdict: incorrect", 0.0),
    ("I am not able to tell from this transcript what happened at the end of the episode.", None),
    ("Score: 7", None),  # out of what? not guessed
    ("<score>1.5</score>", None),
    ("", None),
    ('{"reason": "no verdict key"}', None),
])
def test_verdict_formats(answer: str, expected: float | None) -> None:
    value = parse_verdict(answer)
    assert value == (pytest.approx(expected) if expected is not None else None)


def test_binary_verdict_becomes_the_reward(openai_server: ScriptedOpenAIServer) -> None:
    openai_server.push("It walked right once only. <verdict>no</verdict>")
    reward = asyncio.run(judge_for(openai_server).score(TASK, EPISODE))

    assert (reward.score, reward.success) == (0.0, False)
    assert reward.details["parsed"] == 1 and reward.details["cached"] is False
    prompt = openai_server.requests[0]["messages"][-1]["content"]
    assert TASK.query in prompt
    assert '"down"' in prompt  # the reference solution, as JSON
    assert "[assistant]\nright" in prompt and "You are at row 0, column 1." in prompt
    assert "<verdict>yes</verdict>" in prompt  # the binary instructions


def test_k_judgements_run_in_parallel_and_are_averaged() -> None:
    answers = iter(["<verdict>yes</verdict>", "<verdict>no</verdict>", "<verdict>yes</verdict>"])
    with ScriptedOpenAIServer(lambda body: Reply.slow(0.2, next(answers))) as server:
        reward = asyncio.run(judge_for(server, k=3).score(TASK, EPISODE))
        max_in_flight = server.max_in_flight

    assert reward.score == pytest.approx(2 / 3)
    assert reward.success is True
    assert sorted(reward.details["scores"]) == [0.0, 1.0, 1.0]
    assert "2/3" in reward.reason
    assert max_in_flight >= 2


def test_score_mode_and_threshold(openai_server: ScriptedOpenAIServer) -> None:
    openai_server.push("Score: 0.7", "Score: 0.7")
    low = asyncio.run(judge_for(openai_server, mode="score", threshold=0.5).score(TASK, EPISODE))
    high = asyncio.run(judge_for(openai_server, mode="score", threshold=0.8).score(TASK, EPISODE))

    assert (low.score, low.success) == (pytest.approx(0.7), True)
    assert (high.score, high.success) == (pytest.approx(0.7), False)
    assert "<score>S</score>" in openai_server.requests[0]["messages"][-1]["content"]


def test_binary_mode_rounds_a_numeric_verdict(openai_server: ScriptedOpenAIServer) -> None:
    openai_server.push("Score: 0.6")
    reward = asyncio.run(judge_for(openai_server).score(TASK, EPISODE))
    assert reward.score == 1.0


def test_the_same_episode_is_judged_once(openai_server: ScriptedOpenAIServer) -> None:
    openai_server.responder = lambda body: Reply.slow(0.05, "<verdict>yes</verdict>")
    judge = judge_for(openai_server, k=2)

    first = asyncio.run(judge.score(TASK, EPISODE))
    again = asyncio.run(judge.score(TASK, Trajectory(task=TASK, turns=list(EPISODE.turns))))
    assert len(openai_server.requests) == 2
    assert again.score == first.score == 1.0
    assert again.details["cached"] is True and judge.stats["cache_hits"] == 1

    longer = Trajectory(task=TASK, turns=[*EPISODE.turns, Turn(role="assistant", content="down")])
    asyncio.run(judge.score(TASK, longer))
    assert len(openai_server.requests) == 4

    async def four_identical_at_once() -> list[float]:
        other = Trajectory(task=TASK, turns=[Turn(role="assistant", content="left")])
        return [r.score for r in await asyncio.gather(*(judge.score(TASK, other) for _ in range(4)))]

    assert asyncio.run(four_identical_at_once()) == [1.0] * 4
    assert len(openai_server.requests) == 6  # one k=2 judging for the four concurrent calls


def test_cache_off_judges_every_time(openai_server: ScriptedOpenAIServer) -> None:
    openai_server.responder = lambda body: "yes"
    judge = judge_for(openai_server, cache=False)
    asyncio.run(judge.score(TASK, EPISODE))
    asyncio.run(judge.score(TASK, EPISODE))
    assert len(openai_server.requests) == 2


def test_unparseable_judgements_are_left_out_and_recorded(openai_server: ScriptedOpenAIServer) -> None:
    answers = iter(["<verdict>yes</verdict>", "I would rather not say.", "Hmm, hard to tell from this."])
    openai_server.responder = lambda body: next(answers)
    reward = asyncio.run(judge_for(openai_server, k=3).score(TASK, EPISODE))

    assert (reward.score, reward.success) == (1.0, True)
    assert reward.details["parsed"] == 1 and reward.details["failed"] == 2
    assert reward.details["errors"] == ["unparseable verdict", "unparseable verdict"]
    assert "2 unusable" in reward.reason


def test_no_parseable_verdict_scores_zero_and_is_not_cached(openai_server: ScriptedOpenAIServer) -> None:
    openai_server.responder = lambda body: "The transcript is interesting."
    judge = judge_for(openai_server, k=2)

    reward = asyncio.run(judge.score(TASK, EPISODE))
    assert (reward.score, reward.success) == (0.0, False)
    assert "no verdict could be parsed" in reward.reason
    assert reward.details["raw"] == ["The transcript is interesting."] * 2
    assert judge.stats["unparseable"] == 2

    openai_server.responder = lambda body: "<verdict>yes</verdict>"
    assert asyncio.run(judge.score(TASK, EPISODE)).score == 1.0  # judged again, not a cached 0


def test_llm_failures_retry_and_raise_when_every_judgement_fails(openai_server: ScriptedOpenAIServer) -> None:
    llm = LLMConfig(model="grader", base_url=openai_server.base_url, timeout=2.0, max_llm_retries=1,
                    backoff_base=0.001)
    openai_server.push(Reply.fault(503), "<verdict>yes</verdict>")
    judge = LLMJudge(LLMJudgeConfig(llm=llm))
    assert asyncio.run(judge.score(TASK, EPISODE)).score == 1.0  # retried through the client

    openai_server.push(Reply.fault(503), Reply.fault(503))
    with pytest.raises(LLMError, match="all 1 judgement"):
        asyncio.run(judge.score(TASK, Trajectory(task=TASK)))


def test_a_custom_prompt_template(openai_server: ScriptedOpenAIServer) -> None:
    openai_server.push("yes")
    template = "Q: {query}\nGold: {reference}\nEpisode:\n{transcript}\n{instructions} Literal {{braces}}."
    asyncio.run(judge_for(openai_server, prompt=template).score(TASK, EPISODE))

    prompt = openai_server.requests[0]["messages"][-1]["content"]
    assert prompt.startswith("Q: Walk to the square")
    assert prompt.endswith("Literal {braces}.")


@pytest.mark.beyondagent_plugins("llm")
def test_registered_and_built_from_a_spec_block(registry: Registry, openai_server: ScriptedOpenAIServer) -> None:
    registration = registry.resolve("reward", "llm_judge", key_path="reward")
    config = structured(registration.spec.config_cls,
                        {"llm": {"model": "grader", "base_url": openai_server.base_url}, "mode": "score", "k": 2},
                        "reward", "spec.yaml")
    judge = registration.spec.load_factory()(config)
    openai_server.push("Score: 1", "Score: 0.5")

    assert asyncio.run(judge.score(TASK, EPISODE)).score == pytest.approx(0.75)
    with pytest.raises(ValueError, match="unknown placeholder"):
        LLMJudgeConfig(prompt="{transcript} {answer}")
