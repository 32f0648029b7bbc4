"""ADCA-GRPO end to end against a judge on loopback.

The step judge is `ScriptedOpenAIServer` (an OpenAI-compatible server on 127.0.0.1, standing in
for a hosted LLM; the real `openai` client talks HTTP to it). It labels a step GOOD when the
action's text contains "good". Checked: the prompt's shape, the hand-computed advantages, the
decay and the switch to GRPO after `prm_steps`, the cache, concurrency, and the fall-back to GRPO
of a group whose trajectory could not be judged (counted, never silent).
"""

from __future__ import annotations

import math
import re
from typing import Any

import numpy as np
import pytest

from beyondagent_core.advantages import AdvantageBatch, ScoredEpisode, Step, check_advantages
from beyondagent_core.llm import LLMConfig
from beyondagent_core.testing.openai_server import Reply
from beyondagent_core.types import Task
from beyondagent_plugin_advantages.adca import Adca
from beyondagent_plugin_advantages.config import AdcaConfig


def label_by_action(body: dict[str, Any]) -> str:
    prompt = body["messages"][-1]["content"]
    actions = re.findall(r"^Step (\d+)\nACTION: (.*)$", prompt, flags=re.MULTILINE)
    return "Reasoning...\n" + "\n".join(f"Step {n}: {'GOOD' if 'good' in action else 'BAD'}" for n, action in actions)


def episode(group: str, outcome: float, actions: list[str]) -> ScoredEpisode:
    steps, position = [], 4
    for index, action in enumerate(actions):
        steps.append(Step(start=position, end=position + 2, observation=f"{group} state {index}", action=action))
        position += 3
    return ScoredEpisode(group=group, task=Task(task_id=group, query=f"reach the goal of {group}"), outcome=outcome,
                         success=outcome > 0, length=position, steps=tuple(steps))


def adca(server: Any, **settings: Any) -> Adca:
    llm = LLMConfig(model="judge", base_url=server.base_url, timeout=5.0, max_llm_retries=1, backoff_base=0.01)
    return Adca(AdcaConfig(llm=llm, **settings))


def values_per_step(values: np.ndarray, scored: ScoredEpisode) -> list[float]:
    return [float(values[step.start]) for step in scored.steps]


def test_advantages_follow_the_judges_labels(openai_server: Any) -> None:
    openai_server.responder = label_by_action
    win, loss = episode("g", 1.0, ["good move", "bad move"]), episode("g", 0.0, ["bad idea"])
    batch = AdvantageBatch(episodes=(win, loss), step=1)
    result = check_advantages(adca(openai_server, decay="none").estimate(batch), batch, who="adca")
    # prm [0.2, -0.2] and [-0.2], each trajectory weighted once: mean -0.1, std sqrt(0.03);
    # outcomes +-1/sqrt(2); r = z(prm) (+ outcome z on the last step); advantages are suffix sums.
    std, out = math.sqrt(0.03), 1 / math.sqrt(2)
    r_win = [0.3 / std, -0.1 / std + out]
    assert values_per_step(result.per_token[0], win) == pytest.approx([r_win[0] + r_win[1], r_win[1]], rel=1e-4)
    assert values_per_step(result.per_token[1], loss) == pytest.approx([-0.1 / std - out], rel=1e-4)
    assert result.per_step[0].tolist() == pytest.approx(r_win, rel=1e-4)  # r_k, shown by the viewer
    assert result.metrics["active"] == 1 and result.metrics["good_step_share"] == pytest.approx(1 / 3)
    assert result.metrics["judged"] == 2 and result.metrics["fallback_groups"] == 0

    prompt = openai_server.requests[0]["messages"][-1]["content"]
    assert "reach the goal of g" in prompt and ("SUCCESS" in prompt or "FAILURE" in prompt)
    assert "Step 1\nACTION:" in prompt and "OBSERVATION:" in prompt


