"""`llm_judge`, class-wide: every reply form the verdict parser reads and the nearest it refuses, what
makes two episodes share a cached verdict, the cache's bound, the prompt's parts, the config's bounds.

The eighth audit's follow-up (mutation testing of the LLM roles): each table row sits on one
branch or limit of `judge.py` (a tag name, the JSON keys' order, `0 <= x <= 1`, the 40-character
short-reply limit, the binary rounding at 0.5), and each cache-key row changes one thing a
verdict depends on. The judge model is `ScriptedOpenAIServer` on loopback (the `openai_server`
fixture), reached through the real `openai` client: it stands in for a hosted LLM, which
cannot be reached here.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import attrs
import pytest
from beyondagent_plugin_llm import judge as judge_module
from beyondagent_plugin_llm.judge import (
    SYSTEM_PROMPT,
    LLMJudge,
    LLMJudgeConfig,
    parse_verdict,
    verdict_value,
)
from test_llm_judge import EPISODE, TASK, judge_for

from beyondagent_core.errors import RunError
from beyondagent_core.llm import LLMConfig, OpenAIChat
from beyondagent_core.testing.openai_server import Reply, ScriptedOpenAIServer, run_context_with_llm
from beyondagent_core.types import Task, Trajectory, Turn

FILLER = "the agent walked on"  # words that are no verdict


@pytest.mark.parametrize(("answer", "expected"), [
    # every tag name, spacing and case inside the tag, a later unreadable tag skipped, mismatched tags
    ("<grade>yes</grade>", 1.0),
    ("<answer>0.3</answer>", 0.3),
    ("<judgement>no</judgement>", 0.0),
    ("<judgment>yes</judgment>", 1.0),
    ("< Verdict >YES< / Verdict >", 1.0),
    ("<verdict>no</verdict> then <answer>unsure</answer>", 0.0),
    ("<verdict>yes</score>", None),
    # JSON: any case of key, `score` before `verdict`, the last object wins, only objects, bounds
    ('{"Score": 0.3}', 0.3),
    ('{"verdict": "yes", "score": 0}', 0.0),
    ('{"score": 1} and later {"score": 0}', 0.0),
    ('{"pass": true}', 1.0),
    ('{"result": "fail"}', 0.0),
    ('{"rating": "8/10"}', 0.8),
    ('{"score": 1.01}', None),
    ('[1]', None),
    ('Here:\n```json\n{"score": 0.2}\n```', 0.2),
    # labels: bold, `=`, `final answer`, the last label wins
    ("**Verdict**: yes", 1.0),
    ("Rating = 0.9", 0.9),
    ("Final answer: no", 0.0),
    ("Result: pass", 1.0),
    ("Verdict: yes\nOn reflection...\nVerdict: no", 0.0),
    ("Verdict: not accomplished", 0.0),
    ("Not accomplished!", 0.0),
    # the finders' order: tags, then JSON, then labels
    ('{"score": 1}\n<verdict>no</verdict>', 0.0),
    ('{"score": 0}\nVerdict: yes', 0.0),
    # thinking in any case is dropped; nothing else left is no verdict
    ("<THINK>yes</THINK>no", 0.0),
    ("<think>yes</think>", None),
])
def test_every_reply_form_and_its_nearest_refusal(answer: str, expected: float | None) -> None:
    value = parse_verdict(answer)
    assert value == (pytest.approx(expected) if expected is not None else None)


@pytest.mark.parametrize(("raw", "expected"), [
    ("1", 1.0), ("0", 0.0), ("1.0001", None), ("-0.1", None), (".5", 0.5),
    ("10/10", 1.0), ("0/10", 0.0), ("11/10", None), ("3/0", None),
    ("100%", 1.0), ("0%", 0.0), ("101%", None),
    ("**Yes**", 1.0), ('"No."', 0.0), ("`pass`", 1.0), ("Pass!", 1.0), ("accomplished", 1.0), ("unsolved", 0.0),
    (True, 1.0), (False, 0.0), (1, 1.0), (0, 0.0), (2, None), (None, None), (["yes"], None),
])
def test_one_verdict_value_at_each_bound(raw: Any, expected: float | None) -> None:
    value = verdict_value(raw)
    assert value == (pytest.approx(expected) if expected is not None else None)


@pytest.mark.parametrize(("answer", "expected"), [
    ("Yes.\n" + "x" * 35, 1.0),                        # the whole reply is 40 characters: read
    ("Yes.\n" + "x" * 36, None),                       # 41: not guessed
    (f"{FILLER}.\n" * 3 + "Yes, " + "x" * 35, 1.0),    # a last line of 40 characters: read
    (f"{FILLER}.\n" * 3 + "Yes, " + "x" * 36, None),   # 41: not guessed
])
def test_a_reply_without_the_format_is_read_only_when_short(answer: str, expected: float | None) -> None:
    assert parse_verdict(answer) == expected


def test_binary_mode_rounds_at_exactly_one_half(openai_server: ScriptedOpenAIServer) -> None:
    openai_server.push("Score: 0.5", "Score: 0.49")
    judge = judge_for(openai_server, k=2)
    reward = asyncio.run(judge.score(TASK, EPISODE))
    assert sorted(reward.details["scores"]) == [0.0, 1.0]
    assert reward.reason == "llm_judge: 1/2 judgement(s) say yes"


def test_score_mode_keeps_the_value_and_says_the_mean(openai_server: ScriptedOpenAIServer) -> None:
    openai_server.push("Score: 0.3")
    reward = asyncio.run(judge_for(openai_server, mode="score").score(TASK, EPISODE))
    assert (reward.score, reward.success) == (pytest.approx(0.3), False)
    assert reward.reason == "llm_judge: mean score 0.300 over 1 judgement(s)"
    assert (reward.details["mode"], reward.details["k"]) == ("score", 1)


def test_a_failed_request_and_an_unreadable_reply_are_told_apart(openai_server: ScriptedOpenAIServer) -> None:
    judge = judge_for(openai_server, k=2)  # max_llm_retries 0: a 400 fails the judgement at once
    openai_server.push(Reply.fault(400), "I cannot tell.")
    reward = asyncio.run(judge.score(TASK, EPISODE))  # not every judgement's request failed: no raise
    assert (reward.score, reward.success, reward.details["parsed"], reward.details["failed"]) == (0.0, False, 0, 2)
    assert sorted(error.split(":")[0] for error in reward.details["errors"]) == ["llm", "unparseable verdict"]
    assert (judge.stats["llm_failures"], judge.stats["unparseable"], judge.stats["judgements"]) == (1, 1, 2)

    openai_server.push(Reply.fault(400), "<verdict>yes</verdict>")
    other = Trajectory(task=TASK, turns=[Turn(role="assistant", content="down")])
    reward = asyncio.run(judge.score(TASK, other))
    assert (reward.score, reward.success) == (1.0, True)
    assert reward.reason == "llm_judge: 1/1 judgement(s) say yes (1 unusable)"
    assert judge.stats["episodes"] == 2 and judge.stats["llm_failures"] == 2


def test_the_end_of_a_long_reply_is_kept(openai_server: ScriptedOpenAIServer) -> None:
    answer = "x" * 500 + " <verdict>yes</verdict>"
    openai_server.push(answer)
    reward = asyncio.run(judge_for(openai_server).score(TASK, EPISODE))
    assert reward.details["raw"] == [answer[-judge_module.RAW_CHARS_KEPT:]]
    assert judge_module.RAW_CHARS_KEPT == 400


def test_without_an_llm_the_judge_says_what_to_set() -> None:
    with pytest.raises(RunError, match="has no LLM to ask") as caught:
        asyncio.run(LLMJudge().score(TASK, EPISODE))
    assert "llm block" in caught.value.hint


# --- the cache key ---------------------------------------------------------------------------

BASE_LLM = LLMConfig(model="grader", base_url="http://127.0.0.1:1/v1")


def key(config: LLMJudgeConfig | None = None, task: Task = TASK, turns: list[Turn] | None = None,
        llm: Any = None) -> str:
    judge = LLMJudge(config or LLMJudgeConfig(llm=BASE_LLM), llm=llm)
    return judge.cache_key(task, Trajectory(task=task, turns=list(EPISODE.turns if turns is None else turns)))


def with_turn(index: int, **change: Any) -> list[Turn]:
    turns = list(EPISODE.turns)
    turns[index] = attrs.evolve(turns[index], **change)
    return turns


@pytest.mark.parametrize("other", [
    pytest.param(lambda: key(task=attrs.evolve(TASK, query="Walk elsewhere.")), id="task query"),
    pytest.param(lambda: key(task=attrs.evolve(TASK, ground_truth=["down"])), id="task reference"),
    pytest.param(lambda: key(task=attrs.evolve(TASK, task_id="t2")), id="task id"),
    pytest.param(lambda: key(turns=with_turn(2, role="user")), id="turn role"),
    pytest.param(lambda: key(turns=with_turn(2, content="left")), id="turn content"),
    pytest.param(lambda: key(turns=with_turn(2, tool_calls=[{"function": {"name": "move"}}])), id="tool calls"),
    pytest.param(lambda: key(turns=EPISODE.turns[:-1]), id="one turn fewer"),
    pytest.param(lambda: key(LLMJudgeConfig(llm=BASE_LLM, mode="score")), id="mode"),
    pytest.param(lambda: key(LLMJudgeConfig(llm=BASE_LLM, k=2)), id="k"),
    pytest.param(lambda: key(LLMJudgeConfig(llm=BASE_LLM, threshold=0.6)), id="threshold"),
    pytest.param(lambda: key(LLMJudgeConfig(llm=BASE_LLM, prompt="{transcript}")), id="prompt"),
    *[pytest.param(lambda field=field, value=value: key(LLMJudgeConfig(llm=attrs.evolve(BASE_LLM, **{field: value}))),
                   id=f"llm {field}")
      for field, value in [("model", "other"), ("base_url", "http://127.0.0.1:2/v1"), ("temperature", 0.5),
                           ("top_p", 0.5), ("top_k", 5), ("max_tokens", 9)]],
    pytest.param(lambda: key(LLMJudgeConfig(), llm=OpenAIChat(attrs.evolve(BASE_LLM, model="other"))),
                 id="the spec's llm model"),
])
def test_whatever_changes_a_verdict_changes_the_cache_key(other) -> None:
    assert other() != key()


def test_the_same_episode_and_settings_make_the_same_key() -> None:
    assert key() == key(LLMJudgeConfig(llm=attrs.evolve(BASE_LLM)))
    assert key(LLMJudgeConfig(), llm=OpenAIChat(BASE_LLM)) == key()  # the spec's llm counts like its own block
    assert key(LLMJudgeConfig(llm=BASE_LLM, cache=False)) == key()  # what cannot change a verdict does not


def test_the_cache_keeps_the_most_recently_used_verdicts(openai_server: ScriptedOpenAIServer,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(judge_module, "CACHE_ENTRIES", 2)
    openai_server.responder = lambda body: "<verdict>yes</verdict>"
    judge = judge_for(openai_server)
    a, b, c = (Trajectory(task=TASK, turns=[Turn(role="assistant", content=move)]) for move in ("a", "b", "c"))

    async def score(*episodes: Trajectory) -> list[bool]:
        return [(await judge.score(TASK, episode)).details["cached"] for episode in episodes]

    assert asyncio.run(score(a, b, a)) == [False, False, True]  # two entries fit; `a` is now the newest
    assert asyncio.run(score(c, a, b)) == [False, True, False]  # `c` pushed out `b`, the least recently used
    assert len(openai_server.requests) == 4


# --- the prompt ------------------------------------------------------------------------------


def test_the_prompt_says_what_is_missing_and_shows_tool_calls() -> None:
    bare = Task(task_id="t", query=None, ground_truth=None)
    [system, user] = LLMJudge(LLMJudgeConfig(mode="score")).messages(bare, Trajectory(task=bare))
    assert system == {"role": "system", "content": SYSTEM_PROMPT}
    assert "# Task\n(the environment's own task, as shown in the episode)\n" in user["content"]
    assert "# Reference solution\n(none given: judge from the task alone)\n" in user["content"]
    assert "# The agent's episode\n(the episode has no turns)\n" in user["content"]
    assert user["content"].endswith("<score>S</score>, where S is a number from 0 (nothing) to 1 (fully accomplished).")
    empty = Task(task_id="t", query="")
    assert "# Task\n(the environment's own task" in LLMJudge().messages(empty, Trajectory(task=empty))[1]["content"]

    task = Task(task_id="t", query="Move left.", ground_truth="x = 2")
    turns = [Turn(role="user", content="Start."),
             Turn(role="assistant", content="", tool_calls=[{"function": {"name": "move", "arguments": "left"}}])]
    [_, user] = LLMJudge().messages(task, Trajectory(task=task, turns=turns))
    assert "# Reference solution\nx = 2\n" in user["content"]  # a text reference as it is, not as JSON
    assert ('[user]\nStart.\n\n[assistant]\n\n(tool calls) [{"function": {"name": "move", "arguments": "left"}}]'
            in user["content"])


@pytest.mark.parametrize(("options", "problem"), [
    ({"k": 0}, "k"), ({"k": 1001}, "k"), ({"threshold": -0.01}, "threshold"), ({"threshold": 1.01}, "threshold"),
    ({"mode": "Binary"}, "mode must be one of binary, score"),
    ({"prompt": "{query} only"}, "must contain {transcript}"),
    ({"prompt": "{transcript} {"}, "not a valid template"),
])
def test_a_setting_past_its_bound_is_refused(options: dict[str, Any], problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        LLMJudgeConfig(**options)


def test_a_setting_on_its_bound_is_accepted() -> None:
    for options in ({"k": 1}, {"k": 1000}, {"threshold": 0.0}, {"threshold": 1.0}, {"mode": "score"},
                    {"prompt": "{query} {reference} {transcript} {instructions}"}):
        LLMJudgeConfig(**options)
    assert attrs.asdict(LLMJudgeConfig()) == {"llm": None, "mode": "binary", "k": 1, "threshold": 0.5,
                                              "cache": True, "prompt": None}


# --- which LLM a judge built from a spec asks ----------------------------------------------


def spec_context(tmp_path: Path, plugin_manager: Any, server: ScriptedOpenAIServer, reward: dict[str, Any]) -> Any:
    """A real run context (as `beyondagent run` makes) whose spec's `llm` is `server`'s `spec-model`."""
    return run_context_with_llm(tmp_path, plugin_manager, server, reward, name="judge-llm")


@pytest.mark.beyondagent_plugins("llm", "mixers")
def test_its_own_llm_block_wins_over_the_specs_llm(tmp_path: Path, plugin_manager: Any,
                                                   openai_server: ScriptedOpenAIServer) -> None:
    own = {"model": "own-judge", "base_url": openai_server.base_url, "max_llm_retries": 0}
    openai_server.responder = lambda body: "<verdict>yes</verdict>"
    for reward in ({"name": "llm_judge", "llm": own}, {"name": "llm_judge"}):
        judge = spec_context(tmp_path, plugin_manager, openai_server, reward).build("reward")
        asyncio.run(judge.score(TASK, EPISODE))
    assert [request["model"] for request in openai_server.requests] == ["own-judge", "spec-model"]
