"""The shared text wrapper: a gymnasium toy-text game played as a chat, one env step per turn.

A game subclass says how to build its gymnasium env for a task and how to put a state into
words; `TextGymEnv` does the rest: the system and first user message on reset, reading the
model's answer with `parse_action`, taking one gymnasium step per valid answer (none for an
invalid one, which scores `invalid_action_reward`: by default what a move costs, `step_cost`,
so not acting never beats acting), counting turns against `max_steps`, and judging the episode.

gymnasium's env classes are built directly rather than through `gymnasium.make`, whose ids
changed within 1.x (Taxi-v3 became Taxi-v4), so `max_steps` is the only time limit. Every
turn counts against it, invalid answers too, so a model that never answers validly still
ends its episode.

Two optional env methods serve exploration: `valid_actions()` (the actions worth taking now)
and `describe_achieved()` (the goals the episode has achieved so far, see `goals.py`). A task
with `metadata["goal"]` is goal-conditioned: the same start, its query (or the goal's own
wording) as the first message, step reward 1 when the goal is achieved (which ends the
episode) and 0 otherwise, and `evaluate()` succeeds exactly when the goal was achieved.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import attrs

from beyondagent_core import EnvReset, EnvStep, Reward, Task
from beyondagent_plugin_gym.actions import parse_action
from beyondagent_plugin_gym.config import GAMES, check_episode_config
from beyondagent_plugin_gym.goals import Goal, bad_goal, goal_key
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
    start_state: int = 0
    goal: Goal | None = None
    """The goal of a goal-conditioned task (None: the game's own objective)."""
    goal_reached: bool = False
    achieved: list[Goal] = attrs.field(factory=list)
    """Goals this episode's transitions achieved, in the order first achieved."""
    spoiled: str | None = None
    """Why later transitions achieve nothing any more (e.g. the player fell off the cliff)."""

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
    step_cost: ClassVar[float] = 0.0
    """What a plain move costs in the game: an invalid answer's reward when `invalid_action_reward` is unset."""
    success_text: ClassVar[str] = "reached the goal"
    unfinished_text: ClassVar[str] = "did not reach the goal"

    def __init__(self, config: Any):
        check_episode_config(config)
        self.config = config
        self._gym: Any = None
        self._episode: Episode | None = None

    @property
    def inline_calls(self) -> bool:
        """Toy-text games step in microseconds and never block: in-process, their calls run on the event loop,
        unless `step_latency_ms` makes each step sleep (a slow env for benchmarks: worker threads then)."""
        return not self.config.step_latency_ms

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

    def valid_action_indices(self, state: int) -> list[int]:
        """The actions worth taking in `state` (default: all of them)."""
        return list(range(len(self.actions)))

    def check_goal(self, task_id: str, goal: Any) -> Goal:
        """`goal` (a task's `metadata["goal"]`) checked against the current start; ValueError if bad."""
        raise ValueError(f"task {task_id!r}: {self.name} has no goal-conditioned tasks")

    def cell(self, state: int) -> tuple[int, int] | None:
        """The (row, col) the player is on in `state`, which `reach` goals name (None: a game without cells)."""
        return None

    def goal_query(self, goal: Goal) -> str:
        """The natural-language task that asks for `goal`."""
        raise NotImplementedError

    def goals_reached(self, start: int, before: int, action: int, after: int, reward: float) -> list[Goal]:
        """The goals the transition `before -action-> after` achieves (`start`: the episode's first state)."""
        return []

    def spoils_goals(self, before: int, action: int, after: int, reward: float) -> str | None:
        """Why this transition makes every goal fail from now on (None: it does not)."""
        return None

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
        goal = self.check_goal(task.task_id, task.metadata["goal"]) if "goal" in task.metadata else None
        if goal is not None and goal["kind"] == "reach" and self.cell(state) == (goal["row"], goal["col"]):
            # arriving where the episode began is never reported (goals_reached skips the start), so such
            # a task could not be won: refused like a goal on a hole
            raise bad_goal(task.task_id, goal, "is the cell the episode starts on: there is nothing to reach")
        self._episode = Episode(task_id=task.task_id, seed=start.seed, state=state, start_state=state, goal=goal)
        query = task.query or (self.default_goal() if goal is None else self.goal_query(goal))
        messages = [
            {"role": "system", "content": self.instructions()},
            {"role": "user", "content": self._ask(f"{query}\n{self.describe(state)}", over=False)},
        ]
        metadata = start.metadata if goal is None else {**start.metadata, "goal": goal}
        info = {"task_id": task.task_id, "metadata": metadata, "actions": list(self.actions),
                "max_steps": self.config.max_steps}
        return EnvReset(messages=messages, info=info)

    def valid_actions(self) -> list[str]:
        """The actions worth taking now, as names `step` accepts; none once the episode is over."""
        episode = self._current("valid_actions")
        if episode.over:
            return []
        return [self.actions[index] for index in self.valid_action_indices(episode.state)]

    def describe_achieved(self) -> list[dict[str, Any]]:
        """The goals achieved so far: `[{"query": ..., "goal": {...}}]`, in the order first achieved."""
        episode = self._current("describe_achieved")
        return [{"query": self.goal_query(goal), "goal": dict(goal)} for goal in episode.achieved]

    def step(self, action: Message) -> EnvStep:
        if self.config.step_latency_ms:  # a slow env, for benchmarks (config.py)
            time.sleep(self.config.step_latency_ms / 1000)
        episode = self._current("step")
        if episode.over:
            raise RuntimeError(f"{self.name}: step() after the episode ended; call reset() first")
        text = _content(action)
        parsed = parse_action(text, self.actions, self.synonyms)
        episode.steps += 1
        if parsed.index is None:
            episode.invalid_actions += 1
            reward = self._invalid_action_reward(episode)
            observation = (f"Invalid action {_quote(text)} ({parsed.problem}). "
                           f"Answer with one of: {', '.join(self.actions)}.")
        else:
            before = episode.state
            state, gym_reward, terminated, truncated, _ = self._gym.step(parsed.index)
            episode.state, reward = int(state), float(gym_reward)
            episode.ended_by_game, episode.truncated = bool(terminated), bool(truncated)
            observation = self.describe(episode.state, parsed.index, reward, bool(terminated))
            reached = self._record_goals(episode, before, parsed.index, reward)
            if episode.goal is not None:
                reward, note = self._goal_outcome(episode, reached)
                observation += note
        if not episode.over and episode.steps >= self.config.max_steps:
            episode.out_of_steps = True
            observation += f"\nOut of steps: the episode ends after {self.config.max_steps} steps."
        episode.score += reward
        observation = self._ask(observation, over=episode.over)
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

    def _ask(self, observation: str, *, over: bool) -> str:
        """`observation`, closed by the config's `turn_prompt` when a move is expected next."""
        prompt = self.config.turn_prompt
        return observation if over or prompt is None else f"{observation}\n{prompt}"

    def evaluate(self) -> Reward:
        episode = self._current("evaluate")
        if episode.goal is not None:
            return self._evaluate_goal(episode)
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

    def _invalid_action_reward(self, episode: Episode) -> float:
        """The configured penalty, else what a move costs (0 in a goal task, whose steps score 0 or 1)."""
        if self.config.invalid_action_reward is not None:
            return float(self.config.invalid_action_reward)
        return 0.0 if episode.goal is not None else float(self.step_cost)

    def _current(self, method: str) -> Episode:
        if self._episode is None:
            raise RuntimeError(f"{self.name}: {method}() before reset()")
        return self._episode

    # --- goals ----------------------------------------------------------------------------

    def _record_goals(self, episode: Episode, before: int, action: int, reward: float) -> list[str]:
        """Add the goals this transition achieves to `episode.achieved`; return the keys of all it achieves."""
        if episode.spoiled is not None:
            return []
        episode.spoiled = self.spoils_goals(before, action, episode.state, reward)
        if episode.spoiled is not None:
            return []
        goals = self.goals_reached(episode.start_state, before, action, episode.state, reward)
        known = {goal_key(goal) for goal in episode.achieved}
        for goal in goals:
            if goal_key(goal) not in known:
                known.add(goal_key(goal))
                episode.achieved.append(goal)
        return [goal_key(goal) for goal in goals]

    def _goal_outcome(self, episode: Episode, reached: list[str]) -> tuple[float, str]:
        """A goal task's step reward and the line the observation gains (the game's own reward is not used)."""
        assert episode.goal is not None
        if goal_key(episode.goal) in reached:
            episode.goal_reached = episode.ended_by_game = True
            return 1.0, f"\nYou achieved the goal: {self.goal_query(episode.goal)}"
        if episode.spoiled is not None:
            episode.ended_by_game = True
            return 0.0, f"\nThe goal can no longer be achieved ({episode.spoiled}); the episode is over."
        if episode.ended_by_game:
            return 0.0, "\nThe game is over without achieving the goal."
        return 0.0, ""

    def _evaluate_goal(self, episode: Episode) -> Reward:
        assert episode.goal is not None
        steps = _count(episode.steps, "step")
        if episode.goal_reached:
            outcome, reason = "success", f"achieved the goal in {steps}"
        elif episode.spoiled is not None:
            outcome, reason = "failed", f"{episode.spoiled} after {steps}; the goal was not achieved"
        elif episode.ended_by_game:
            ended = self.success_text if self.is_success(episode.state) else self.failure_text(episode.state)
            outcome, reason = "failed", f"the game ended ({ended}) after {steps} without achieving the goal"
        elif episode.over:
            outcome, reason = "out_of_steps", f"did not achieve the goal within max_steps={self.config.max_steps}"
        else:
            outcome, reason = "in_progress", f"has not achieved the goal yet ({steps} so far)"
        if episode.invalid_actions:
            reason += f"; {_count(episode.invalid_actions, 'invalid action')}"
        details = {"outcome": outcome, "steps": episode.steps, "invalid_actions": episode.invalid_actions,
                   "seed": episode.seed, "max_steps": self.config.max_steps, "goal": dict(episode.goal)}
        return Reward(score=float(episode.score), success=episode.goal_reached, reason=reason, details=details)



def mark(rows: Sequence[str], row: int, col: int, marker: str) -> list[str]:
    """The grid `rows` with the cell at (`row`, `col`) replaced by `marker`."""
    marked = list(rows)
    marked[row] = marked[row][:col] + marker + marked[row][col + 1:]
    return marked


def moves_on_grid(state: int, n_rows: int, n_cols: int, actions: Sequence[str]) -> list[int]:
    """The indices of the moves in `actions` (named left/down/right/up) that stay on an n_rows x n_cols grid."""
    row, col = divmod(state, n_cols)
    stays = {"left": col > 0, "down": row < n_rows - 1, "right": col < n_cols - 1, "up": row > 0}
    return [index for index, name in enumerate(actions) if stays[name]]


def _content(action: Any) -> str:
    """The text of an assistant message; anything else reads as no answer."""
    content = action.get("content") if isinstance(action, Mapping) else None
    return content if isinstance(content, str) else ""


def _quote(text: str, limit: int = 40) -> str:
    line = " ".join(text.split())
    return repr(line if len(line) <= limit else line[: limit - 3] + "...")


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"
