"""The advantage estimators' settings, class-wide: every key of each config set to a value that cannot act
like its default and checked where it takes effect (hand-computed values), every bound of a config exactly
on its limit and one past, the documented defaults, and the estimators' error and edge branches that the
other files here leave open (a whitening over exactly two tokens, GAE's shape and value-count checks, an
episode with no model token, RAE's role fall-backs and its state refusals, GiGPO's metrics, ADCA's numeric
settings with an in-process judge that answers at once).
"""

from __future__ import annotations

import math
from types import SimpleNamespace
from typing import Any

import attrs
import numpy as np
import pytest

from beyondagent_core.advantages import AdvantageBatch, AdvantageError, ScoredEpisode, Step
from beyondagent_core.checks import MAX_COEF
from beyondagent_core.types import Task
from beyondagent_plugin_advantages.adca import Adca, alpha_at
from beyondagent_plugin_advantages.config import (
    AdcaConfig,
    GaeConfig,
    GigpoConfig,
    GrpoConfig,
    RaeConfig,
    ReinforcePlusPlusConfig,
)
from beyondagent_plugin_advantages.gae import Gae, gae
from beyondagent_plugin_advantages.gigpo import Gigpo
from beyondagent_plugin_advantages.grpo import Grpo
from beyondagent_plugin_advantages.rae import Rae, role_of
from beyondagent_plugin_advantages.reinforce import whiten

pytestmark = pytest.mark.beyondagent_plugins("advantages")

R2 = 1 / math.sqrt(2)


def scored(group: str, outcome: float, observations: list[str], *, task: Task | None = None,
           seat: int | None = None) -> ScoredEpisode:
    """Prompt of 3 tokens, then per step 2 model tokens and 1 context token."""
    steps, position = [], 3
    for index, observation in enumerate(observations):
        steps.append(Step(start=position, end=position + 2, observation=observation, action=f"a{index}"))
        position += 3
    return ScoredEpisode(group=group, task=task or Task(task_id=group), outcome=outcome, success=outcome > 0,
                         length=position, steps=tuple(steps), seat=seat)


def per_step(values: np.ndarray, episode: ScoredEpisode) -> list[float]:
    return [float(values[step.start]) for step in episode.steps]


# --- the documented defaults ------------------------------------------------------------------


def test_the_documented_defaults_of_each_config() -> None:
    assert attrs.asdict(GrpoConfig()) == {"norm_by_std": None, "eps": 1e-6}
    assert attrs.asdict(RaeConfig()) == {"decay": 0.95}  # SPIRAL's 0.95
    assert attrs.asdict(ReinforcePlusPlusConfig()) == {"gamma": 1.0}
    assert attrs.asdict(GaeConfig()) == {"gamma": 1.0, "lam": 1.0}
    assert attrs.asdict(GigpoConfig()) == {"gamma": 0.95, "step_weight": 1.0, "mode": "mean_std_norm",
                                           "singleton": "raw", "eps": 1e-6}
    assert attrs.asdict(AdcaConfig()) == {
        "llm": None, "step_reward": 0.2, "alpha": 1.0, "decay": "cosine", "scale": "none", "prm_steps": 50,
        "max_step_chars": 1000, "concurrency": 8, "attempts": 2, "temperature": 0.0, "max_tokens": 1024,
        "norm_by_std": None, "eps": 1e-6}


# --- every bound on its limit and one past ----------------------------------------------------

# (config, field, a value exactly on the limit (accepted), the nearest value past it (refused))
BOUNDS = [
    (RaeConfig, "decay", 0.0, -1e-9),
    (RaeConfig, "decay", 0.999999, 1.0),  # lt 1: a decay of 1 would never move the baseline
    (ReinforcePlusPlusConfig, "gamma", 0.0, -1e-9),
    (ReinforcePlusPlusConfig, "gamma", 1.0, 1.0 + 1e-9),
    (GaeConfig, "gamma", 1.0, 1.0 + 1e-9),
    (GaeConfig, "gamma", 0.0, -1e-9),
    (GaeConfig, "lam", 1.0, 1.0 + 1e-9),
    (GaeConfig, "lam", 0.0, -1e-9),
    (GigpoConfig, "gamma", 1.0, 1.0 + 1e-9),
    (GigpoConfig, "gamma", 0.0, -1e-9),
    (GigpoConfig, "step_weight", 0.0, -1e-9),
    (GigpoConfig, "step_weight", MAX_COEF, MAX_COEF * (1 + 1e-9)),
    (GigpoConfig, "eps", 1.0, 1.0 + 1e-9),
    (AdcaConfig, "step_reward", 1e-12, 0.0),
    (AdcaConfig, "alpha", 0.0, -1e-9),
    (AdcaConfig, "prm_steps", 0, -1),
    (AdcaConfig, "max_step_chars", 50, 49),
    (AdcaConfig, "concurrency", 1, 0),
    (AdcaConfig, "attempts", 1, 0),
    (AdcaConfig, "temperature", 0.0, -1e-9),
    (AdcaConfig, "max_tokens", 16, 15),
    (GrpoConfig, "eps", 1.0, 1.0 + 1e-9),
]


