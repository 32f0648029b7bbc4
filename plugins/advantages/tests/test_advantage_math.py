"""Each estimator against small cases computed by hand (see the comments), and GRPO against torch's.

The torch backend's `grpo.group_advantages` is checked against verl's `compute_grpo_outcome_advantage`
to 1e-6 (plugins/torch/tests/test_grpo_parity.py); the numpy `grpo` estimator is checked against it
here on random batches, so it inherits that parity.
"""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from beyondagent_core.advantages import AdvantageBatch, ScoredEpisode, Step, check_advantages, steps_of
from beyondagent_core.types import Task, Turn
from beyondagent_plugin_advantages.adca import alpha_at, parse_labels, suffix_sums, trajectory_weighted_z
from beyondagent_plugin_advantages.config import AdcaConfig, GigpoConfig, GrpoConfig
from beyondagent_plugin_advantages.gigpo import Gigpo, discounted_returns
from beyondagent_plugin_advantages.grpo import Grpo

R2 = 1 / math.sqrt(2)


def scored(group: str, outcome: float, observations: list[str], *, turn: int = 2, rewards=None) -> ScoredEpisode:
    """Prompt of 3 tokens, then per step `turn` model tokens and 1 context token."""
    steps, position = [], 3
    for index, observation in enumerate(observations):
        reward = None if rewards is None else rewards[index]
        steps.append(Step(start=position, end=position + turn, observation=observation, action=f"a{index}",
                          reward=reward))
        position += turn + 1
    return ScoredEpisode(group=group, task=Task(task_id=group), outcome=outcome, success=outcome > 0,
                         length=position, steps=tuple(steps))


def step_values(values: np.ndarray, episode: ScoredEpisode) -> list[float]:
    """The advantage on each step's tokens (asserting it is the same on all of them)."""
    found = []
    for step in episode.steps:
        span = values[step.start:step.end]
        assert np.all(span == span[0])
        found.append(float(span[0]))
    return found


# --- grpo ---------------------------------------------------------------------------------------


def test_grpo_broadcasts_the_group_z_score_over_model_tokens() -> None:
    batch = AdvantageBatch(episodes=(scored("g", 1.0, ["x", "y"]), scored("g", 0.0, ["x"])))
    result = check_advantages(Grpo().estimate(batch), batch, who="grpo")
    first, second = result.per_token
    # outcomes [1, 0]: mean 0.5, std sqrt(0.5) -> +-0.5 / sqrt(0.5) = +-1/sqrt(2), the same on every step
    assert step_values(first, batch.episodes[0]) == pytest.approx([R2, R2], rel=1e-5)
    assert step_values(second, batch.episodes[1]) == pytest.approx([-R2], rel=1e-5)
    assert first[:3].tolist() == [0, 0, 0] and first[5] == 0  # prompt and the context between turns


def test_grpo_without_std_and_a_group_of_one() -> None:
    batch = AdvantageBatch(episodes=(scored("g", 1.0, ["x"]), scored("g", 0.0, ["x"]), scored("h", 0.7, ["x"])),
                           norm_by_std=False)
    values = [step_values(v, e)[0] for v, e in zip(Grpo().estimate(batch).per_token, batch.episodes)]
    assert values == pytest.approx([0.5, -0.5, 0.7])  # a group of one keeps its raw score (verl)
    override = Grpo(GrpoConfig(norm_by_std=True)).estimate(batch).per_token
    assert step_values(override[0], batch.episodes[0])[0] == pytest.approx(R2, rel=1e-5)


def test_grpo_equals_the_torch_backend_math_on_random_batches() -> None:
    torch = pytest.importorskip("torch")
    from beyondagent_plugin_torch import grpo as torch_grpo

    rng = random.Random(0)
    for trial in range(20):
        size = rng.randrange(1, 24)
        groups = [rng.choice("abcdef") for _ in range(size)]
        outcomes = [rng.choice([0.0, 1.0, rng.uniform(-2, 2)]) for _ in range(size)]
        for norm in (True, False):
            batch = AdvantageBatch(episodes=tuple(scored(g, o, ["s"]) for g, o in zip(groups, outcomes)),
                                   norm_by_std=norm)
            ours = [step_values(v, e)[0] for v, e in zip(Grpo().estimate(batch).per_token, batch.episodes)]
            reference = torch_grpo.group_advantages(torch.tensor(outcomes), groups, norm_by_std=norm)
            np.testing.assert_allclose(ours, reference.numpy(), rtol=1e-5, atol=1e-6, err_msg=f"trial {trial}")


# --- gigpo --------------------------------------------------------------------------------------


def test_discounted_returns_put_the_outcome_on_the_last_step() -> None:
    assert discounted_returns(scored("g", 1.0, ["a", "b", "c"]), 0.5).tolist() == [0.25, 0.5, 1.0]
    with_steps = scored("g", 1.0, ["a", "b"], rewards=[0.2, None])
    assert discounted_returns(with_steps, 0.5).tolist() == pytest.approx([0.2 + 0.5, 1.0])


