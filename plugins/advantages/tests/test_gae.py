"""GAE's math (gae.py) by hand on a two-turn episode: the observation between the turns is skipped,
the first turn's last token bootstrapping from the second turn's first value. Its parity with verl's
`compute_gae_advantage_return` on random batches is in verl_estimator_parity.py."""

from __future__ import annotations

import numpy as np
import pytest
from beyondagent_plugin_advantages.gae import gae, gae_whitened


def test_gae_skips_the_observation_between_turns() -> None:
    # model, model, observation, model; the outcome 1 on the last model token
    mask = np.array([[1.0, 1.0, 0.0, 1.0]])
    rewards = np.array([[0.0, 0.0, 0.0, 1.0]])
    values = np.array([[0.5, 0.4, 9.9, 0.2]])  # the observation's value is never read
    advantages, returns = gae(rewards, values, mask, gamma=0.9, lam=0.8)
    # t=3: 1 - 0.2 = 0.8; t=1: (0.9 * 0.2 - 0.4) + 0.9 * 0.8 * 0.8 = 0.356; t=0: (0.9 * 0.4 - 0.5) + 0.72 * 0.356
    expected = [0.9 * 0.4 - 0.5 + 0.72 * 0.356, 0.356, 0.8]
    assert advantages[0, [0, 1, 3]] == pytest.approx(expected, abs=1e-12)
    assert returns[0, [0, 1, 3]] == pytest.approx(np.array(expected) + [0.5, 0.4, 0.2], abs=1e-12)
    # gamma = lam = 1 and zero values: every model token's advantage is the outcome
    flat, _ = gae(rewards, np.zeros_like(values), mask, gamma=1.0, lam=1.0)
    assert flat[0, [0, 1, 3]] == pytest.approx([1.0, 1.0, 1.0])


def test_whitened_advantages_are_zero_off_the_model_tokens_and_centred_on_them() -> None:
    mask = np.array([[1.0, 1.0, 0.0, 1.0], [0.0, 1.0, 1.0, 0.0]])
    rewards = np.array([[0.0, 0.0, 0.0, 1.0], [0.0, 0.0, 0.5, 0.0]])
    values = np.array([[0.1, 0.2, 0.3, 0.4], [0.0, -0.5, 0.5, 0.0]])
    advantages, _ = gae_whitened(rewards, values, mask, gamma=0.99, lam=0.95)
    assert np.all(advantages[mask == 0] == 0.0)
    assert advantages[mask == 1].mean() == pytest.approx(0.0, abs=1e-6)  # verl's masked mean adds 1e-8 to its count
    assert advantages[mask == 1].std(ddof=1) == pytest.approx(1.0, abs=1e-6)


def test_shapes_must_agree() -> None:
    with pytest.raises(ValueError, match="one shape"):
        gae(np.zeros((2, 3)), np.zeros((2, 4)), np.ones((2, 3)), gamma=1.0, lam=1.0)


def test_the_estimator_puts_the_outcome_on_the_last_model_token_and_needs_values() -> None:
    from beyondagent_plugin_advantages.config import GaeConfig
    from beyondagent_plugin_advantages.gae import Gae

    from beyondagent_core.advantages import AdvantageBatch, AdvantageError, ScoredEpisode, Step
    from beyondagent_core.types import Task

    def scored(task: str, outcome: float, values: np.ndarray | None) -> ScoredEpisode:
        steps = (Step(start=1, end=3, observation="", action=""), Step(start=4, end=5, observation="", action=""))
        return ScoredEpisode(group=task, task=Task(task_id=task), outcome=outcome, success=outcome > 0, length=6,
                             steps=steps, values=values)

    values = np.array([0.0, 0.5, 0.4, 9.9, 0.2, 7.0])
    batch = AdvantageBatch(episodes=(scored("a", 1.0, values), scored("b", 0.0, values)))  # groups of one
    answer = Gae(GaeConfig(gamma=0.9, lam=0.8)).estimate(batch)
    _, returns = gae(np.array([[0, 0, 0, 0, 1.0, 0], [0, 0, 0, 0, 0, 0]]), np.stack([values, values]),
                       np.array([[0, 1, 1, 0, 1, 0]] * 2, dtype=float), gamma=0.9, lam=0.8)
    assert answer.returns[0][[1, 2, 4]] == pytest.approx(returns[0, [1, 2, 4]], abs=1e-6)
    assert answer.returns[1][[1, 2, 4]] == pytest.approx(returns[1, [1, 2, 4]], abs=1e-6)
    assert answer.returns[0][[0, 3, 5]].tolist() == [0.0, 0.0, 0.0]  # not the model's: nothing to regress
    assert answer.per_token[0][4] > 0 > answer.per_token[1][4]  # the success above the failure, whitened
    assert answer.metrics["values_mean"] == pytest.approx((0.5 + 0.4 + 0.2) / 3)
    with pytest.raises(AdvantageError, match="critic's value of every token"):
        Gae().estimate(AdvantageBatch(episodes=(scored("a", 1.0, None),)))