@pytest.mark.parametrize(("config", "field", "on_limit", "past"), BOUNDS,
                         ids=[f"{c.__name__}.{f}={v}" for c, f, v, _ in BOUNDS])
def test_each_bound_holds_exactly_on_its_limit_and_refuses_one_past(config, field, on_limit, past) -> None:
    assert getattr(config(**{field: on_limit}), field) == on_limit
    with pytest.raises(ValueError, match=field):
        config(**{field: past})


@pytest.mark.parametrize(("config", "field", "good", "bad"), [
    (GigpoConfig, "mode", "mean_norm", "std_norm"), (GigpoConfig, "singleton", "zero", "drop"),
    (AdcaConfig, "decay", "none", "linear"), (AdcaConfig, "scale", "inv_sqrt_k", "sqrt_k")])
def test_each_named_choice_and_its_nearest_refusal(config, field, good, bad) -> None:
    assert getattr(config(**{field: good}), field) == good
    with pytest.raises(ValueError, match=field):
        config(**{field: bad})


# --- grpo -------------------------------------------------------------------------------------


def test_grpo_norm_by_std_false_overrides_a_spec_that_normalizes() -> None:
    # outcomes 1, 0 (mean 0.5, std sqrt(0.5)): the spec says divide (+-1/sqrt 2), the estimator says centre (+-0.5)
    batch = AdvantageBatch(episodes=(scored("g", 1.0, ["x"]), scored("g", 0.0, ["x"])), norm_by_std=True)
    assert [per_step(v, e)[0] for v, e in zip(Grpo().estimate(batch).per_token, batch.episodes)] == \
        pytest.approx([R2, -R2], rel=1e-5)
    centred = Grpo(GrpoConfig(norm_by_std=False)).estimate(batch).per_token
    assert [per_step(v, e)[0] for v, e in zip(centred, batch.episodes)] == pytest.approx([0.5, -0.5])


# --- reinforce++'s whitening ------------------------------------------------------------------


def test_whitening_needs_two_tokens_exactly() -> None:
    # two tokens (on the limit): values 1, 0 -> mean 0.5 (verl's 1e-8 in the count), unbiased variance 0.5
    mean = 1.0 / (2 + 1e-8)
    variance = ((1 - mean) ** 2 + mean ** 2) / (2 + 1e-8) * 2
    got = whiten([np.array([1.0, 0.0])], [np.array([1.0, 1.0])])[0]
    np.testing.assert_allclose(got, [(1 - mean) / math.sqrt(variance + 1e-8), -mean / math.sqrt(variance + 1e-8)],
                               rtol=1e-12)
    assert got[0] == pytest.approx(R2, rel=1e-6)
    # one token (one short): no variance, 0 (verl raises)
    assert whiten([np.array([1.0, 0.0])], [np.array([1.0, 0.0])])[0].tolist() == [0.0, 0.0]


# --- gae --------------------------------------------------------------------------------------


def test_gae_refuses_rows_that_are_not_a_batch() -> None:
    with pytest.raises(ValueError, match="one shape"):  # equal shapes, but one row rather than [episodes, tokens]
        gae(np.zeros(3), np.zeros(3), np.ones(3), gamma=1.0, lam=1.0)
    advantages, returns = gae(np.zeros((1, 3)), np.zeros((1, 3)), np.ones((1, 3)), gamma=1.0, lam=1.0)
    assert advantages.shape == returns.shape == (1, 3)


def gae_episode(task: str, outcome: float, values: np.ndarray | None, *, steps=((1, 3),), length: int = 5
                ) -> ScoredEpisode:
    return ScoredEpisode(group=task, task=Task(task_id=task), outcome=outcome, success=outcome > 0, length=length,
                         steps=tuple(Step(start=a, end=b, observation="", action="") for a, b in steps), values=values)


