"""The data model every component shares: Task, Turn, Trajectory, Reward.

Records are attrs classes, frozen where they can be. Each serializes to a plain dict with a
`schema_version` field (`to_dict`/`from_dict`), so JSON-lines files written today keep
loading when fields are added later. `from_dict` raises `ValueError` with a one-line reason;
the readers in `jsonl.py` turn that into an error naming the file and line.
"""

from __future__ import annotations

from typing import Any, Literal

import attrs

SCHEMA_VERSION = 1

Origin = Literal["original", "synthetic"]
ORIGINS: tuple[str, ...] = ("original", "synthetic")


@attrs.frozen
class Task:
    """One training or evaluation task.

    `query` None means "the environment's own question for this task"; `ground_truth` is the
    reference answer or solution (any JSON value; None when unknown); `judge` names the reward
    that scores it (None: the spec's default). Synthetic tasks replay their seed task's initial
    environment state with a new query, so they carry `seed_task_id` and the summarizer's
    `confidence`.
    """

    task_id: str
    env: str | None = None
    query: str | None = None
    ground_truth: Any = None
    judge: str | None = None
    metadata: dict[str, Any] = attrs.field(factory=dict)
    origin: Origin = "original"
    open_query: bool = False
    seed_task_id: str | None = None
    confidence: float | None = None

    def __attrs_post_init__(self) -> None:
        if not isinstance(self.task_id, str) or not self.task_id:
            raise ValueError(f"task_id must be a non-empty string, got {self.task_id!r}")
        if self.origin not in ORIGINS:
            raise ValueError(f"origin must be one of {', '.join(ORIGINS)}, got {self.origin!r}")
        # Checked, never coerced: a list query would otherwise become the prompt "['x']".
        for name in ("env", "query", "judge", "seed_task_id"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, str):
                raise ValueError(f"{name} must be a string or null, got {type(value).__name__} {_short(value)}")
        if not isinstance(self.metadata, dict):
            raise ValueError(f"metadata must be an object, got {type(self.metadata).__name__} {_short(self.metadata)}")
        if not isinstance(self.open_query, bool):
            raise ValueError(f"open_query must be true or false, got {_short(self.open_query)}")
        if self.confidence is not None and (isinstance(self.confidence, bool)
                                            or not isinstance(self.confidence, (int, float))):
            raise ValueError(f"confidence must be a number or null, got {_short(self.confidence)}")

    def to_dict(self) -> dict[str, Any]:
        return {"schema_version": SCHEMA_VERSION, **attrs.asdict(self, recurse=False)}

    @classmethod
    def from_dict(cls, data: Any) -> Task:
        return cls(**_fields_of(cls, data))


@attrs.frozen
class Reward:
    """A judge's verdict: `score` drives training, `success` is the pass/fail view of it."""

    score: float
    success: bool = False
    reason: str = ""
    details: dict[str, Any] = attrs.field(factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"schema_version": SCHEMA_VERSION, **attrs.asdict(self, recurse=False)}

    @classmethod
    def from_dict(cls, data: Any) -> Reward:
        fields = _fields_of(cls, data)
        fields["score"] = float(fields["score"])
        return cls(**fields)


@attrs.frozen
class Turn:
    """One message of an episode.

    For turns the model generated, `token_ids` and `logprobs` are exactly what the model
    produced (never re-tokenized), so training sees the same tokens the rollout sampled, and
    `finish_reason` says why the turn ended, as OpenAI names it: `"stop"` (the model ended it)
    or `"length"` (cut off at its token limit); None when unknown. Judges read it (a cut-off
    answer is not a finished one).
    """

    role: str
    content: str
    tool_calls: list[dict[str, Any]] | None = None
    token_ids: list[int] | None = None
    logprobs: list[float] | None = None
    finish_reason: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return attrs.asdict(self, recurse=False)

    @classmethod
    def from_dict(cls, data: Any) -> Turn:
        return cls(**_fields_of(cls, data, versioned=False))


@attrs.define
class Trajectory:
    """One episode: the task, its turns in order, the reward, and per-episode metrics.

    `error` holds a one-line reason when the episode failed (the episode then scores 0 and
    training goes on). `seat` is the player this trajectory is, in an episode with several seats (a
    game the policy plays against itself: `beyondagent_core.runtime.seats`); None in a one-seat episode
    (and then left out of `to_dict`, so its records read as they always did).
    """

    task: Task
    turns: list[Turn] = attrs.field(factory=list)
    reward: Reward | None = None
    terminated: bool = False
    metrics: dict[str, Any] = attrs.field(factory=dict)
    error: str | None = None
    seat: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": SCHEMA_VERSION,
            "task": self.task.to_dict(),
            "turns": [turn.to_dict() for turn in self.turns],
            "reward": None if self.reward is None else self.reward.to_dict(),
            "terminated": self.terminated,
            "metrics": dict(self.metrics),
            "error": self.error,
            **({} if self.seat is None else {"seat": self.seat}),
        }

    @classmethod
    def from_dict(cls, data: Any) -> Trajectory:
        fields = _fields_of(cls, data)
        seat = fields.get("seat")
        if seat is not None and (isinstance(seat, bool) or not isinstance(seat, int) or seat < 0):
            raise ValueError(f"seat must be a non-negative integer or null, got {_short(seat)}")
        fields["task"] = Task.from_dict(fields["task"])
        fields["turns"] = [Turn.from_dict(turn) for turn in fields.get("turns") or []]
        if fields.get("reward") is not None:
            fields["reward"] = Reward.from_dict(fields["reward"])
        return cls(**fields)


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _fields_of(cls: type, data: Any, *, versioned: bool = True) -> dict[str, Any]:
    """Check a serialized record against `cls` and return its constructor arguments."""
    if not isinstance(data, dict):
        raise ValueError(f"a {cls.__name__} record must be a JSON object, got {type(data).__name__}")
    data = dict(data)
    if versioned:
        version = data.pop("schema_version", 1)
        if isinstance(version, bool) or not isinstance(version, int) or version < 1:
            raise ValueError(f"schema_version must be a positive integer, got {version!r}")
        if version > SCHEMA_VERSION:
            raise ValueError(
                f"schema_version {version} is newer than this beyondagent understands "
                f"({SCHEMA_VERSION}); upgrade beyondagent"
            )
    fields = attrs.fields_dict(cls)
    unknown = sorted(set(data) - set(fields))
    if unknown:
        raise ValueError(f"unknown field(s) for {cls.__name__}: {', '.join(unknown)}")
    missing = [
        name for name, field in fields.items()
        if field.default is attrs.NOTHING and name not in data
    ]
    if missing:
        raise ValueError(f"missing required field(s) for {cls.__name__}: {', '.join(missing)}")
    return data


def count_by_origin(tasks: list[Task] | tuple[Task, ...]) -> dict[str, int]:
    """How many of `tasks` are original and how many synthetic."""
    counts = dict.fromkeys(ORIGINS, 0)
    for task in tasks:
        counts[task.origin] += 1
    return counts