def test_gigpo_adds_step_advantages_of_anchor_state_groups() -> None:
    # Two rollouts of one task start in state A. The first moves to B and succeeds (outcome 1), the
    # second moves to C and fails. gamma 0.5: returns [0.5, 1] and [0, 0].
    # episode level: +-0.5 / std([1, 0]) = +-1/sqrt(2).
    # step level: state A holds both first steps, returns 0.5 and 0 -> +-0.25 / std([0.5, 0]) = +-1/sqrt(2);
    # B and C are seen once: B keeps its raw return 1 (verl's convention for a group of one), C its 0.
    win, loss = scored("g", 1.0, ["A", "B"]), scored("g", 0.0, ["A", "C"])
    batch = AdvantageBatch(episodes=(win, loss))
    result = check_advantages(Gigpo(GigpoConfig(gamma=0.5)).estimate(batch), batch, who="gigpo")
    assert step_values(result.per_token[0], win) == pytest.approx([2 * R2, R2 + 1], rel=1e-5)
    assert step_values(result.per_token[1], loss) == pytest.approx([-2 * R2, -R2], rel=1e-5)
    assert result.metrics["anchor_groups"] == 1 and result.metrics["steps_in_anchor_groups"] == 0.5
    zero = Gigpo(GigpoConfig(gamma=0.5, singleton="zero")).estimate(batch).per_token
    assert step_values(zero[0], win) == pytest.approx([2 * R2, R2], rel=1e-5)
    # The step-level part alone, one value per step, for the viewer: A's group +-1/sqrt(2); B 1, C 0.
    assert result.per_step[0].tolist() == pytest.approx([R2, 1.0], rel=1e-5)
    assert result.per_step[1].tolist() == pytest.approx([-R2, 0.0], abs=1e-5)


def test_step_values_must_match_the_steps() -> None:
    import numpy as np

    from beyondagent_core.advantages import AdvantageError, Advantages

    win = scored("g", 1.0, ["A", "B"])
    batch = AdvantageBatch(episodes=(win,))
    good = Advantages(per_token=[np.zeros(win.length, np.float32)], per_step=[np.array([0.5, -0.5])])
    assert check_advantages(good, batch, who="t") is good
    assert check_advantages(Advantages(per_token=good.per_token, per_step=[None]), batch, who="t")
    for wrong in ([np.array([0.5])], [np.array([0.5, np.nan])], []):
        with pytest.raises(AdvantageError, match="step values"):
            check_advantages(Advantages(per_token=good.per_token, per_step=wrong), batch, who="t")


def test_gigpo_anchors_ignore_whitespace_but_not_other_groups() -> None:
    # The same state text in another task's group is a different anchor group.
    a1, a2 = scored("g", 1.0, ["S  \n one"]), scored("g", 0.0, ["S one"])
    other = scored("h", 1.0, ["S one"])
    result = Gigpo(GigpoConfig(gamma=1.0, mode="mean_norm", step_weight=0.5)).estimate(
        AdvantageBatch(episodes=(a1, a2, other)))
    # episode level (mean_norm): +0.5 / -0.5, and 1.0 for the group of one; step level the same
    # centred returns (+-0.5) times 0.5, and the lone state keeps its raw return 1 * 0.5.
    assert step_values(result.per_token[0], a1) == pytest.approx([0.75])
    assert step_values(result.per_token[1], a2) == pytest.approx([-0.75])
    assert step_values(result.per_token[2], other) == pytest.approx([1.5])


# --- adca ---------------------------------------------------------------------------------------


def test_trajectory_weighted_z_weighs_each_trajectory_once() -> None:
    # prm [0.2, -0.2] and [-0.2]: weights 1/2, 1/2 and 1 -> mean -0.1, variance 0.03.
    z = trajectory_weighted_z([np.array([0.2, -0.2]), np.array([-0.2])], eps=0.0)
    std = math.sqrt(0.03)
    np.testing.assert_allclose(z[0], [0.3 / std, -0.1 / std])
    np.testing.assert_allclose(z[1], [-0.1 / std])


def test_suffix_sums_and_cosine_decay() -> None:
    assert suffix_sums(np.array([1.0, 2.0, 3.0])).tolist() == [6.0, 5.0, 3.0]
    config = AdcaConfig(alpha=2.0, prm_steps=10)
    assert [alpha_at(config, s) for s in (1, 6, 11, 30)] == pytest.approx([2.0, 1.0, 0.0, 0.0], abs=1e-12)
    assert alpha_at(AdcaConfig(alpha=2.0, decay="none"), 7) == 2.0


def test_labels_are_parsed_leniently_and_must_cover_every_step() -> None:
    answer = "<think>Step 1: BAD?</think> The first move helps.\n**Step 1:** GOOD\nStep 2 - bad\nstep 3: Good"
    assert parse_labels(answer, 3) == [True, False, True]
    assert parse_labels("Step 1: GOOD\nStep 3: BAD", 3) is None
    assert parse_labels("Step 1: BAD\nStep 1: GOOD", 1) == [True]  # the last word wins


def test_steps_pair_model_turns_with_their_spans_and_observations() -> None:
    turns = [Turn("system", "rules"), Turn("user", "board 1"), Turn("assistant", "left", token_ids=[1, 2]),
             Turn("user", "board 2"), Turn("assistant", "down", token_ids=[3])]
    steps = steps_of(turns, [(10, 12), (15, 16)])
    assert [(s.start, s.end, s.observation, s.action) for s in steps] == [
        (10, 12, "rules\n\nboard 1", "left"), (15, 16, "board 2", "down")]