def test_gae_needs_one_value_per_token_exactly() -> None:
    values = np.zeros(5, dtype=np.float32)
    assert Gae().estimate(AdvantageBatch(episodes=(gae_episode("a", 1.0, values),))).returns is not None
    with pytest.raises(AdvantageError, match="wrong number"):  # one value short
        Gae().estimate(AdvantageBatch(episodes=(gae_episode("a", 1.0, values[:4]),)))
    with pytest.raises(AdvantageError, match="e.g. b"):  # the error names an episode that lacks them
        Gae().estimate(AdvantageBatch(episodes=(gae_episode("a", 1.0, values), gae_episode("b", 1.0, None))))
    empty = Gae().estimate(AdvantageBatch(episodes=()))
    assert empty.per_token == [] and empty.returns == []


def test_gae_without_model_tokens_puts_no_reward_anywhere() -> None:
    # one episode has no step (no model token): its outcome 5 is nowhere; the other's 1 is on its token 2
    values = np.array([0.0, 0.25, 0.5, 0.0, 0.0], dtype=np.float32)
    silent = gae_episode("s", 5.0, values, steps=())
    spoke = gae_episode("p", 1.0, values, steps=((1, 3),))
    result = Gae(GaeConfig(gamma=1.0, lam=1.0)).estimate(AdvantageBatch(episodes=(silent, spoke)))
    assert result.returns[0].tolist() == [0.0] * 5  # no model token: nothing to regress
    # gamma = lam = 1: the returns of the model tokens 1, 2 are the outcome 1 (advantage 1 - V, plus V)
    assert result.returns[1].tolist() == pytest.approx([0.0, 1.0, 1.0, 0.0, 0.0])
    assert result.metrics["returns_mean"] == pytest.approx(1.0) and result.metrics["values_mean"] == pytest.approx(0.375)


# --- rae --------------------------------------------------------------------------------------


def test_rae_decay_zero_is_the_steps_own_mean() -> None:
    rae = Rae(RaeConfig(decay=0.0))
    rae.estimate(AdvantageBatch(episodes=(scored("g", 1.0, ["x"]), scored("g", 1.0, ["x"])), step=1))
    result = rae.estimate(AdvantageBatch(episodes=(scored("g", 1.0, ["x"]), scored("g", 0.0, ["x"])), step=2))
    # the baseline forgets step 1's 1.0 entirely: step 2's mean 0.5
    assert [per_step(v, e)[0] for v, e in zip(result.per_token, (scored("g", 1.0, ["x"]),) * 2)] == [0.5, -0.5]
    assert rae.baselines == {"-/seat-": 0.5}  # no game, no env: the role "-"


def test_rae_default_decay_keeps_095_of_the_baseline() -> None:
    rae = Rae()
    rae.estimate(AdvantageBatch(episodes=(scored("g", 0.0, ["x"]),), step=1))
    rae.estimate(AdvantageBatch(episodes=(scored("g", 1.0, ["x"]),), step=2))
    assert rae.baselines == {"-/seat-": pytest.approx(0.05)}  # 0.95 * 0 + 0.05 * 1


def test_a_role_falls_back_to_the_env_then_to_a_dash() -> None:
    assert role_of(scored("g", 1.0, ["x"], task=Task(task_id="t", env="nim", metadata={"game": 3}), seat=1)) == \
        "nim/seat1"  # a game that is not a name: the env
    assert role_of(scored("g", 1.0, ["x"], task=Task(task_id="t", metadata={"game": ""}), seat=0)) == "-/seat0"
    assert role_of(scored("g", 1.0, ["x"], task=Task(task_id="t", env="chess", metadata={"game": "go"}))) == \
        "go/seat-"


def test_rae_state_round_trips_a_fresh_estimator_and_refuses_a_bad_number() -> None:
    rae = Rae()
    rae.load_state_dict({"baselines": {"a/seat0": "0.5"}, "before": {}, "step": None})
    assert rae.baselines == {"a/seat0": 0.5} and rae.step is None
    rae.load_state_dict({"baselines": {}, "before": {"b/seat1": 1}, "step": "3"})
    assert rae.step == 3 and rae.before == {"b/seat1": 1.0}
    for bad in ({"baselines": {"a": "high"}, "before": {}, "step": 1}, {"baselines": {}, "before": {}},
                {"baselines": {}, "before": None, "step": 1}):
        with pytest.raises(ValueError, match="not its baselines"):
            Rae().load_state_dict(bad)


