"""Self-play groups seat by seat in the trainer (trainer.py), by hand: `group_episodes` groups by task
group, or per seat (`Episode.baseline_group`) when asked; a task group is flat only when each seat's
episodes are (`is_flat`: dynamic sampling keeps a group whose seat 0 always wins but whose seats differ
from one another, and drops one where each seat scores alike); `count_flat_groups` counts seat groups;
and `outcome_metrics` gives each seat's rates over that seat's own games."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from beyondagent_plugin_torch.rollout import Episode
from beyondagent_plugin_torch.trainer import Trainer, group_episodes, is_flat, outcome_metrics

from beyondagent_core.runtime.tokens import TokenSequence
from beyondagent_core.types import Reward, Task, Trajectory

pytestmark = pytest.mark.beyondagent_plugins("torch", "mixers", "advantages")


def played(group: int, seat: int | None, score: float, outcome: str | None = None) -> Episode:
    sequence = TokenSequence(template=None)
    sequence.add_context([1, 2])
    sequence.add_generation([10, 11], [-0.5, -0.5])
    details = {} if outcome is None else {"outcome": outcome, "opponent": "self", "seat": seat}
    trajectory = Trajectory(task=Task(f"g{group}"), reward=Reward(score, details=details), seat=seat)
    return Episode(group=group, trajectory=trajectory, sequence=sequence, seat=seat)


def game(group: int, first: float, second: float) -> list[Episode]:
    return [played(group, 0, first), played(group, 1, second)]


def test_groups_by_task_or_by_seat() -> None:
    episodes = [*game(0, 1.0, 0.0), *game(0, 1.0, 0.0), *game(1, 0.0, 1.0), played(2, None, 1.0)]
    by_task = group_episodes(episodes)
    assert [[(e.group, e.seat) for e in group] for group in by_task] == [
        [(0, 0), (0, 1), (0, 0), (0, 1)], [(1, 0), (1, 1)], [(2, None)]]
    by_seat = group_episodes(episodes, per_seat=True)
    assert [[(e.group, e.seat) for e in group] for group in by_seat] == [
        [(0, 0), (0, 0)], [(0, 1), (0, 1)], [(1, 0)], [(1, 1)], [(2, None)]]


def test_a_group_is_flat_when_each_seat_scores_alike() -> None:
    # the opener won both games: within each seat every score is the same, so nothing to learn
    assert is_flat([*game(0, 1.0, 0.0), *game(0, 1.0, 0.0)])
    # seat 0 won one and drew one: seat 0's episodes differ
    assert not is_flat([*game(0, 1.0, 0.0), *game(0, 0.5, 0.5)])
    # one-seat episodes: the group as a whole
    assert is_flat([played(3, None, 1.0), played(3, None, 1.0)])
    assert not is_flat([played(3, None, 1.0), played(3, None, 0.0)])


def test_flat_groups_are_counted_per_seat() -> None:
    trainer = object.__new__(Trainer)
    trainer.critic, trainer._warned_flat_groups = None, True
    episodes = [*game(0, 1.0, 0.0), *game(0, 1.0, 0.0),  # two flat seat groups
                *game(1, 1.0, 0.0), *game(1, 0.0, 1.0)]  # two seat groups with signal
    assert trainer.count_flat_groups(1, episodes) == pytest.approx(2 / 4)
    trainer.critic = SimpleNamespace()  # with a critic as the baseline nothing is flat
    assert trainer.count_flat_groups(1, episodes) == 0.0


def test_each_seats_rates_are_over_its_own_games() -> None:
    # three games: seat 0 wins two, one draw; seat 1 played one more game alone (a failed partner left)
    episodes = [played(0, 0, 1.0, "win"), played(0, 1, 0.0, "loss"), played(1, 0, 1.0, "win"),
                played(1, 1, 0.0, "loss"), played(2, 0, 0.5, "draw"), played(2, 1, 0.5, "draw"),
                played(3, 1, 1.0, "win")]
    metrics = outcome_metrics("train", episodes)
    assert metrics["train/win_rate"] == pytest.approx(3 / 7)
    assert (metrics["train/seat0_win_rate"], metrics["train/seat0_draw_rate"]) == (pytest.approx(2 / 3),
                                                                                    pytest.approx(1 / 3))
    assert (metrics["train/seat1_win_rate"], metrics["train/seat1_loss_rate"]) == (0.25, 0.5)
