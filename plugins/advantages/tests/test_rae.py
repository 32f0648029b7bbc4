"""`rae` (SPIRAL's role-conditioned advantages) by hand: one running baseline per game and seat, the
step's mean folded in with `decay`, A = r - b on every model token; a step estimated twice gives the same
answer; the state goes through `state_dict` and back (what a checkpoint keeps), and a state that is not
rae's is refused with the reason."""

from __future__ import annotations

import numpy as np
import pytest

from beyondagent_core.advantages import (
    AdvantageBatch,
    ScoredEpisode,
    Step,
    estimator_state,
    restore_estimator,
)
from beyondagent_core.types import Task
from beyondagent_plugin_advantages.config import RaeConfig
from beyondagent_plugin_advantages.rae import Rae, role_of


def game(outcome: float, seat: int | None, *, name: str = "tictactoe", group: int = 0) -> ScoredEpisode:
    task = Task(task_id=f"{name}-{group}", env="textarena", metadata={"game": name})
    return ScoredEpisode(group=(group, seat), task=task, outcome=outcome, success=outcome == 1.0, length=6,
                         steps=(Step(start=1, end=3, observation="board", action="[4]"),
                                Step(start=4, end=5, observation="board", action="[0]")), seat=seat)


def advantages(estimator: Rae, step: int, *episodes: ScoredEpisode) -> list[float]:
    result = estimator.estimate(AdvantageBatch(episodes=episodes, step=step, total_steps=5))
    for values, episode in zip(result.per_token, episodes):  # one value, on the model tokens only
        assert values.dtype == np.float32 and np.all(values[episode.token_mask == 0] == 0)
        assert len(set(values[episode.token_mask == 1].tolist())) == 1
    return [float(values[1]) for values in result.per_token]


def test_each_seat_against_its_own_running_baseline() -> None:
    rae = Rae(RaeConfig(decay=0.5))
    # step 1: the opener (seat 0) wins 3 of 4, seat 1 the other; baselines start at each role's mean
    step1 = [game(1.0, 0), game(1.0, 0), game(1.0, 0), game(0.0, 0), game(0.0, 1), game(0.0, 1), game(0.0, 1),
             game(1.0, 1)]
    got = advantages(rae, 1, *step1)
    assert got == pytest.approx([0.25, 0.25, 0.25, -0.75, -0.25, -0.25, -0.25, 0.75])
    assert rae.baselines == {"tictactoe/seat0": 0.75, "tictactoe/seat1": 0.25}
    # step 2: seat 0 draws both (mean 0.5): b0 = 0.5 * 0.75 + 0.5 * 0.5; seat 1 likewise from 0.25
    got = advantages(rae, 2, game(0.5, 0), game(0.5, 0), game(0.5, 1), game(0.5, 1))
    assert rae.baselines == pytest.approx({"tictactoe/seat0": 0.625, "tictactoe/seat1": 0.375})
    assert got == pytest.approx([-0.125, -0.125, 0.125, 0.125])
    # another game is another role; a one-seat episode has its own
    assert role_of(game(1.0, 0, name="nim")) == "nim/seat0" and role_of(game(1.0, None)) == "tictactoe/seat-"


def test_a_step_estimated_again_starts_from_the_baselines_before_it() -> None:
    rae = Rae(RaeConfig(decay=0.9))
    advantages(rae, 1, game(1.0, 0), game(0.0, 0))
    first = advantages(rae, 2, game(1.0, 0), game(1.0, 0))
    again = advantages(rae, 2, game(1.0, 0), game(1.0, 0))  # a retried batch: folded in once
    assert first == again == pytest.approx([0.45, 0.45])  # b = 0.9 * 0.5 + 0.1 * 1.0 = 0.55
    metrics = rae.estimate(AdvantageBatch(episodes=(game(1.0, 0),), step=2)).metrics
    assert metrics == {"baseline/tictactoe/seat0": pytest.approx(0.55)}


def test_the_state_goes_to_a_checkpoint_and_back() -> None:
    rae = Rae(RaeConfig(decay=0.5))
    advantages(rae, 1, game(1.0, 0), game(0.0, 1))
    state = estimator_state(rae)
    fresh = Rae(RaeConfig(decay=0.5))
    restore_estimator(fresh, state, who="rae")
    assert advantages(fresh, 2, game(0.0, 0)) == advantages(rae, 2, game(0.0, 0)) == pytest.approx([-0.5])
    with pytest.raises(ValueError, match="not its baselines"):
        restore_estimator(Rae(), {"baselines": "none"}, who="rae")
    with pytest.raises(ValueError, match="holds no estimator state"):
        restore_estimator(Rae(), None, who="advantage estimator 'rae'")
    restore_estimator(object(), None, who="grpo")  # a stateless estimator, a checkpoint without state