# --- gigpo ------------------------------------------------------------------------------------


def test_gigpo_step_weight_zero_leaves_the_episode_level_alone() -> None:
    win, loss = scored("g", 1.0, ["A", "B"]), scored("g", 0.0, ["A", "C"])
    batch = AdvantageBatch(episodes=(win, loss))
    result = Gigpo(GigpoConfig(step_weight=0.0)).estimate(batch)
    assert per_step(result.per_token[0], win) == pytest.approx([R2, R2], rel=1e-5)
    assert per_step(result.per_token[1], loss) == pytest.approx([-R2, -R2], rel=1e-5)
    # the step level is still reported for the viewer (gamma 0.95: returns [0.95, 1] and [0, 0])
    assert result.per_step[0].tolist() == pytest.approx([R2, 1.0], rel=1e-5)


def test_gigpo_eps_reaches_both_levels() -> None:
    # eps 1 (the bound): episode level +-0.5 / (sqrt(0.5) + 1); A's step group (returns 0.5, 0; gamma 0.5)
    # +-0.25 / (sqrt(0.125) + 1); B and C alone keep their raw returns, divided by 1 + eps
    win, loss = scored("g", 1.0, ["A", "B"]), scored("g", 0.0, ["A", "C"])
    result = Gigpo(GigpoConfig(gamma=0.5, eps=1.0)).estimate(AdvantageBatch(episodes=(win, loss)))
    episode_level = 0.5 / (math.sqrt(0.5) + 1)
    step_a = 0.25 / (math.sqrt(0.125) + 1)
    assert per_step(result.per_token[0], win) == pytest.approx([episode_level + step_a, episode_level + 1 / 2],
                                                               rel=1e-5)
    assert per_step(result.per_token[1], loss) == pytest.approx([-episode_level - step_a, -episode_level], rel=1e-5)


def test_gigpo_metrics_by_hand() -> None:
    # group g: rollout 1 visits A, B, A (returns to A at step 3); rollout 2 visits A, B. Group h: both
    # rollouts start in A and stop; group k: A once. Anchor groups of size > 1: (g, A) with 3 steps, (g, B)
    # with 2, (h, A) with 2 first steps; k's A is another group's (size 1).
    first, second = scored("g", 1.0, ["A", "B", "A"]), scored("g", 0.0, ["A", "B"])
    h1, h2, other = scored("h", 1.0, ["A"]), scored("h", 0.0, ["A"]), scored("k", 1.0, ["A"])
    metrics = Gigpo().estimate(AdvantageBatch(episodes=(first, second, h1, h2, other))).metrics
    assert metrics == {"anchor_groups": 3.0,
                       "later_anchor_groups": 2.0,  # (g, A) holds a third step, (g, B) second steps; not (h, A)
                       "steps_in_anchor_groups": 7 / 8,
                       "mean_anchor_group_size": pytest.approx((3 * 3 + 2 * 2 + 2 * 2) / 7)}  # per step in a group
    lone = Gigpo().estimate(AdvantageBatch(episodes=(scored("g", 1.0, ["A"]), scored("g", 0.0, ["B"])))).metrics
    assert lone == {"anchor_groups": 0.0, "later_anchor_groups": 0.0, "steps_in_anchor_groups": 0.0,
                    "mean_anchor_group_size": 0.0}


# --- adca's numeric settings, with a judge that answers at once ---------------------------------


class Judge:
    """An in-process ChatLLM: labels step k GOOD when the action of step k is in `good`; records its calls."""

    def __init__(self, good: set[str]) -> None:
        self.good, self.calls = good, []

    async def chat(self, messages: list[dict[str, Any]], **options: Any) -> Any:
        import re

        self.calls.append(options)
        actions = re.findall(r"^Step (\d+)\nACTION: (.*)$", messages[-1]["content"], flags=re.MULTILINE)
        return SimpleNamespace(content="\n".join(f"Step {n}: {'GOOD' if a in self.good else 'BAD'}"
                                                 for n, a in actions))


def adca_batch(step: int = 1) -> tuple[AdvantageBatch, ScoredEpisode, ScoredEpisode]:
    # win: steps a0 (GOOD), a1 (BAD); loss: step a0 (BAD). The judge labels by the action text.
    win = ScoredEpisode(group="g", task=Task(task_id="g"), outcome=1.0, success=True, length=9,
                        steps=(Step(3, 5, "s0", "good"), Step(6, 8, "s1", "bad")))
    loss = ScoredEpisode(group="g", task=Task(task_id="g"), outcome=0.0, success=False, length=6,
                         steps=(Step(3, 5, "s0", "bad"),))
    return AdvantageBatch(episodes=(win, loss), step=step), win, loss


