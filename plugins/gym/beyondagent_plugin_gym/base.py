"""The shared text wrapper: a gymnasium toy-text game played as a chat, one env step per turn.

A game subclass says how to build its gymnasium env for a task and how to put a state into
words; `TextGymEnv` does the rest: the system and first user message on reset, reading the
model's answer with `parse_action`, taking one gymnasium step per valid answer (none for an
invalid one), counting turns against `max_steps`, and judging the episode.

gymnasium's env classes are built directly rather than through `gymnasium.make`, whose ids
changed within 1.x (Taxi-v3 became Taxi-v4), so `max_steps` is the only time limit. Every
turn counts against it, invalid answers too, so a model that never answers validly still
ends its episode.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import attrs

from beyondagent_core import EnvReset, EnvStep, Reward, Task
from beyondagent_plugin_gym.actions import parse_action
from beyondagent_plugin_gym.config import GAMES, check_episode_config
from beyondagent_plugin_gym.seeds import check_split, split_task_id

Message = dict[str, Any]


@attrs.define
class Episode:
    """What the wrapper tracks of the episode in progress."""

    task_id: str
    seed: int
    state: int
    steps: int = 0
    invalid_actions: int = 0
    score: float = 0.0
    ended_by_game: bool = False
    truncated: bool = False
    out_of_steps: bool = False

    @property
    def over(self) -> bool:
        return self.ended_by_game or self.truncated or self.out_of_steps


@attrs.frozen
class Start:
    """A task's start: the gymnasium env reset into it, its seed and state, and what rebuilds it.

    `metadata` is what `Task.metadata` must hold to reset to this exact start again; reset
    reports it in `info["metadata"]`, and the `gym_tasks` source stores it in its tasks.
    """

    env: Any
    seed: int
    state: int
    metadata: dict[str, Any]


class TextGymEnv:
    """One episode at a time of a gymnasium toy-text game, in chat messages (the `Env` protocol)."""

    name: ClassVar[str]
    actions: ClassVar[tuple[str, ...]]
    """Action names in gymnasium's order: `actions[i]` is gymnasium's action `i`."""
    synonyms: ClassVar[Mapping[str, str]] = {}
    success_text: ClassVar[str] = "reached the goal"
    unfinished_text: ClassVar[str] = "did not reach the goal"

    def __init__(self, config: Any):
        check_episode_config(config)
        self.config = config
        self._gym: Any = None
        self._episode: Episode | None = None

    @property
    def gym_env(self) -> Any:
        """The gymnasium env playing the current episode (None before reset and after close)."""
        return self._gym

    # --- what each game provides ----------------------------------------------------------

    def start(self, task: Task) -> Start:
        """Build (or reuse) the gymnasium env and reset it into `task`'s start.

        Bad metadata raises ValueError with a one-line reason.
        """
        raise NotImplementedError

    def instructions(self) -> str:
        """The system message: the game, its rules, the legend, the actions, the answer format."""
        raise NotImplementedError

    def answer_format(self) -> str:
        """The closing sentence of every game's instructions."""
        return (f"Valid actions: {', '.join(self.actions)}. Reply with exactly one action per turn, "
                f"as 'Action: <action>', e.g. 'Action: {self.actions[0]}'.")

    def default_goal(self) -> str:
        raise NotImplementedError

    def describe(self, state: int, action: int | None = None, reward: float | None = None,
                 terminated: bool = False) -> str:
        """The observation text of `state`, reached by `action` (None right after reset)."""
        raise NotImplementedError

    def is_success(self, state: int) -> bool:
        """Whether gymnasium ending the episode in `state` means the task was solved."""
        return True

    def failure_text(self, state: int) -> str:
        """How an episode that gymnasium ended without success ended (e.g. a hole)."""
        return self.unfinished_text

    # --- the Env protocol -----------------------------------------------------------------

    def task_ids(self, split: str) -> list[str]:
        """The ids of this env's tasks in `split`; they reset to the `gym_tasks` source's tasks."""
        check_split(split)
        return [split_task_id(self.name, split, index) for index in range(self.config.tasks_per_split)]

    def reset(self, task: Task) -> EnvReset:
        if task.env in GAMES and task.env != self.name:
            raise ValueError(f"task {task.task_id!r} is a {task.env} task, but this env plays {self.name}")
        self._episode = None
        start = self.start(task)
        if self._gym is not None and self._gym is not start.env:
            self._gym.close()
        self._gym = start.env
        state = start.state
        self._episode = Episode(task_id=task.task_id, seed=start.seed, state=state)
        goal = task.query or self.default_goal()
        messages = [
            {"role": "system", "content": self.instructions()},
            {"role": "user", "content": f"{goal}\n{self.describe(state)}"},
        ]
        info = {"task_id": task.task_id, "metadata": start.metadata, "actions": list(self.actions),
                "max_steps": self.config.max_steps}
        return EnvReset(messages=messages, info=info)

    def step(self, action: Message) -> EnvStep:
        episode = self._current("step")
        if episode.over:
            raise RuntimeError(f"{self.name}: step() after the episode ended; call reset() first")
        text = _content(action)
        parsed = parse_action(text, self.actions, self.synonyms)
        episode.steps += 1
        if parsed.index is None:
            episode.invalid_actions += 1
            reward = float(self.config.invalid_action_reward)
            observation = (f"Invalid action {_quote(text)} ({parsed.problem}). "
                           f"Answer with one of: {', '.join(self.actions)}.")
        else:
            state, gym_reward, terminated, truncated, _ = self._gym.step(parsed.index)
            episode.state, reward = int(state), float(gym_reward)
            episode.ended_by_game, episode.truncated = bool(terminated), bool(truncated)
            observation = self.describe(episode.state, parsed.index, reward, episode.ended_by_game)
        if not episode.over and episode.steps >= self.config.max_steps:
            episode.out_of_steps = True
            observation += f"\nOut of steps: the episode ends after {self.config.max_steps} steps."
        episode.score += reward
        info: dict[str, Any] = {
            "action": None if parsed.index is None else self.actions[parsed.index],
            "valid": parsed.index is not None,
            "steps": episode.steps,
            "invalid_actions": episode.invalid_actions,
            "state": episode.state,
        }
        if parsed.problem:
            info["problem"] = parsed.problem
        return EnvStep(observation=[{"role": "user", "content": observation}], reward=reward,
                       terminated=episode.over, info=info)

    def evaluate(self) -> Reward:
        episode = self._current("evaluate")
        success = episode.ended_by_game and self.is_success(episode.state)
        if success:
            outcome, reason = "success", f"{self.success_text} in {_count(episode.steps, 'step')}"
        elif episode.ended_by_game:
            outcome = "failed"
            reason = f"{self.failure_text(episode.state)} after {_count(episode.steps, 'step')}"
        elif episode.over:
            outcome, reason = "out_of_steps", f"{self.unfinished_text} within max_steps={self.config.max_steps}"
        else:
            outcome, reason = "in_progress", f"{self.unfinished_text} yet ({_count(episode.steps, 'step')} so far)"
        if episode.invalid_actions:
            reason += f"; {_count(episode.invalid_actions, 'invalid action')}"
        details = {"outcome": outcome, "steps": episode.steps, "invalid_actions": episode.invalid_actions,
                   "seed": episode.seed, "max_steps": self.config.max_steps}
        return Reward(score=float(episode.score), success=success, reason=reason, details=details)

    def close(self) -> None:
        """Close the gymnasium env; calling it again does nothing."""
        if self._gym is not None:
            self._gym.close()
            self._gym = None

    def _current(self, method: str) -> Episode:
        if self._episode is None:
            raise RuntimeError(f"{self.name}: {method}() before reset()")
        return self._episode



def mark(rows: Sequence[str], row: int, col: int, marker: str) -> list[str]:
    """The grid `rows` with the cell at (`row`, `col`) replaced by `marker`."""
    marked = list(rows)
    marked[row] = marked[row][:col] + marker + marked[row][col + 1:]
    return marked


def _content(action: Any) -> str:
    """The text of an assistant message; anything else reads as no answer."""
    content = action.get("content") if isinstance(action, Mapping) else None
    return content if isinstance(content, str) else ""


def _quote(text: str, limit: int = 40) -> str:
    line = " ".join(text.split())
    return repr(line if len(line) <= limit else line[: limit - 3] + "...")


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"
