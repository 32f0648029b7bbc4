"""What an eval is asked to do (`EvalSettings`), and the bounds of each number.

The command's options (`command.py`, checked as they are parsed) and the settings (checked when
built, for library callers) share these bounds. `k` and `limit` are bounded because an eval's
cost is tasks x k episodes: a slip of the keyboard (`--k 80000`) is a usage error, not a week
of rollouts.
"""

from __future__ import annotations

import attrs

from beyondagent_core.arguments import SEED_MAX
from beyondagent_core.checks import number

SPLITS = ("val", "train")
K_MAX = 1024  # samples per task (pass@1024 is as far as published evals go)
LIMIT_MAX = 10_000_000  # tasks
CONCURRENCY_MAX = 4096  # episodes in flight
TEMPERATURE_MAX = 10.0


@attrs.frozen
class EvalSettings:
    split: str = attrs.field(default="val", validator=attrs.validators.in_(SPLITS))
    k: int = attrs.field(default=8, validator=number(ge=1, le=K_MAX))
    temperature: float = attrs.field(default=1.0, validator=number(ge=0, le=TEMPERATURE_MAX))
    limit: int | None = attrs.field(default=None, validator=number(ge=1, le=LIMIT_MAX))
    concurrency: int = attrs.field(default=16, validator=number(ge=1, le=CONCURRENCY_MAX))
    seed: int = attrs.field(default=0, validator=number(ge=0, le=SEED_MAX))
