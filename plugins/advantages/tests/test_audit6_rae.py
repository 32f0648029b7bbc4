"""`rae` by hand, the parts test_rae.py leaves open: a step's metrics name only the roles that played it
(an earlier role's baseline is kept, not reported); a checkpoint taken mid-step restores the baselines
*before* the step, so a resumed run retrying that step gives the answer the first try gave; an estimator
that keeps state refuses a checkpoint without any, and one that keeps none refuses a checkpoint with some."""

from __future__ import annotations

import pytest

from beyondagent_core.advantages import AdvantageBatch, ScoredEpisode, Step, estimator_state, restore_estimator
from beyondagent_core.types import Task
from beyondagent_plugin_advantages.config import RaeConfig
from beyondagent_plugin_advantages.rae import Rae

pytestmark = pytest.mark.beyondagent_plugins("advantages")


def game(outcome: float, seat: int | None, name: str = "tictactoe") -> ScoredEpisode:
    task = Task(task_id=f"{name}-0", env="textarena", metadata={"game": name})
    return ScoredEpisode(group=(0, seat), task=task, outcome=outcome, success=outcome == 1.0, length=4,
                         steps=(Step(start=1, end=3, observation="board", action="[4]"),), seat=seat)


def estimate(rae: Rae, step: int, *episodes: ScoredEpisode):
    result = rae.estimate(AdvantageBatch(episodes=episodes, step=step, total_steps=9))
    return [float(values[1]) for values in result.per_token], result.metrics


def test_a_steps_metrics_name_only_the_roles_that_played_it() -> None:
    rae = Rae(RaeConfig(decay=0.5))
    estimate(rae, 1, game(1.0, 0), game(0.0, 1), game(1.0, 0, "nim"))
    values, metrics = estimate(rae, 2, game(1.0, 1))
    assert values == pytest.approx([0.5])  # b1 = 0.5 * 0 + 0.5 * 1 = 0.5: A = 1 - 0.5
    assert metrics == {"baseline/tictactoe/seat1": pytest.approx(0.5)}
    assert rae.baselines == pytest.approx({"tictactoe/seat0": 1.0, "tictactoe/seat1": 0.5, "nim/seat0": 1.0})


def test_a_checkpoint_mid_step_resumes_to_the_same_retried_answer() -> None:
    rae = Rae(RaeConfig(decay=0.5))
    estimate(rae, 1, game(1.0, 0), game(0.0, 0))  # b0 = 0.5
    first, _ = estimate(rae, 2, game(1.0, 0))  # b0 = 0.5 * 0.5 + 0.5 * 1.0 = 0.75: A = 0.25
    assert first == pytest.approx([0.25])
    state = estimator_state(rae)
    assert state["before"] == {"tictactoe/seat0": 0.5} and state["baselines"] == {"tictactoe/seat0": 0.75}
    resumed = Rae(RaeConfig(decay=0.5))
    restore_estimator(resumed, state, who="rae")
    again, _ = estimate(resumed, 2, game(1.0, 0))  # step 2 retried: from the baselines before it
    assert again == pytest.approx(first)
    later, _ = estimate(resumed, 3, game(1.0, 0))  # b0 = 0.5 * 0.75 + 0.5 = 0.875: A = 0.125
    assert later == pytest.approx([0.125])


def test_state_and_estimator_must_match() -> None:
    with pytest.raises(ValueError, match="holds no estimator state, and the estimator keeps some"):
        restore_estimator(Rae(), None, who="rae")

    class Stateless:
        def estimate(self, batch):  # pragma: no cover - never called
            raise AssertionError

    with pytest.raises(ValueError, match="holds estimator state, and the estimator keeps none"):
        restore_estimator(Stateless(), {"baselines": {}, "step": None, "before": {}}, who="grpo")
    assert estimator_state(Stateless()) is None
