"""The contract suite of advantage estimators: subclass `AdvantageContract`, give it `implementation`.

    from beyondagent_core.testing.advantage_contract import AdvantageContract

    @pytest.mark.beyondagent_plugins("advantages")
    class TestGigpo(AdvantageContract):
        @pytest.fixture
        def implementation(self):
            return {"name": "gigpo", "gamma": 0.9}

`implementation` is the `backend.advantage` block. The suite builds the estimator through the
registry and feeds it batches made here (two groups of three multi-turn episodes, a group of
one, an episode without model turns) and checks what every backend relies on: one finite float
array per episode as long as its tokens, zero outside model turns, the same answer twice, and
an answer that follows the episodes when the batch is reordered. Through the core's
`estimate_finished` (what every backend calls) a failed episode gets 0 and leaves its siblings'
advantages as they are without it, and a group failures leave with one finished episode is skipped.
Every made-up episode carries critic values (`ScoredEpisode.values`): an estimator registered with
`uses_values` must read them and answer returns; any other must not depend on them (a backend
without a critic gives none).
An estimator that needs an LLM (a step judge) gets its endpoint in `implementation`, e.g. the
`openai_server` fixture's.
"""

from __future__ import annotations

import random
from typing import Any

import attrs
import numpy as np
import pytest

from beyondagent_core.advantages import (
    AdvantageBatch,
    Advantages,
    ScoredEpisode,
    Step,
    check_advantages,
    estimate_finished,
)
from beyondagent_core.registry import Registry
from beyondagent_core.spec import select_component
from beyondagent_core.types import Task


def episode(group: str, outcome: float, observations: list[str], *, prompt: int = 5, gap: int = 2,
            turn: int = 3, seed: int = 0, failure: str | None = None) -> ScoredEpisode:
    """A made-up episode: `prompt` context tokens, then per step `turn` model tokens and `gap` context."""
    rng = random.Random(seed)
    steps, position = [], prompt
    for index, observation in enumerate(observations):
        length = turn + rng.randrange(0, 3)
        steps.append(Step(start=position, end=position + length, observation=observation,
                          action=f"action {index} of {group}/{seed}"))
        position += length + gap
    values = np.array([rng.uniform(-1.0, 1.0) for _ in range(position)], dtype=np.float32)
    return ScoredEpisode(group=group, task=Task(task_id=group, query=f"solve {group}"), outcome=outcome,
                         success=outcome > 0.5, length=position, steps=tuple(steps), failure=failure, values=values)


def with_failures(batch: AdvantageBatch) -> tuple[AdvantageBatch, list[int | None]]:
    """`batch` with failed episodes among its groups (they would score 0, and some made model turns),
    and, per position, the index of the episode of `batch` it holds (None for a failed one)."""
    failed = [episode("a", 0.0, ["start", "left"], seed=11, failure="error"),
              episode("b", 0.0, ["s0"], seed=12, failure="timeout"),
              episode("a", 0.0, [], seed=13, failure="untrainable"),
              episode("b", 1.0, ["s0", "s1"], seed=14, failure="split")]
    order: list[int | None] = [0, None, 1, 3, None, 2, 4, None, 5, None, 6]
    pool = iter(failed)
    episodes = tuple(batch.episodes[i] if i is not None else next(pool) for i in order)
    return AdvantageBatch(episodes=episodes, step=batch.step, total_steps=batch.total_steps,
                          norm_by_std=batch.norm_by_std), order


def sample_batch(step: int = 1) -> AdvantageBatch:
    """Two groups of three, with repeated observations (anchor states), a group of one, a turnless episode."""
    return AdvantageBatch(episodes=(
        episode("a", 1.0, ["start", "left", "goal?"], seed=1),
        episode("a", 0.0, ["start", "right"], seed=2),
        episode("a", 0.0, ["start", "left", "hole"], seed=3),
        episode("b", 0.5, ["s0", "s1"], seed=4),
        episode("b", 1.0, ["s0", "s2", "s3", "s4"], seed=5),
        episode("b", 0.0, [], seed=6),
        episode("c", 1.0, ["alone"], seed=7),
    ), step=step, total_steps=10)


