"""Range checks for config fields: one attrs validator for every number a spec can set.

    lr: float = attrs.field(default=1e-6, validator=number(gt=0, le=MAX_LR, why=LR_WHY))
    dropout: float = attrs.field(default=0.0, validator=number(ge=0, lt=1, why=FRACTION_WHY))

A value out of range, NaN or infinite (`.nan`, `.inf` are valid YAML floats) raises
`FieldRangeError`, which names the field; the spec loader adds the section's key path, so the
user reads `algorithm.clip_ratio must be > 0, got nan`. None passes (optional fields).

Every number a spec sets has both bounds, and the upper one says why (`why`): the memory a value
would allocate, the time it would take, or where it stops meaning anything. Without one,
`algorithm.group_size: 1e23` validates and the run then hangs building its groups:

    group_size: int = attrs.field(default=8, validator=number(ge=1, le=MAX_GROUP, why=GROUP_WHY))

reads `algorithm.group_size must be <= 4096 (memory: ...), got 100000000000000000000000`.
The limits many keys share are below, each with its reason; `bounds_of` gives a field's bounds
(the test that walks every numeric key of every component's config reads them).

A field that names another component (the judge a summarizer gives its tasks) says so with
`metadata=names("reward")`: the spec loader resolves it like a `name:` key, so a typo fails
`beyondagent validate` with the closest names, not the run an hour later.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import attrs

# OmegaConf's value for a required field ("???", `omegaconf.MISSING`), for config classes:
# spelled here so that registering a plugin's configs does not import OmegaConf (~40 ms).
MISSING = "???"


class FieldRangeError(ValueError):
    """A config field's value is out of its range; `field` is the attribute's name."""

    def __init__(self, field: str, message: str):
        super().__init__(f"{field} {message}")
        self.field = field
        self.message = message


# --- limits many keys share, each with why ------------------------------------------------------

MAX_SECONDS = 7 * 24 * 3600
SECONDS_WHY = "time: a week; a limit longer than that is no limit, so leave the key unset where it may be"
MAX_STEPS = 10_000_000
STEPS_WHY = "time: ten million steps is years of training"
MAX_EPOCHS = 100_000
EPOCHS_WHY = "time: more passes than any run finishes"
MAX_TOKENS = 1 << 20
TOKENS_WHY = "memory: 1,048,576 tokens is longer than any model's context"
MAX_CHARS = 100_000_000
CHARS_WHY = "memory: 100 million characters of text held at once"
MAX_TASKS = 10_000_000
TASKS_WHY = "memory: every task is held in memory"
MAX_BATCH = 1 << 16
BATCH_WHY = "memory: every item of a batch is held at once"
MAX_GROUP = 4096
GROUP_WHY = "memory: all rollouts of a group are held at once"
MAX_CONCURRENCY = 1 << 16
CONCURRENCY_WHY = "memory: each is a request, task or thread in flight at once"
MAX_RETRIES = 1000
RETRIES_WHY = "time: each retry waits for a failed call again"
MAX_BACKOFF = 24 * 3600.0
BACKOFF_WHY = "time: a day between two tries of a call"
MAX_TURNS = 100_000
TURNS_WHY = "time: every turn is a model call"
MAX_SEED = 2**32 - 1
SEED_WHY = "meaning: random generators take 32-bit seeds"
MAX_TEMPERATURE = 100.0
TEMPERATURE_WHY = "meaning: above that, sampling is uniform over the vocabulary"
MAX_TOP_K = 10_000_000
TOP_K_WHY = "meaning: no vocabulary is larger"
MAX_REWARD = 1e6
REWARD_WHY = "meaning: rewards beyond a million swamp every other reward of a group (float precision)"
MAX_COEF = 1e4
COEF_WHY = "meaning: a coefficient this large drowns the policy loss; larger ones overflow it"
MAX_LR = 1.0
LR_WHY = "meaning: a learning rate above 1 diverges at the first update"
MAX_RATIO = 100.0
RATIO_WHY = "meaning: a ratio clipped this far from 1 is not clipped"
FRACTION_WHY = "meaning: a fraction, from 0 to 1"
MAX_EPS = 1.0
EPS_WHY = "meaning: eps only keeps a zero spread from dividing; a larger one shrinks every value it divides"
MAX_GRAD_CLIP = 1e9
GRAD_CLIP_WHY = "meaning: no gradient norm is that large, so a higher clip clips nothing"
MAX_PPO_EPOCHS = 1000
PPO_EPOCHS_WHY = "time: each is a pass of updates over a step's episodes"
MAX_STALENESS = 1000
STALENESS_WHY = "memory: the rollouts of every step in flight are held at once"
MAX_CHECKPOINTS = 10_000
CHECKPOINTS_WHY = "memory: disk space, each checkpoint is a copy of the weights"
MAX_MB = 1 << 24
MB_WHY = "memory: 16 TiB"
MAX_NODES = 100_000
NODES_WHY = "meaning: more machines or devices than any cluster has"


def number(*, gt: float | None = None, ge: float | None = None, lt: float | None = None,
           le: float | None = None, why: str = "") -> Callable[[Any, attrs.Attribute, Any], None]:
    """A validator: a finite number (not a bool) within the given bounds, or None.

    `why` says what the upper bound protects (memory, time) or where a value stops meaning
    anything; it is part of the error a value out of range gets."""
    bounds = [(op, bound) for op, bound in ((">", gt), (">=", ge), ("<", lt), ("<=", le)) if bound is not None]
    wanted = " and ".join(_bound(op, bound) for op, bound in bounds) or "a finite number"
    reason = f" ({why})" if why else ""

    def check(instance: Any, attribute: attrs.Attribute, value: Any) -> None:
        if value is None:
            return
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise FieldRangeError(attribute.name, f"must be a number ({wanted}), got {value!r}")
        if not math.isfinite(value):
            raise FieldRangeError(attribute.name, f"must be a finite number ({wanted}), got {value!r}")
        for op, bound in bounds:  # the error names the bound broken; an upper one says why
            ok = {">": value > bound, ">=": value >= bound, "<": value < bound, "<=": value <= bound}[op]
            if not ok:
                why_here = reason if op in ("<", "<=") else ""
                raise FieldRangeError(attribute.name, f"must be {_bound(op, bound)}{why_here}, got {value!r}")

    check.bounds = Bounds(gt=gt, ge=ge, lt=lt, le=le, why=why)  # type: ignore[attr-defined]
    return check


def _bound(op: str, bound: float) -> str:
    return f"{op} {bound:,}" if isinstance(bound, int) and abs(bound) >= 10_000 else f"{op} {bound:g}"


@attrs.frozen
class Bounds:
    """What a `number` validator accepts (None: no bound on that side)."""

    gt: float | None = None
    ge: float | None = None
    lt: float | None = None
    le: float | None = None
    why: str = ""

    @property
    def lower(self) -> float | None:
        return self.ge if self.ge is not None else self.gt

    @property
    def upper(self) -> float | None:
        return self.le if self.le is not None else self.lt

    def admits(self, value: float) -> bool:
        return ((self.gt is None or value > self.gt) and (self.ge is None or value >= self.ge)
                and (self.lt is None or value < self.lt) and (self.le is None or value <= self.le))


def bounds_of(field: attrs.Attribute) -> Bounds | None:
    """The bounds of `field`'s validator when it is a `number(...)` (or a wrapper that keeps its
    `bounds`), else None."""
    found = getattr(field.validator, "bounds", None)
    return found if isinstance(found, Bounds) else None


COMPONENT_KIND = "beyondagent_component"


def names(kind: str) -> dict[str, str]:
    """Field metadata: the field's value is the name of a registered component of `kind`."""
    return {COMPONENT_KIND: kind}


def component_references(config: Any, prefix: str) -> list[tuple[str, str, str]]:
    """(key path, kind, name) for each set field of `config` (nested attrs too) marked with `names`."""
    found: list[tuple[str, str, str]] = []
    if not attrs.has(type(config)):
        return found
    for field in attrs.fields(type(config)):
        value = getattr(config, field.name)
        key_path = f"{prefix}.{field.name}" if prefix else field.name
        kind = field.metadata.get(COMPONENT_KIND)
        if kind and isinstance(value, str) and value:
            found.append((key_path, kind, value))
        elif attrs.has(type(value)):
            found.extend(component_references(value, key_path))
    return found
