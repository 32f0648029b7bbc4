"""Each estimator against small cases computed by hand (see the comments), and GRPO against torch's.

The torch backend's `grpo.group_advantages` is checked against verl's `compute_grpo_outcome_advantage`
to 1e-6 (plugins/torch/tests/test_grpo_parity.py); the numpy `grpo` estimator is checked against it
here on random batches, so it inherits that parity. `grpo`, `dr_grpo`, `rloo` and the two REINFORCE++
estimators are also checked against verl directly (test_estimator_verl_parity.py).
"""

from __future__ import annotations

import math
import random

import attrs
import numpy as np
import pytest

from beyondagent_core.advantages import (
    AdvantageBatch,
    ScoredEpisode,
    Step,
    check_advantages,
    estimate_finished,
    steps_of,
)
from beyondagent_core.types import Task, Turn
from beyondagent_plugin_advantages.adca import alpha_at, parse_labels, suffix_sums, trajectory_weighted_z
from beyondagent_plugin_advantages.config import AdcaConfig, GigpoConfig, GrpoConfig
from beyondagent_plugin_advantages.config import ReinforcePlusPlusConfig
from beyondagent_plugin_advantages.gigpo import Gigpo, discounted_returns
from beyondagent_plugin_advantages.grpo import DrGrpo, Grpo
from beyondagent_plugin_advantages.reinforce import ReinforcePlusPlus, ReinforcePlusPlusBaseline, token_returns
from beyondagent_plugin_advantages.rloo import Rloo

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


@pytest.mark.parametrize("estimator", [Grpo(), DrGrpo(), Rloo()], ids=["grpo", "dr_grpo", "rloo"])
def test_a_crashed_episode_leaves_a_group_that_all_succeeded_flat(estimator) -> None:
    crashed = attrs.evolve(scored("g", 0.0, ["x"]), failure="error")  # reward 0 from the crash, not the policy
    batch = AdvantageBatch(episodes=(scored("g", 1.0, ["x"]), scored("g", 1.0, ["x", "y"]), scored("g", 1.0, ["x"]),
                                     crashed))
    # handed the crash, the group's mean is 0.75: grpo gave the three +0.25 / 0.5 (std) = +0.5 each
    before = [step_values(v, e)[0] for v, e in zip(estimator.estimate(batch).per_token, batch.episodes[:3])]
    assert before == pytest.approx({"Grpo": [0.5] * 3, "DrGrpo": [0.25] * 3, "Rloo": [1 / 3] * 3}[
        type(estimator).__name__], rel=1e-5)
    result = estimate_finished(estimator, batch, who="estimator")
    assert [v.tolist() for v in result.per_token] == [[0.0] * e.length for e in batch.episodes]
    assert result.metrics["dropped_episodes"] == 1 and result.metrics["dropped_groups"] == 0


def test_grpo_skips_a_group_crashes_leave_with_one_finished_episode() -> None:
    crash = attrs.evolve(scored("g", 0.0, ["x"]), failure="timeout")
    batch = AdvantageBatch(episodes=(scored("g", 1.0, ["x"]), crash, crash,
                                     scored("h", 1.0, ["x"]), scored("h", 0.0, ["x"])))
    # the survivor alone would be a group of one: its raw score, +1, with no baseline at all
    assert step_values(Grpo().estimate(AdvantageBatch(episodes=batch.episodes[:1])).per_token[0],
                       batch.episodes[0]) == pytest.approx([1.0], rel=1e-5)  # 1 / (1 + eps)
    result = estimate_finished(Grpo(), batch, who="grpo")
    got = [step_values(v, e)[0] for v, e in zip(result.per_token, batch.episodes)]
    assert got == pytest.approx([0.0, 0.0, 0.0, R2, -R2], rel=1e-5)
    assert result.metrics["dropped_groups"] == 1 and result.metrics["dropped_timeout"] == 2


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


def first_step_values(estimator, batch: AdvantageBatch) -> list[float]:
    """Each episode's advantage (the value on its first step, asserted equal on every step)."""
    result = check_advantages(estimator.estimate(batch), batch, who=type(estimator).__name__)
    values = []
    for per_token, episode in zip(result.per_token, batch.episodes):
        found = step_values(per_token, episode)
        assert found == [found[0]] * len(found)
        values.append(found[0])
    return values


# Groups shared by the outcome-only estimators below: "g" has a tie (two failures beside a success),
# "h" is a group of one, "k" scored the same on every rollout.
TIED = (scored("g", 1.0, ["x"]), scored("g", 0.0, ["x", "y"]), scored("g", 0.0, ["x"]),
        scored("h", 0.7, ["x"]), scored("k", 0.5, ["x"]), scored("k", 0.5, ["x", "y"]))


# --- dr_grpo ------------------------------------------------------------------------------------


def test_dr_grpo_centres_without_the_std_whatever_the_spec_says() -> None:
    # g: mean 1/3 -> 2/3, -1/3, -1/3; h (a group of one) keeps its raw 0.7 (verl); k: 0.
    batch = AdvantageBatch(episodes=TIED, norm_by_std=True)  # algorithm.norm_adv_by_std is not read
    assert first_step_values(DrGrpo(), batch) == pytest.approx([2 / 3, -1 / 3, -1 / 3, 0.7, 0.0, 0.0])
    assert first_step_values(DrGrpo(), batch) == first_step_values(Grpo(GrpoConfig(norm_by_std=False)), batch)


# --- rloo ---------------------------------------------------------------------------------------


