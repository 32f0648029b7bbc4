"""`EpisodeRunner.run_seats` closes the env it opened: after a finished game, and after one that crashed.

From the eighth audit: a mutant that dropped the close from `run_seats` (one-seat `run` kept it) passed
every seat test, though each unclosed env holds a game, a process or a served instance until the
run ends. `Alternate` is a real two-seat env: the seats take turns, and the game ends after `moves`
moves (or breaks at move `breaks_at`); it counts how often it is closed.
"""

from __future__ import annotations

import asyncio

from beyondagent_core.protocols import EnvReset, EnvStep
from beyondagent_core.runtime.episodes import EpisodeRunner
from beyondagent_core.runtime.react import ReactConfig, ReactWorkflow
from beyondagent_core.types import Reward, Task, Turn


class Alternate:
    def __init__(self, moves: int = 4, *, seats: int = 2, breaks_at: int | None = None):
        self.moves, self.seats, self.breaks_at = moves, seats, breaks_at
        self.made, self.closes = 0, 0

    def reset(self, task: Task) -> EnvReset:
        self.made = 0
        info = {"seats": 2, "seat": 0} if self.seats == 2 else {}
        return EnvReset(messages=[{"role": "user", "content": "your move"}], info=info)

    def step(self, action: dict) -> EnvStep:
        self.made += 1
        if self.made == self.breaks_at:
            raise RuntimeError(f"the board broke at move {self.made}")
        done = self.made >= self.moves
        info = {} if done or self.seats == 1 else {"seat": self.made % 2}
        return EnvStep(observation=[{"role": "user", "content": f"move {self.made} made"}], reward=0.0,
                       terminated=done, info=info)

    def seat_rewards(self) -> list[dict]:
        return [Reward(score=1.0, success=True).to_dict(), Reward(score=0.0).to_dict()]

    def evaluate(self) -> Reward:
        return Reward(score=0.5)

    def close(self) -> None:
        self.closes += 1


class Says:
    async def chat(self, messages, **sampling) -> Turn:
        return Turn(role="assistant", content="m")


def run_seats(env: Alternate) -> list:
    runner = EpisodeRunner(ReactWorkflow(ReactConfig(max_turns=5)), lambda: env)
    return asyncio.run(runner.run_seats(Task("alternate-1"), lambda seat, seats=None: Says()))


def test_a_finished_two_seat_game_closes_its_env_once() -> None:
    env = Alternate(moves=4)
    zero, one = run_seats(env)
    assert (zero.error, one.error) == (None, None) and (zero.reward.score, one.reward.score) == (1.0, 0.0)
    assert (zero.metrics["turns"], one.metrics["turns"]) == (2, 2)
    assert env.closes == 1


def test_a_two_seat_game_whose_env_breaks_still_closes_it() -> None:
    env = Alternate(moves=6, breaks_at=3)
    trajectories = run_seats(env)
    assert [t.seat for t in trajectories] == [0, 1]
    assert all(t.error == "RuntimeError: the board broke at move 3" for t in trajectories)
    assert env.closes == 1


def test_a_one_seat_env_played_through_run_seats_is_closed_too() -> None:
    env = Alternate(moves=2, seats=1)
    (only,) = run_seats(env)
    assert only.seat is None and only.error is None and only.reward.score == 0.5
    assert env.closes == 1
