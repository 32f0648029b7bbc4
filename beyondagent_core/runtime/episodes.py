"""Running one episode: a fresh env, the workflow, the judge; failures become error records.

An episode that raises (a workflow bug, an env returning a non-string observation, a judge
crash) does not stop the step: it comes back as a `Trajectory` with reward 0 and `error` set,
and is logged with its traceback. Backends count these and train on the rest. `run_seats` runs an
episode with several seats (a game the policy plays against itself) as one trajectory per seat.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from typing import Any

import attrs

from beyondagent_core.envs.local import as_opener
from beyondagent_core.judging import (
    JudgeSelector,
    as_selector,
    score_after,
    score_episode,
)
from beyondagent_core.logs import get_logger
from beyondagent_core.protocols import ChatLLM, Env, EnvOpener, Judge, Workflow
from beyondagent_core.runtime.answer_leaks import AnswerLeakGuard
from beyondagent_core.returns import ReturnError, awaited, check_trajectory, class_name
from beyondagent_core.runtime.seats import SeatLLM, told_seats
from beyondagent_core.secrets import redact
from beyondagent_core.types import Reward, Task, Trajectory, Turn

log = get_logger("beyondagent.episodes")


@attrs.define
class EpisodeRunner:
    """Runs episodes of `workflow` in envs from `make_env`, scored by each task's judge.

    `make_env` is the run's `EnvOpener` (a plain function returning a sync `Env` is run
    in-process), or None for workflows that need no env (they get `env=None`). `judge` is one
    judge for every task or a `JudgeSelector`; without one, the reward is the one the workflow
    set (the react workflow asks the env's `evaluate()`). What the workflow returns is checked
    (a `Trajectory` of `Turn`s); `describe` names it in the episode's error (the run's key and plugin).
    """

    workflow: Workflow
    make_env: EnvOpener | Callable[[], Env] | None = attrs.field(converter=as_opener)
    judge: Judge | JudgeSelector | None = attrs.field(default=None, converter=as_selector)
    describe: Callable[[Any], str] = class_name

    async def run(self, task: Task, llm: ChatLLM) -> Trajectory:
        started = time.perf_counter()
        recorder = RecordingLLM(llm, AnswerLeakGuard(task))
        try:
            trajectory = await self._run(task, recorder)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # one broken episode must not stop the step
            error = redact(f"{type(exc).__name__}: {exc}")  # kept in episode records, reports, the viewer
            log.warning("episode.failed", task=task.task_id, error=error, exc_info=True)
            trajectory = Trajectory(task=task, turns=recorder.turns(), error=error,
                                    reward=Reward(0.0, reason=f"episode failed: {error}"))
        trajectory.metrics["seconds"] = round(time.perf_counter() - started, 4)
        return trajectory

    async def run_seats(self, task: Task, seat_llm: SeatLLM) -> list[Trajectory]:
        """The episode as one trajectory per seat (`beyondagent_core.runtime.seats`): a workflow with
        `run_seats` plays every seat, `seat_llm(k)` the chat of seat k; any other workflow (or one whose
        `run` overrides the class that gave it `run_seats`: `plays_seats`) plays one, as `run` does, with
        `seat_llm(0, seats=1)`. A failure gives each seat that had a chat an error record (seat
        None when only seat 0 had one: a one-seat episode, as far as anyone can tell)."""
        seat_llm = told_seats(seat_llm)
        if not plays_seats(self.workflow):
            return [await self.run(task, seat_llm(0, seats=1))]
        play = self.workflow.run_seats
        started = time.perf_counter()
        recorders: dict[int, RecordingLLM] = {}

        def recorded(seat: int, seats: int | None = None) -> RecordingLLM:
            if seat not in recorders:
                recorders[seat] = RecordingLLM(seat_llm(seat, seats=seats), AnswerLeakGuard(task))
            return recorders[seat]

        try:
            trajectories = await self._run_seats(task, recorded, play)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # one broken episode must not stop the step
            error = redact(f"{type(exc).__name__}: {exc}")
            log.warning("episode.failed", task=task.task_id, error=error, exc_info=True)
            seats = sorted(recorders) or [0]
            trajectories = [Trajectory(task=task, turns=recorders[k].turns() if k in recorders else [], error=error,
                                       reward=Reward(0.0, reason=f"episode failed: {error}"),
                                       seat=None if seats == [0] else k) for k in seats]
        for trajectory in trajectories:
            trajectory.metrics["seconds"] = round(time.perf_counter() - started, 4)
        return trajectories

    async def _run_seats(self, task: Task, seat_llm: SeatLLM, play: Callable[..., Any]) -> list[Trajectory]:
        """`play`'s trajectories, checked and scored: a one-seat episode as `_run` scores it; the seats of a
        multi-seat one keep the env's rewards unless the task's judge reads trajectories (`score`: it
        scores each seat; a judge that needs the live env scores one-seat episodes only)."""
        judge = self.judge.for_task(task)
        who = self.describe(self.workflow)
        async with contextlib.AsyncExitStack() as stack:
            env = None
            if self.make_env is not None:
                env = await self.make_env.open()
                stack.push_async_callback(env.close)
            trajectories = check_seats(await awaited(play(task, env, seat_llm), who=who, method="run_seats"),
                                       who=who)
            if len(trajectories) == 1 and env is not None:
                await score_episode(judge, task, trajectories[0], env)
        for trajectory in trajectories:
            await score_after(judge, task, trajectory)
            if not isinstance(trajectory.reward, Reward):
                raise TypeError("the episode has no Reward: the workflow set none and no `reward` judge is configured")
        return trajectories

    async def _run(self, task: Task, llm: ChatLLM) -> Trajectory:
        judge = self.judge.for_task(task)
        if self.make_env is None:
            trajectory = await self._run_workflow(task, None, llm)
        else:
            async with contextlib.AsyncExitStack() as stack:
                env = await self.make_env.open()
                stack.push_async_callback(env.close)
                trajectory = await self._run_workflow(task, env, llm)
                await score_episode(judge, task, trajectory, env)
        await score_after(judge, task, trajectory)
        if not isinstance(trajectory.reward, Reward):
            raise TypeError("the episode has no Reward: the workflow set none and no `reward` judge is configured")
        return trajectory

    async def _run_workflow(self, task: Task, env: Any, llm: ChatLLM) -> Trajectory:
        who = self.describe(self.workflow)
        return check_trajectory(await awaited(self.workflow.run(task, env, llm), who=who, method="run"), who=who,
                                method="run")


def plays_seats(workflow: Any) -> bool:
    """Whether `workflow` plays multi-seat episodes: it has `run_seats`, and its `run` was not changed below
    the class that gave it `run_seats` (a react subclass overriding `run` is played by its own `run`)."""
    classes = type(workflow).__mro__
    seats = next((cls for cls in classes if "run_seats" in vars(cls)), None)
    if seats is None:
        return callable(getattr(workflow, "run_seats", None))  # set on the instance
    runs = next((cls for cls in classes if "run" in vars(cls)), None)
    return runs is None or issubclass(seats, runs)


def check_seats(value: Any, *, who: str) -> list[Trajectory]:
    """A workflow's `run_seats` answer: a non-empty list of checked trajectories, one per seat (their
    `seat`s distinct; None only for a one-seat episode's one trajectory)."""
    if not isinstance(value, list) or not value:
        raise ReturnError(f"{who}: run_seats() returned {type(value).__name__}; expected a non-empty list of "
                          "Trajectory, one per seat")
    trajectories = [check_trajectory(item, who=who, method="run_seats") for item in value]
    seats = [trajectory.seat for trajectory in trajectories]
    if len(trajectories) > 1 and (None in seats or len(set(seats)) != len(seats)):
        raise ReturnError(f"{who}: run_seats() returned {len(trajectories)} trajectories with the seats {seats}; "
                          "each must name its own seat (Trajectory.seat)")
    return trajectories


class RecordingLLM:
    """The workflow's LLM, remembering the conversation so far: a failed episode keeps its turns. Each
    prompt is checked first for the task's reference answer (`answer_leaks`: a synthetic task's)."""

    def __init__(self, llm: ChatLLM, guard: AnswerLeakGuard | None = None):
        self._llm = llm
        self._guard = guard
        self._messages: list = []

    async def chat(self, messages: Any, **sampling: Any) -> Turn:
        if self._guard is not None:
            self._guard.check(messages)
        turn = await self._llm.chat(messages, **sampling)
        self._messages = [*messages, turn]
        return turn

    def turns(self) -> list[Turn]:
        """The last conversation the model saw, with its reply (messages become Turns)."""
        turns = []
        for message in self._messages:
            if isinstance(message, Turn):
                turns.append(message)
            elif isinstance(message, dict):
                turns.append(Turn(role=str(message.get("role", "?")), content=str(message.get("content", ""))))
        return turns

    def __getattr__(self, name: str) -> Any:  # usage counters and the like: the wrapped LLM's
        return getattr(self._llm, name)
