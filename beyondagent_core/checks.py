"""Range checks for config fields: one attrs validator for every number a spec can set.

    lr: float = attrs.field(default=1e-6, validator=number(gt=0))
    group_size: int = attrs.field(default=8, validator=number(ge=1))

A value out of range, NaN or infinite (`.nan`, `.inf` are valid YAML floats) raises
`FieldRangeError`, which names the field; the spec loader adds the section's key path, so the
user reads `algorithm.clip_ratio must be > 0, got nan`. None passes (optional fields).

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


def number(*, gt: float | None = None, ge: float | None = None, lt: float | None = None,
           le: float | None = None) -> Callable[[Any, attrs.Attribute, Any], None]:
    """A validator: a finite number (not a bool) within the given bounds, or None."""
    bounds = [(op, bound) for op, bound in ((">", gt), (">=", ge), ("<", lt), ("<=", le)) if bound is not None]
    wanted = " and ".join(f"{op} {bound:g}" for op, bound in bounds) or "a finite number"

    def check(instance: Any, attribute: attrs.Attribute, value: Any) -> None:
        if value is None:
            return
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise FieldRangeError(attribute.name, f"must be a number ({wanted}), got {value!r}")
        if not math.isfinite(value):
            raise FieldRangeError(attribute.name, f"must be a finite number ({wanted}), got {value!r}")
        for op, bound in bounds:
            ok = {">": value > bound, ">=": value >= bound, "<": value < bound, "<=": value <= bound}[op]
            if not ok:
                raise FieldRangeError(attribute.name, f"must be {wanted}, got {value!r}")

    return check


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
