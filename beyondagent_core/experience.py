"""The experience contract: lessons learned from finished episodes, stored and retrieved per task.

Self-navigating (AgentEvolver): after a training step, finished trajectories are summarized into
`Experience` records (lessons from a success, a failure, or a success/failure comparison within a
group; offline, a hindsight record of a successful action sequence, or a whole successful
trajectory kept as a worked example). An `ExperienceStore` keeps them across runs and retrieves the
most relevant ones for a task; guided rollouts show them to the policy, and prefix sampling
replays the first turns of a stored success of the same task before the policy takes over. The
store is a component kind (`beyondagent_experience_stores`), selected by the spec's `experience`
section (`ExperienceBlock` holds the keys every store shares; the rest of the block is the store's
own config).
"""

from __future__ import annotations

import hashlib
import json
from typing import TYPE_CHECKING, Any

import attrs

from beyondagent_core.checks import (
    FRACTION_WHY,
    MAX_RATIO,
    MAX_STEPS,
    RATIO_WHY,
    STEPS_WHY,
    FieldRangeError,
    number,
)

if TYPE_CHECKING:
    from beyondagent_core.types import Task

EXPERIENCE_KINDS = ("success", "failure", "comparison", "hindsight", "example")
# Task metadata that tells tasks apart without changing the problem (a gym task's seed: two seeds
# can give the same FrozenLake map; the split a task was drawn for; its index).
VOLATILE_METADATA = ("seed", "split", "index")


def _normalized(text: str) -> str:
    return " ".join(text.lower().split())


@attrs.frozen
class Experience:
    """One lesson: `text` is what a guided rollout is shown.

    `task_id` is the task it was learned from (retrieval may use it for any similar task);
    `kind` how it was made; `outcome` that episode's reward; `source_run` the run that made it.
    `experience_id` is a hash of the normalized text, so near-verbatim repeats deduplicate.
    `metadata["task_key"]` (`task_key`), where a store records it, names the problem it was learned
    on, so validation can refuse it for that problem under another id; `metadata["turns"]`, on a
    record of a successful trajectory, its model turns (`{"content", "tool_calls"}`) in order, which
    prefix sampling replays.
    """

    text: str
    kind: str = "hindsight"  # one of EXPERIENCE_KINDS
    task_id: str | None = None
    query: str | None = None
    outcome: float | None = None
    source_run: str | None = None
    step: int | None = None
    metadata: dict[str, Any] = attrs.field(factory=dict)
    experience_id: str = attrs.field()

    @experience_id.default
    def _hash(self) -> str:
        return hashlib.sha256(_normalized(self.text).encode()).hexdigest()[:16]

    def to_dict(self) -> dict[str, Any]:
        return attrs.asdict(self, recurse=False)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Experience:
        known = {field.name for field in attrs.fields(cls)}
        return cls(**{key: value for key, value in data.items() if key in known})


def task_key(task: Task) -> str:
    """The problem a task poses, as a hash: its env, its query (normalized) and its start (metadata
    without `VOLATILE_METADATA`). Two tasks with equal keys are the same problem under two ids (a
    FrozenLake map drawn by a train seed and again by a val seed; a question in both splits)."""
    start = {key: value for key, value in (task.metadata or {}).items() if key not in VOLATILE_METADATA}
    payload = json.dumps({"env": task.env, "query": _normalized(task.query or ""), "start": start},
                         sort_keys=True, default=str)
    return hashlib.sha256(payload.encode()).hexdigest()[:16]


def same_task(experience: Experience, task: Task) -> bool:
    """Whether `experience` was learned on `task` itself: the same task id, the task's seed task (or a
    synthetic task seeded from it), or the same problem under another id (`task_key`). A record of
    the task being scored is its answer, not an example: validation never shows one."""
    ids = {task.task_id, task.seed_task_id} - {None}
    metadata = experience.metadata or {}
    if experience.task_id in ids or metadata.get("seed_task_id") in ids:
        return True
    return metadata.get("task_key") is not None and metadata.get("task_key") == task_key(task)


MODES = ("woexp", "mixed", "all")
TRAINING_MODES = ("strip", "keep", "hybrid")
VAL_MODES = ("woexp", "all")


def _one_of(*choices: str) -> Any:
    """A validator whose error names the key (the spec loader adds `experience.`) and the choices."""

    def check(instance: Any, attribute: attrs.Attribute, value: Any) -> None:
        if value not in choices:
            raise FieldRangeError(attribute.name, f"must be one of {', '.join(choices)}, got {value!r}")

    return check


@attrs.define
class ExperienceBlock:
    """The spec's `experience` section keys every store shares; `name` selects the store.

    `mode`: per group, `woexp` (no rollout is guided), `mixed` (round(group_size * `ratio`) of a
    group's rollouts are shown the top `k` experiences), `all`. Validation rollouts are never
    guided. `training`: how a guided sample is trained on — `strip` removes the experience text
    from its prompt before the loss (the sample is then off-policy: its ratio is clipped above at
    1 + `off_clip_high` and dual-clipped at `dual_clip`), `keep` trains on the prompt it saw,
    `hybrid` strips the successful ones and keeps the rest. `summarize_every` steps, finished
    trajectories are summarized into new experiences.

    `prefix_ratio`: round(group_size * prefix_ratio) of a group's unguided rollouts start from a
    stored successful trajectory of the same task: its first turns (`prefix_fraction` of them,
    at least one, never all) are replayed into the env, then the policy continues; the replayed
    turns are context, never trained as the policy's tokens. `val_mode`: `woexp` (validation is
    never guided) or `all` (each validation rollout is shown the top `k` experiences, never one
    learned on the task being scored).
    """

    name: str | None = None
    mode: str = attrs.field(default="mixed", validator=_one_of(*MODES))
    ratio: float = attrs.field(default=0.5, validator=number(ge=0, le=1, why=FRACTION_WHY))
    k: int = attrs.field(default=3, validator=number(ge=1, le=64, why="memory: every experience shown lengthens "
                                                                "the prompt"))
    training: str = attrs.field(default="strip", validator=_one_of(*TRAINING_MODES))
    off_clip_high: float = attrs.field(default=0.6, validator=number(gt=0, le=MAX_RATIO, why=RATIO_WHY))
    dual_clip: float = attrs.field(default=3.0, validator=number(gt=1, le=MAX_RATIO, why=RATIO_WHY))
    summarize_every: int = attrs.field(default=1, validator=number(ge=1, le=MAX_STEPS, why=STEPS_WHY))
    prefix_ratio: float = attrs.field(default=0.0, validator=number(ge=0, le=1, why=FRACTION_WHY))
    prefix_fraction: float = attrs.field(default=0.5, validator=number(gt=0, le=1, why=FRACTION_WHY))
    val_mode: str = attrs.field(default="woexp", validator=_one_of(*VAL_MODES))

    def __attrs_post_init__(self) -> None:
        if self.prefix_ratio and self.mode == "all":
            raise FieldRangeError("prefix_ratio", f"must be 0 with experience.mode all (every rollout is shown "
                                                  f"experiences; prefixes start unguided ones), "
                                                  f"got {self.prefix_ratio}")
        if self.mode == "mixed" and self.ratio + self.prefix_ratio > 1:
            raise FieldRangeError("prefix_ratio", f"must be <= 1 - experience.ratio ({1 - self.ratio:g}): guided and "
                                                  f"prefix-started rollouts are different rollouts of a group, got "
                                                  f"{self.prefix_ratio}")