def test_rloo_compares_each_episode_with_the_rest_of_its_group() -> None:
    # g: 1 - mean(0, 0) = 1; 0 - mean(1, 0) = -0.5 for each tied failure (= 3/2 (r - 1/3));
    # h: a group of one keeps its raw 0.7 (verl); k: 0.5 - 0.5 = 0.
    batch = AdvantageBatch(episodes=TIED)
    assert first_step_values(Rloo(), batch) == pytest.approx([1.0, -0.5, -0.5, 0.7, 0.0, 0.0])
    pair = AdvantageBatch(episodes=(scored("p", 1.0, ["x"]), scored("p", 0.0, ["x"])))
    assert first_step_values(Rloo(), pair) == pytest.approx([1.0, -1.0])  # n/(n-1) = 2: twice GRPO's centring


# --- reinforce_plus_plus ------------------------------------------------------------------------


def test_returns_discount_per_model_token_and_skip_the_context() -> None:
    # Prompt tokens 0-2, step 1 on tokens 3-4, context 5, step 2 on 6-7, context 8. The outcome 1 sits on
    # token 7; gamma 0.5 per model token before it (the context token between turns does not count).
    episode = scored("g", 1.0, ["a", "b"])
    assert token_returns(episode, 0.5).tolist() == [0, 0, 0, 0.125, 0.25, 0, 0.5, 1.0, 0]
    assert token_returns(episode, 1.0).tolist() == [0, 0, 0, 1, 1, 0, 1, 1, 0]


def test_reinforce_plus_plus_whitens_returns_over_the_batch_tokens() -> None:
    # gamma 1: a success on 2 model tokens (returns 1, 1) and a failure on 4 (0, 0, 0, 0), in different
    # groups (REINFORCE++ has no groups). 6 tokens: mean 1/3; squares 2 (2/3)^2 + 4 (1/3)^2 = 4/3;
    # unbiased variance 4/15 -> std 2/sqrt(15): +2/3 -> sqrt(15)/3, -1/3 -> -sqrt(15)/6 on every token.
    batch = AdvantageBatch(episodes=(scored("g", 1.0, ["x"]), scored("h", 0.0, ["x", "y"])))
    assert first_step_values(ReinforcePlusPlus(), batch) == pytest.approx([math.sqrt(15) / 3, -math.sqrt(15) / 6],
                                                                          rel=1e-6)
    # gamma 0.5 on one episode alone: returns 0.125, 0.25, 0.5, 1 (mean 0.46875) -> whitened per token
    alone = AdvantageBatch(episodes=(scored("g", 1.0, ["a", "b"]),))
    values = check_advantages(ReinforcePlusPlus(ReinforcePlusPlusConfig(gamma=0.5)).estimate(alone), alone, who="rpp")
    returns = np.array([0.125, 0.25, 0.5, 1.0])
    expected = (returns - returns.mean()) / returns.std(ddof=1)
    np.testing.assert_allclose(values.per_token[0][[3, 4, 6, 7]], expected, rtol=1e-6)
    assert values.per_token[0][[0, 1, 2, 5, 8]].tolist() == [0] * 5


def test_reinforce_plus_plus_equal_returns_and_tiny_batches_get_nothing() -> None:
    # every episode scored the same: every token's return equal, so nothing is left after centring
    # (verl's masked mean divides by N + 1e-8: about 1e-4 r / N remains, here 0.7e-4 / 6)
    same = AdvantageBatch(episodes=(scored("g", 0.7, ["x"]), scored("g", 0.7, ["x", "y"])))
    for value in first_step_values(ReinforcePlusPlus(), same):
        assert abs(value) < 1e-4 * 0.7 / 6 * 1.01
    # a group of one is an ordinary batch row; one episode with one step of equal returns gets 0 too
    assert first_step_values(ReinforcePlusPlus(), AdvantageBatch(episodes=(scored("h", 1.0, ["x"]),))) == \
        pytest.approx([0.0], abs=1e-4)
    # one model token in the whole batch has no variance (verl raises there): 0
    lone = AdvantageBatch(episodes=(scored("h", 1.0, ["x"], turn=1),))
    assert Rloo().estimate(lone).per_token[0].tolist() == [0, 0, 0, 1.0, 0]
    assert ReinforcePlusPlus().estimate(lone).per_token[0].tolist() == [0] * 5


# --- reinforce_plus_plus_baseline ---------------------------------------------------------------


def test_reinforce_plus_plus_baseline_centres_in_groups_then_whitens_the_batch() -> None:
    # g: a success on 2 tokens and a failure on 4 -> +0.5, -0.5; h (a group of one) keeps 0.5; k (two
    # rollouts scoring 1) gets 0. Tokens: 2 x 0.5, 4 x -0.5, 2 x 0.5, 4 x 0 -> mean 0; squares 8 x 0.25 = 2;
    # variance 2/11: +-0.5 / sqrt(2/11) = +-sqrt(11/8), and k stays 0.
    batch = AdvantageBatch(episodes=(scored("g", 1.0, ["x"]), scored("g", 0.0, ["x", "y"]), scored("h", 0.5, ["x"]),
                                     scored("k", 1.0, ["x"]), scored("k", 1.0, ["x"])))
    r = math.sqrt(11 / 8)
    assert first_step_values(ReinforcePlusPlusBaseline(), batch) == pytest.approx([r, -r, r, 0.0, 0.0], rel=1e-6)
    # Without h the batch's token mean is -0.1 (10 tokens summing to -1), and the flat group k moves with it:
    # values 0.6, -0.4, 0.1 for g's success, g's failure and k; squares 2(0.36) + 4(0.16) + 4(0.01) = 1.4,
    # variance 1.4/9.
    batch = AdvantageBatch(episodes=tuple(e for e in batch.episodes if e.group != "h"))
    std = math.sqrt(1.4 / 9)
    assert first_step_values(ReinforcePlusPlusBaseline(), batch) == pytest.approx(
        [0.6 / std, -0.4 / std, 0.1 / std, 0.1 / std], rel=1e-6)


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
