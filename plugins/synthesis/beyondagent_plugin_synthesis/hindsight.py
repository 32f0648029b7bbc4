"""`hindsight` summarizer: verifiable tasks from the goals an exploration achieved, no LLM.

Envs that can say what an episode achieved (the optional env method `describe_achieved()`,
e.g. the gym envs' "Reach row 2, column 3 of this map") let the explorer record, after every
step, `trajectory.metrics["achieved"] = [{"step": i, "goals": [{"query", "goal"}, ...]}, ...]`.
Each distinct goal becomes one task: its query; `metadata = {**seed.metadata, "goal": goal}`,
so the env replays the seed's initial state and checks that goal instead of its own
objective; `ground_truth` = the assistant actions up to the step that first achieved it (a
reference solution that is known to work); `judge = "env"`; confidence 1.0.

Goals already in `known` (this seed's tasks so far) are skipped, as are prefixes outside
`[min_steps, max_steps]`; of the rest, at most `max_tasks` are kept, the later (longer,
harder) ones first unless `prefer: earlier`. Malformed entries are counted in `stats` and
skipped, never raised.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Sequence
from typing import Any

import attrs

from beyondagent_core.checks import MAX_TURNS, TURNS_WHY, names, number
from beyondagent_core.logs import get_logger
from beyondagent_core.protocols import ChatLLM
from beyondagent_core.types import Task, Trajectory

log = get_logger("beyondagent.hindsight")

PREFERENCES: tuple[str, ...] = ("later", "earlier")


def _at_least(minimum: int) -> Any:
    return number(ge=minimum, le=MAX_TURNS, why=TURNS_WHY)  # tasks and steps of one exploration


def _one_of(choices: tuple[str, ...]) -> Any:
    def check(instance: Any, attribute: attrs.Attribute, value: str) -> None:
        if value not in choices:
            raise ValueError(f"{attribute.name} must be one of {', '.join(choices)}, got {value!r}")

    return check


@attrs.define
class HindsightConfig:
    """`max_tasks`: the most tasks from one exploration. `min_steps`, `max_steps`: the length
    range of the reference action prefix (`max_steps` None: no limit). `prefer`: `later`
    keeps the goals achieved last (longer, harder) when there are more than `max_tasks`;
    `earlier` the first ones. `judge`: the reward that scores these tasks (`env`: the env
    checks the goal).
    """

    max_tasks: int = attrs.field(default=5, validator=_at_least(1))
    min_steps: int = attrs.field(default=1, validator=_at_least(1))
    max_steps: int | None = attrs.field(default=None, validator=_at_least(1))
    prefer: str = attrs.field(default="later", validator=_one_of(PREFERENCES))
    judge: str = attrs.field(default="env", metadata=names("reward"))

    def __attrs_post_init__(self) -> None:
        if self.max_steps is not None and self.max_steps < self.min_steps:
            raise ValueError(f"max_steps ({self.max_steps}) must be >= min_steps ({self.min_steps})")


@attrs.frozen
class _Achieved:
    key: str
    query: str
    goal: dict[str, Any]
    step: int


def goal_key(goal: Any) -> str:
    """A canonical text of a goal: equal goals, equal keys, whatever their key order."""
    return json.dumps(goal, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _key_or_none(goal: Any) -> str | None:
    """The goal's key, or None for a goal that is missing or not JSON (a malformed entry)."""
    if goal is None:
        return None
    try:
        return goal_key(goal)
    except (TypeError, ValueError):
        return None


class HindsightSummarizer:
    """The `Summarizer` protocol; `stats` counts goals seen, tasks made and what was skipped."""

    def __init__(self, config: HindsightConfig | None = None):
        self.config = config or HindsightConfig()
        self.stats: Counter[str] = Counter()

    async def summarize(
        self, seed: Task, trajectory: Trajectory, known: Sequence[Task], llm: ChatLLM | None = None
    ) -> list[Task]:
        actions = [turn.content for turn in trajectory.turns if turn.role == "assistant"]
        known_keys = {goal_key(task.metadata["goal"]) for task in known
                      if isinstance(task.metadata, dict) and "goal" in task.metadata}
        achieved = self._first_achieved(trajectory, len(actions))
        candidates = [a for a in achieved if a.key not in known_keys]
        self.stats["known"] += len(achieved) - len(candidates)
        in_range = [a for a in candidates if self._in_range(a.step)]
        self.stats["out_of_range"] += len(candidates) - len(in_range)
        in_range.sort(key=lambda a: a.step, reverse=self.config.prefer == "later")
        chosen = in_range[: self.config.max_tasks]
        self.stats["over_limit"] += len(in_range) - len(chosen)
        self.stats["tasks"] += len(chosen)
        return [self._task(seed, achieved, actions) for achieved in chosen]

    def _first_achieved(self, trajectory: Trajectory, n_actions: int) -> list[_Achieved]:
        """Each distinct goal with the step that first achieved it, in that order."""
        found: dict[str, _Achieved] = {}
        entries = trajectory.metrics.get("achieved") or []
        if not isinstance(entries, list):
            self.stats["malformed"] += 1
            entries = []
        for entry in entries:
            step = entry.get("step") if isinstance(entry, dict) else None
            goals = entry.get("goals") if isinstance(entry, dict) else None
            if not (isinstance(step, int) and 0 < step <= n_actions and isinstance(goals, list)):
                self.stats["malformed"] += 1
                continue
            for item in goals:
                query = item.get("query") if isinstance(item, dict) else None
                goal = item.get("goal") if isinstance(item, dict) else None
                key = _key_or_none(goal)
                if not (isinstance(query, str) and query.strip() and key is not None):
                    self.stats["malformed"] += 1
                    continue
                if key not in found:
                    found[key] = _Achieved(key=key, query=query.strip(), goal=goal, step=step)
        self.stats["goals"] += len(found)
        return list(found.values())

    def _in_range(self, step: int) -> bool:
        return step >= self.config.min_steps and (self.config.max_steps is None or step <= self.config.max_steps)

    def _task(self, seed: Task, achieved: _Achieved, actions: list[str]) -> Task:
        digest = hashlib.sha256(achieved.key.encode("utf-8")).hexdigest()[:12]
        return Task(
            task_id=f"{seed.task_id}/goal-{digest}",
            env=seed.env,
            query=achieved.query,
            ground_truth=actions[: achieved.step],
            judge=self.config.judge,
            metadata={**seed.metadata, "goal": achieved.goal},
            origin="synthetic",
            seed_task_id=seed.task_id,
            confidence=1.0,
        )
