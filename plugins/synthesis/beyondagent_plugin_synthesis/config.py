"""The `feasibility` filter's settings, apart from the filter (`feasibility.py`: asyncio, the runner):
listing plugins and checking a spec read only this (the `llm` plugin's feasibility config extends it)."""

from __future__ import annotations

from typing import Any

import attrs

from beyondagent_core.checks import CONCURRENCY_WHY, MAX_CONCURRENCY, MAX_RETRIES, RETRIES_WHY, number

SOLVERS: tuple[str, ...] = ("replay",)  # the llm solver: beyondagent-plugin-llm


def _solver(instance: Any, attribute: attrs.Attribute, value: str) -> None:
    if value not in SOLVERS:
        raise ValueError(f"{attribute.name} must be one of {', '.join(SOLVERS)}, got {value!r}")


@attrs.define
class FeasibilityConfig:
    """`solver`: `replay` (replay the reference, no LLM). `attempts`: runs per task; one success
    keeps it. `rewrite_reference`: replace a kept task's reference with the successful run's
    actions. `concurrency`: episodes at once.
    """

    solver: str = attrs.field(default="replay", validator=_solver)
    attempts: int = attrs.field(default=1, validator=number(ge=1, le=MAX_RETRIES, why=RETRIES_WHY))
    rewrite_reference: bool = False
    concurrency: int = attrs.field(default=8, validator=number(ge=1, le=MAX_CONCURRENCY, why=CONCURRENCY_WHY))
