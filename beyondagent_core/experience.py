"""The experience contract: lessons learned from finished episodes, stored and retrieved per task.

Self-navigating (AgentEvolver): after a training step, finished trajectories are summarized into
`Experience` records (lessons from a success, a failure, or a success/failure comparison within a
group; offline, a hindsight record of a successful action sequence). An `ExperienceStore` keeps
them across runs and retrieves the most relevant ones for a task; guided rollouts show them to
the policy. The store is a component kind (`beyondagent_experience_stores`), selected by the
spec's `experience` section (`ExperienceBlock` holds the keys every store shares; the rest of the
block is the store's own config).
"""

from __future__ import annotations

import hashlib
from typing import Any

import attrs

from beyondagent_core.checks import number

EXPERIENCE_KINDS = ("success", "failure", "comparison", "hindsight")


def _normalized(text: str) -> str:
    return " ".join(text.lower().split())


@attrs.frozen
class Experience:
    """One lesson: `text` is what a guided rollout is shown.

    `task_id` is the task it was learned from (retrieval may use it for any similar task);
    `kind` how it was made; `outcome` that episode's reward; `source_run` the run that made it.
    `experience_id` is a hash of the normalized text, so near-verbatim repeats deduplicate.
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
    """

    name: str | None = None
    mode: str = attrs.field(default="mixed", validator=attrs.validators.in_(("woexp", "mixed", "all")))
    ratio: float = attrs.field(default=0.5, validator=number(ge=0, le=1))
    k: int = attrs.field(default=3, validator=number(ge=1, le=64))
    training: str = attrs.field(default="strip",
                                           validator=attrs.validators.in_(("strip", "keep", "hybrid")))
    off_clip_high: float = attrs.field(default=0.6, validator=number(gt=0))
    dual_clip: float = attrs.field(default=3.0, validator=number(gt=1))
    summarize_every: int = attrs.field(default=1, validator=number(ge=1))