def adca_values(config: AdcaConfig, step: int = 1) -> tuple[list[float], list[float], Judge, dict[str, float]]:
    batch, win, loss = adca_batch(step)
    judge = Judge({"good"})
    result = Adca(config, llm=judge).estimate(batch)
    return per_step(result.per_token[0], win), per_step(result.per_token[1], loss), judge, result.metrics


def test_adca_step_reward_reaches_the_z_scores_through_eps() -> None:
    # prm +-s, -s: trajectory-weighted mean -s/2, std s*sqrt(3)/2 (weights 1/2, 1/2, 1; see test_advantage_math).
    # With eps 1 the z-score (prm - mean) / (std + 1) depends on s; with the default eps it would not.
    def expected(s: float) -> tuple[list[float], list[float]]:
        std = s * math.sqrt(3) / 2
        z = [1.5 * s / (std + 1), -0.5 * s / (std + 1), -0.5 * s / (std + 1)]
        out = 0.5 / (math.sqrt(0.5) + 1)  # the outcome's z-score with eps 1 too
        r_win = [z[0], z[1] + out]
        return [r_win[0] + r_win[1], r_win[1]], [z[2] - out]

    for reward in (0.2, 2.0):
        win, loss, _, _ = adca_values(AdcaConfig(step_reward=reward, eps=1.0, decay="none"))
        want_win, want_loss = expected(reward)
        assert win == pytest.approx(want_win, rel=1e-5) and loss == pytest.approx(want_loss, rel=1e-5), reward


def test_adca_alpha_zero_is_grpo_on_every_step() -> None:
    win, loss, judge, metrics = adca_values(AdcaConfig(alpha=0.0, decay="none"))
    assert win == pytest.approx([R2, R2], rel=1e-5) and loss == pytest.approx([-R2], rel=1e-5)
    assert metrics["active"] == 1.0 and metrics["alpha"] == 0.0 and len(judge.calls) == 2


def test_adca_alpha_scales_the_step_rewards() -> None:
    # z of the steps: +sqrt3, -1/sqrt3 (win) and -1/sqrt3 (loss) (eps ~0); alpha 2 doubles them
    root3 = math.sqrt(3)
    for alpha in (1.0, 2.0):
        win, loss, _, metrics = adca_values(AdcaConfig(alpha=alpha, decay="none"))
        r_win = [alpha * root3, -alpha / root3 + R2]
        assert win == pytest.approx([r_win[0] + r_win[1], r_win[1]], rel=1e-4), alpha
        assert loss == pytest.approx([-alpha / root3 - R2], rel=1e-4) and metrics["alpha"] == alpha


def test_adca_norm_by_std_overrides_the_spec_in_both_directions() -> None:
    batch, win, _ = adca_batch()
    centred = Adca(AdcaConfig(alpha=0.0, norm_by_std=False), llm=Judge(set())).estimate(batch)
    assert per_step(centred.per_token[0], win) == pytest.approx([0.5, 0.5])
    divided = Adca(AdcaConfig(alpha=0.0, norm_by_std=True), llm=Judge(set())).estimate(attrs.evolve(
        batch, norm_by_std=False))
    assert per_step(divided.per_token[0], win) == pytest.approx([R2, R2], rel=1e-5)
    spec_says = Adca(AdcaConfig(alpha=0.0), llm=Judge(set())).estimate(attrs.evolve(batch, norm_by_std=False))
    assert per_step(spec_says.per_token[0], win) == pytest.approx([0.5, 0.5])


def test_adca_prm_steps_zero_never_asks_the_judge() -> None:
    win, loss, judge, metrics = adca_values(AdcaConfig(prm_steps=0), step=1)
    assert judge.calls == [] and metrics == {"active": 0.0, "alpha": 0.0}
    assert win == pytest.approx([R2, R2], rel=1e-5) and loss == pytest.approx([-R2], rel=1e-5)
    assert alpha_at(AdcaConfig(prm_steps=0, alpha=3.0), 7) == 3.0  # no decay over no steps


def test_adca_temperature_and_max_tokens_reach_the_judges_call() -> None:
    _, _, judge, _ = adca_values(AdcaConfig(temperature=0.7, max_tokens=64))
    assert judge.calls == [{"temperature": 0.7, "max_tokens": 64}] * 2
