"""Config classes of the mixers: the keys a `mixture:` block accepts besides `name`.

Kept free of heavy imports so the registry can read them without importing the mixers.
The spec loader checks key names and types; the mixers check values when they are built.
"""

from __future__ import annotations

import attrs

from beyondagent_core.checks import EPOCHS_WHY, MAX_EPOCHS, MAX_SEED, MAX_TASKS, SEED_WHY, TASKS_WHY, number

SCHEDULES: tuple[str, ...] = ("constant", "linear")
_seed = number(ge=0, le=MAX_SEED, why=SEED_WHY)
_cap = number(ge=1, le=MAX_TASKS, why=TASKS_WHY)
_ratio = number(ge=0, le=1e6, why="meaning: a million synthetic tasks per original already takes every synthetic "
                                  "task there is")


@attrs.define
class OriginalConfig:
    """`original`: the original tasks only.

    `seed`, when set, replaces the run seed for this mixer's shuffle.
    """

    shuffle: bool = True
    seed: int | None = attrs.field(default=None, validator=_seed)


@attrs.define
class SyntheticConfig:
    """`synthetic`: the synthetic tasks only.

    `per_seed_cap`: at most this many synthetic tasks per `seed_task_id` in each epoch
    (which ones is drawn again every epoch); None keeps them all.
    """

    shuffle: bool = True
    seed: int | None = attrs.field(default=None, validator=_seed)
    per_seed_cap: int | None = attrs.field(default=None, validator=_cap)


@attrs.define
class RatioConfig:
    """`ratio`: originals plus `int(len(original) * ratio)` sampled synthetic tasks.

    The ratio of an epoch follows `schedule`: `constant` uses `synthetic_ratio` every epoch;
    `linear` goes from `synthetic_ratio` at epoch 0 to `final_ratio` at epoch
    `schedule_epochs - 1` and stays there. The synthetic count is computed from the number of
    original tasks even when `use_original` is false (AgentEvolver's semantics).
    """

    use_original: bool = True
    synthetic_ratio: float = attrs.field(default=1.0, validator=_ratio)
    schedule: str = "constant"
    final_ratio: float | None = attrs.field(default=None, validator=_ratio)
    schedule_epochs: int = attrs.field(default=1, validator=number(ge=1, le=MAX_EPOCHS, why=EPOCHS_WHY))
    per_seed_cap: int | None = attrs.field(default=None, validator=_cap)
    shuffle: bool = True
    seed: int | None = attrs.field(default=None, validator=_seed)