def test_alpha_decays_and_grpo_takes_over_after_prm_steps(openai_server: Any) -> None:
    openai_server.responder = label_by_action
    win, loss = episode("g", 1.0, ["good", "good"]), episode("g", 0.0, ["bad", "bad"])
    estimator = adca(openai_server, prm_steps=4, scale="inv_sqrt_k")
    early = estimator.estimate(AdvantageBatch(episodes=(win, loss), step=1))
    middle = estimator.estimate(AdvantageBatch(episodes=(win, loss), step=3))
    assert early.metrics["alpha"] == pytest.approx(1.0) and middle.metrics["alpha"] == pytest.approx(0.5)
    # the first step's advantage is (alpha / sqrt(2)) * (z1 + z2) + outcome z; z = +1 for the GOOD steps
    first = [values_per_step(r.per_token[0], win)[0] for r in (early, middle)]
    out = 1 / math.sqrt(2)
    assert first == pytest.approx([2 / math.sqrt(2) + out, 1 / math.sqrt(2) + out], rel=1e-4)
    last = estimator.estimate(AdvantageBatch(episodes=(win, loss), step=4))  # prm_steps itself: still judged
    assert last.metrics["active"] == 1 and last.metrics["alpha"] > 0
    requests = len(openai_server.requests)
    late = estimator.estimate(AdvantageBatch(episodes=(win, loss), step=5))
    assert late.metrics["active"] == 0 and len(openai_server.requests) == requests  # no judge past prm_steps
    assert values_per_step(late.per_token[0], win) == pytest.approx([out, out], rel=1e-4)  # GRPO


def test_a_trajectory_is_judged_once_and_requests_run_concurrently(openai_server: Any) -> None:
    openai_server.responder = lambda body: Reply(text=label_by_action(body), delay=0.3)
    episodes = tuple(episode(f"t{i % 4}", float(i % 2), [f"good {i}", "bad"]) for i in range(8))
    estimator = adca(openai_server, concurrency=4)
    first = estimator.estimate(AdvantageBatch(episodes=episodes))
    assert first.metrics["judged"] == 8 and openai_server.max_in_flight >= 2
    again = estimator.estimate(AdvantageBatch(episodes=episodes))
    assert again.metrics["cache_hits"] == 8 and len(openai_server.requests) == 8
    for a, b in zip(first.per_token, again.per_token):
        np.testing.assert_array_equal(a, b)


def test_a_group_that_cannot_be_judged_falls_back_to_grpo(openai_server: Any) -> None:
    def answer(body: dict[str, Any]) -> Reply | str:
        if "group broken" in body["messages"][-1]["content"]:
            return "I would rather not say."  # no labels, twice: the judgement fails
        return label_by_action(body)

    openai_server.responder = answer
    ok = (episode("fine", 1.0, ["good"]), episode("fine", 0.0, ["bad"]))
    broken = (ScoredEpisode(group="broken", task=Task(task_id="b", query="group broken"), outcome=1.0, success=True,
                            length=6, steps=(Step(4, 6, "s", "good"),)),
              ScoredEpisode(group="broken", task=Task(task_id="b", query="group broken"), outcome=0.0, success=False,
                            length=6, steps=(Step(4, 6, "s", "other"),)))
    batch = AdvantageBatch(episodes=ok + broken)
    result = adca(openai_server, attempts=2).estimate(batch)
    assert result.metrics["fallback_groups"] == 1 and result.metrics["judge_failures"] == 2
    grpo = 1 / math.sqrt(2)
    assert values_per_step(result.per_token[2], broken[0]) == pytest.approx([grpo], rel=1e-4)
    assert values_per_step(result.per_token[3], broken[1]) == pytest.approx([-grpo], rel=1e-4)
    assert values_per_step(result.per_token[0], ok[0])[0] > grpo  # the judged group got its step reward


def test_an_unreachable_judge_falls_back_for_every_group(openai_server: Any) -> None:
    openai_server.responder = lambda body: Reply.fault(500)
    batch = AdvantageBatch(episodes=(episode("g", 1.0, ["good"]), episode("g", 0.0, ["bad"])))
    result = adca(openai_server).estimate(batch)
    assert result.metrics["fallback_groups"] == 1 and result.metrics["judge_failures"] == 2


def test_without_any_llm_the_error_says_what_to_set() -> None:
    from beyondagent_core.errors import RunError

    with pytest.raises(RunError, match="no LLM to judge steps") as caught:
        Adca(AdcaConfig()).estimate(AdvantageBatch(episodes=(episode("g", 1.0, ["x"]),)))
    assert "backend.advantage.llm" in str(caught.value.hint)