class AdvantageContract:
    """What every advantage estimator must do."""

    @pytest.fixture
    def implementation(self) -> dict[str, Any]:
        raise pytest.UsageError(f"{type(self).__name__} must define the fixture `implementation`")

    @pytest.fixture
    def component(self, plugin_manager: Any, implementation: dict[str, Any]) -> Any:
        return select_component(Registry(plugin_manager), "advantage", dict(implementation),
                                key_path="backend.advantage")

    @pytest.fixture
    def estimator(self, component: Any) -> Any:
        return component.create()

    def estimate(self, estimator: Any, batch: AdvantageBatch) -> Advantages:
        return check_advantages(estimator.estimate(batch), batch, who=type(estimator).__name__)

    def test_one_finite_array_per_episode_as_long_as_its_tokens(self, estimator: Any) -> None:
        batch = sample_batch()
        result = self.estimate(estimator, batch)
        for values, scored in zip(result.per_token, batch.episodes):
            assert values.dtype == np.float32 and values.shape == (scored.length,)

    def test_zero_outside_the_model_turns(self, estimator: Any) -> None:
        batch = sample_batch()
        for values, scored in zip(self.estimate(estimator, batch).per_token, batch.episodes):
            assert np.all(values[scored.token_mask == 0] == 0)

    def test_gives_signal_where_a_group_disagrees(self, estimator: Any) -> None:
        batch = sample_batch()
        result = self.estimate(estimator, batch)
        group_a = [values for values, scored in zip(result.per_token, batch.episodes) if scored.group == "a"]
        assert any(np.any(values != 0) for values in group_a)

    def test_the_same_batch_gets_the_same_answer(self, estimator: Any) -> None:
        first, second = self.estimate(estimator, sample_batch()), self.estimate(estimator, sample_batch())
        for a, b in zip(first.per_token, second.per_token):
            np.testing.assert_array_equal(a, b)

    def test_reordering_the_batch_reorders_the_answer(self, estimator: Any) -> None:
        batch = sample_batch()
        order = [6, 2, 4, 0, 5, 1, 3]
        shuffled = AdvantageBatch(episodes=tuple(batch.episodes[i] for i in order), step=batch.step,
                                  total_steps=batch.total_steps)
        straight = self.estimate(estimator, batch).per_token
        moved = self.estimate(estimator, shuffled).per_token
        for position, index in enumerate(order):
            np.testing.assert_allclose(moved[position], straight[index], rtol=1e-6, atol=1e-6)

    def test_reads_critic_values_exactly_when_registered_to(self, component: Any, estimator: Any) -> None:
        batch = sample_batch()
        shifted = AdvantageBatch(episodes=tuple(attrs.evolve(e, values=e.values * 0.5 + 0.25) for e in batch.episodes),
                                 step=batch.step, total_steps=batch.total_steps)
        first, second = self.estimate(estimator, batch), self.estimate(estimator, shifted)
        moved = any(not np.allclose(a, b, atol=1e-6) for a, b in zip(first.per_token, second.per_token))
        if component.registration.spec.uses_values:  # the critic's values shape the answer; returns train it
            assert moved and first.returns is not None and second.returns is not None
        else:  # no backend gives values to an estimator that did not ask: it must not need them
            assert not moved

    def test_metrics_are_finite_numbers(self, estimator: Any) -> None:
        result = self.estimate(estimator, sample_batch())
        assert all(isinstance(name, str) and np.isfinite(value) for name, value in result.metrics.items())

    def test_a_failed_episode_gets_nothing_and_moves_no_sibling(self, estimator: Any) -> None:
        clean = sample_batch()
        batch, order = with_failures(clean)
        expected = estimate_finished(estimator, clean, who=type(estimator).__name__).per_token
        result = estimate_finished(estimator, batch, who=type(estimator).__name__)
        for position, index in enumerate(order):
            if index is None:
                assert not result.per_token[position].any(), f"failed episode {position} got an advantage"
            else:
                np.testing.assert_allclose(result.per_token[position], expected[index], rtol=1e-6, atol=1e-6)
        assert result.metrics["dropped_episodes"] == 4 and result.metrics["dropped_groups"] == 0

    def test_a_group_failures_leave_one_finished_episode_is_skipped(self, estimator: Any) -> None:
        clean = sample_batch()
        failed = episode("c", 0.0, ["alone"], seed=21, failure="error")
        batch = AdvantageBatch(episodes=(*clean.episodes, failed), step=clean.step, total_steps=clean.total_steps)
        without_c = AdvantageBatch(episodes=clean.episodes[:6], step=clean.step, total_steps=clean.total_steps)
        expected = estimate_finished(estimator, without_c, who=type(estimator).__name__).per_token
        result = estimate_finished(estimator, batch, who=type(estimator).__name__)
        for got, want in zip(result.per_token[:6], expected):
            np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
        assert not result.per_token[6].any() and not result.per_token[7].any()  # "c": its one finished, its crash
        assert result.metrics["dropped_groups"] == 1 and result.metrics["dropped_error"] == 1
