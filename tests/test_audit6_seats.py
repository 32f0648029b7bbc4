"""Multi-seat episodes in the core (`beyondagent_core.runtime`), the parts test_seats.py leaves open: an
env may have as many as `MAX_SEATS` seats (16) and not one more; a one-seat episode played through
`run_seats` that fails is recorded with seat None (a one-seat episode, as far as anyone can tell), while a
two-seat one that fails after both seats moved gives each seat its own error record."""

from __future__ import annotations

import asyncio

import pytest

from beyondagent_core.protocols import EnvReset, EnvStep
from beyondagent_core.runtime.episodes import EpisodeRunner
from beyondagent_core.runtime.react import ReactConfig, ReactWorkflow
from beyondagent_core.runtime.seats import MAX_SEATS, seats_in
from beyondagent_core.types import Reward, Task, Turn


class Chat:
    async def chat(self, messages, **sampling) -> Turn:
        return Turn(role="assistant", content="move")


class Broken:
    """An env whose `seats`-th step fails: `seats` seats, seat 0 to move, then seat 1 (every seat moved)."""

    def __init__(self, seats: int):
        self.seats, self.steps = seats, 0

    def reset(self, task: Task) -> EnvReset:
        info = {} if self.seats == 1 else {"seats": self.seats, "seat": 0}
        return EnvReset(messages=[{"role": "user", "content": "go"}], info=info)

    def step(self, action: dict) -> EnvStep:
        self.steps += 1
        if self.steps == self.seats:
            raise RuntimeError("the board caught fire")
        return EnvStep(observation=[{"role": "user", "content": "your move"}], reward=0.0, terminated=False,
                       info={"seat": self.steps})

    def evaluate(self) -> Reward:
        return Reward(score=0.0)

    def close(self) -> None:
        pass


def test_an_env_may_have_up_to_max_seats() -> None:
    assert MAX_SEATS == 16
    assert seats_in({"seats": 16}) == 16 and seats_in({"seats": 2}) == 2 and seats_in({}) == 1
    for bad in (17, 0, True, 2.0):
        with pytest.raises(TypeError, match="whole number from 1 to 16"):
            seats_in({"seats": bad})


@pytest.mark.parametrize("seats, expected", [(1, [None]), (2, [0, 1])])
def test_a_failed_episode_is_recorded_per_seat_that_had_a_chat(seats: int, expected: list) -> None:
    runner = EpisodeRunner(ReactWorkflow(ReactConfig(max_turns=3)), lambda: Broken(seats))
    trajectories = asyncio.run(runner.run_seats(Task("broken-1"), lambda seat, seats=None: Chat()))
    assert [t.seat for t in trajectories] == expected
    assert all("the board caught fire" in t.error for t in trajectories)
    assert all(t.reward.score == 0.0 for t in trajectories)
    assert [turn.content for turn in trajectories[0].turns] == ["go", "move"]  # what it saw before the failure
