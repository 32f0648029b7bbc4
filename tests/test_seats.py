"""Multi-seat episodes in the core (`beyondagent_core.runtime.seats`): the react workflow plays each seat
with its own chat and conversation, routes each observation to the seat the env names, ends with every
seat's reward; the runner checks and records them, turns a failure into an error record per seat, and a
one-seat workflow or env is played as before; `run` refuses a multi-seat env with what to do.

`ScriptedLLM` stands in for a model (the core has no torch); `Race` is a real two-seat env: each seat
adds its reply's length in words to its total, the higher total after `rounds` each wins. The torch
plugin's tests play the same loop with a real model (test_selfplay.py), and textarena's with its games.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from beyondagent_core.protocols import EnvReset, EnvStep
from beyondagent_core.returns import ReturnError
from beyondagent_core.runtime.episodes import EpisodeRunner, check_seats
from beyondagent_core.runtime.react import ReactConfig, ReactWorkflow
from beyondagent_core.runtime.seats import MultiSeatRefused
from beyondagent_core.types import Reward, Task, Trajectory, Turn


class ScriptedLLM:
    def __init__(self, replies: list[str]):
        self.replies, self.seen = list(replies), []

    async def chat(self, messages, **sampling) -> Turn:
        self.seen.append([dict(m) if isinstance(m, dict) else {"role": m.role, "content": m.content}
                          for m in messages])
        return Turn(role="assistant", content=self.replies.pop(0), token_ids=[1], logprobs=[0.0])


class Race:
    def __init__(self, rounds: int = 2, *, bad_seat: Any = None, rewards: int = 2):
        self.rounds, self.bad_seat, self.rewards = rounds, bad_seat, rewards

    def reset(self, task: Task) -> EnvReset:
        self.totals, self.moves, self.turn = [0, 0], [0, 0], 1  # seat 1 opens
        return EnvReset(messages=[{"role": "user", "content": "seat 1: go"}], info={"seats": 2, "seat": 1})

    def step(self, action: dict) -> EnvStep:
        mover = self.turn
        self.totals[mover] += len(action["content"].split())
        self.moves[mover] += 1
        self.turn = 1 - mover
        done = min(self.moves) >= self.rounds
        seat = self.bad_seat if self.bad_seat is not None else self.turn
        return EnvStep(observation=[{"role": "user", "content": f"seat {mover} said {action['content']!r}"}],
                       reward=0.0, terminated=done, info={} if done else {"seat": seat})

    def seat_rewards(self) -> list[dict]:
        high = max(self.totals)
        return [Reward(score=float(t == high), success=t == high, reason=f"{t} words").to_dict()
                for t in self.totals][:self.rewards]

    def evaluate(self) -> Reward:
        return Reward(score=0.0)

    def close(self) -> None:
        pass


def play(env: Race, replies: dict[int, list[str]], *, max_turns: int = 5
         ) -> tuple[list[Trajectory], dict[int, ScriptedLLM]]:
    llms = {seat: ScriptedLLM(texts) for seat, texts in replies.items()}
    runner = EpisodeRunner(ReactWorkflow(ReactConfig(max_turns=max_turns)), lambda: env)

    def seat_llm(seat: int, seats: int | None = None) -> ScriptedLLM:
        # the workflow says how many seats the episode has (torch's opponent pool needs it)
        assert seats == (1 if type(env).__name__ == "OneSeat" else 2), seats
        return llms[seat]

    return asyncio.run(runner.run_seats(Task("race-1"), seat_llm)), llms


def test_each_seat_plays_its_own_conversation_and_gets_its_own_reward() -> None:
    trajectories, llms = play(Race(), {0: ["a b c", "d"], 1: ["x", "y z"]})
    zero, one = trajectories
    assert (zero.seat, one.seat) == (0, 1) and zero.error is None and one.error is None
    assert (zero.reward.score, one.reward.score) == (1.0, 0.0) and zero.reward.reason == "4 words"
    # seat 1 opened; seat 0's first view is seat 1's move, and neither saw the other's conversation
    assert [m["content"] for m in llms[1].seen[0]] == ["seat 1: go"]
    assert [m["content"] for m in llms[0].seen[0]] == ["seat 1 said 'x'"]
    assert [m["content"] for m in llms[1].seen[1]] == ["seat 1: go", "x", "seat 0 said 'a b c'"]
    assert [(t.role, t.content) for t in zero.turns] == [
        ("user", "seat 1 said 'x'"), ("assistant", "a b c"), ("user", "seat 1 said 'y z'"), ("assistant", "d"),
        ("user", "seat 0 said 'd'")]  # the game's last word, shown to every seat's record
    assert one.turns[-1].content == "seat 0 said 'd'" and zero.terminated and one.terminated
    assert zero.metrics["turns"] == one.metrics["turns"] == 2 and "seconds" in zero.metrics
    assert Trajectory.from_dict(one.to_dict()).seat == 1


def test_a_seat_out_of_turns_ends_the_game_unterminated() -> None:
    trajectories, _ = play(Race(rounds=3), {0: ["a", "b"], 1: ["x", "y", "z"]}, max_turns=2)
    assert [t.metrics["turns"] for t in trajectories] == [2, 2]
    assert not trajectories[0].terminated and trajectories[0].error is None


@pytest.mark.parametrize(("env", "message", "played"), [
    (Race(bad_seat=2), "info 'seat' must name the seat that moves next, 0 to 1", {1: ["x"]}),
    (Race(bad_seat=True), "info 'seat' must name the seat", {1: ["x"]}),
    (Race(rewards=1), "must return a list of 2 Reward dicts", {0: ["a", "b"], 1: ["x", "y"]}),
])
def test_an_env_breaking_the_seat_contract_fails_the_episode_for_each_seat(env: Race, message: str,
                                                                            played: dict) -> None:
    trajectories, _ = play(env, {0: ["a", "b"], 1: ["x", "y"]})
    assert [t.seat for t in trajectories] == sorted(played)  # each seat that played: its turns and the error
    for trajectory in trajectories:
        assert message in trajectory.error and trajectory.reward.score == 0.0
        assert [t.content for t in trajectory.turns if t.role == "assistant"] == played[trajectory.seat]


def test_one_seat_workflows_and_envs_play_as_before() -> None:
    class OneSeat(Race):
        def reset(self, task: Task) -> EnvReset:
            super().reset(task)
            return EnvReset(messages=[{"role": "user", "content": "go"}])

        def step(self, action: dict) -> EnvStep:
            return EnvStep(observation=[], reward=1.0, terminated=True)

        def evaluate(self) -> Reward:
            return Reward(score=1.0, success=True)

    trajectories, _ = play(OneSeat(), {0: ["hi"]})
    assert len(trajectories) == 1 and trajectories[0].seat is None and trajectories[0].reward.success
    assert "seat" not in trajectories[0].to_dict()  # a one-seat record reads as it always did

    class Plain:  # a workflow without run_seats: played once, by seat 0's chat
        async def run(self, task, env, llm):
            turn = await llm.chat([{"role": "user", "content": "q"}])
            return Trajectory(task=task, turns=[turn], reward=Reward(score=0.5))

    llms = {0: ScriptedLLM(["a"])}
    got = asyncio.run(EpisodeRunner(Plain(), None).run_seats(Task("p"), lambda seat, seats=None: llms[seat]))
    assert [t.reward.score for t in got] == [0.5] and got[0].seat is None


def test_a_one_seat_run_refuses_a_multi_seat_env_with_what_to_do() -> None:
    runner = EpisodeRunner(ReactWorkflow(), lambda: Race())
    trajectory = asyncio.run(runner.run(Task("race-1"), ScriptedLLM(["a"])))
    assert trajectory.error.startswith(MultiSeatRefused.__name__)
    assert "2 seats" in trajectory.error and "torch or verl backend" in trajectory.error


def test_a_workflows_seats_are_checked() -> None:
    task = Task("t")
    with pytest.raises(ReturnError, match="non-empty list"):
        check_seats([], who="w")
    with pytest.raises(ReturnError, match="each must name its own seat"):
        check_seats([Trajectory(task=task, seat=0), Trajectory(task=task, seat=0)], who="w")
    with pytest.raises(ReturnError, match="each must name its own seat"):
        check_seats([Trajectory(task=task, seat=0), Trajectory(task=task)], who="w")
    with pytest.raises(ValueError, match="seat must be a non-negative integer"):
        Trajectory.from_dict({**Trajectory(task=task).to_dict(), "seat": -1})


def test_a_react_subclass_that_changes_run_is_played_by_its_run() -> None:
    # a plugin's workflow written before seats existed: its own `run` must still be what plays it
    from beyondagent_core.runtime.episodes import plays_seats

    class Scripted(ReactWorkflow):
        async def run(self, task, env, llm):
            return Trajectory(task=task, reward=Reward(score=0.25, reason="its own run"))

    class Opening(ReactWorkflow):  # changes only the opening: plays seats like react
        def opening(self, reset):
            return super().opening(reset)

    assert not plays_seats(Scripted()) and plays_seats(Opening()) and plays_seats(ReactWorkflow())
    got = asyncio.run(EpisodeRunner(Scripted(), lambda: Race()).run_seats(Task("t"), lambda seat, seats=None: ScriptedLLM([])))
    assert [(t.reward.reason, t.seat) for t in got] == [("its own run", None)]


def test_a_backends_seat_llm_that_takes_only_the_seat_still_plays_every_seat() -> None:
    # written before workflows said how many seats an episode has: its one model plays them all
    from beyondagent_core.runtime.seats import told_seats

    llms = {0: ScriptedLLM(["a b c", "d"]), 1: ScriptedLLM(["x", "y z"])}
    runner = EpisodeRunner(ReactWorkflow(ReactConfig(max_turns=5)), lambda: Race())
    zero, one = asyncio.run(runner.run_seats(Task("race-1"), lambda seat: llms[seat]))
    assert (zero.error, one.error) == (None, None) and (zero.reward.score, one.reward.score) == (1.0, 0.0)
    keyword = lambda seat, seats=None: seats  # noqa: E731 - the current form is passed through as it is
    assert told_seats(keyword) is keyword and told_seats(lambda seat: seat)(3, seats=2) == 3
