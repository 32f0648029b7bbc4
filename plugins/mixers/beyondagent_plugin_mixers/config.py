"""Config classes of the mixers: the keys a `mixture:` block accepts besides `name`.

Kept free of heavy imports so the registry can read them without importing the mixers.
The spec loader checks key names and types; the mixers check values when they are built.
"""

from __future__ import annotations

import attrs

SCHEDULES: tuple[str, ...] = ("constant", "linear")


@attrs.define
class OriginalConfig:
    """`original`: the original tasks only.

    `seed`, when set, replaces the run seed for this mixer's shuffle.
    """

    shuffle: bool = True
    seed: int | None = None


@attrs.define
class SyntheticConfig:
    """`synthetic`: the synthetic tasks only.

    `per_seed_cap`: at most this many synthetic tasks per `seed_task_id` in each epoch
    (which ones is drawn again every epoch); None keeps them all.
    """

    shuffle: bool = True
    seed: int | None = None
    per_seed_cap: int | None = None


@attrs.define
class RatioConfig:
    """`ratio`: originals plus `int(len(original) * ratio)` sampled synthetic tasks.

    The ratio of an epoch follows `schedule`: `constant` uses `synthetic_ratio` every epoch;
    `linear` goes from `synthetic_ratio` at epoch 0 to `final_ratio` at epoch
    `schedule_epochs - 1` and stays there. The synthetic count is computed from the number of
    original tasks even when `use_original` is false (AgentEvolver's semantics).
    """

    use_original: bool = True
    synthetic_ratio: float = 1.0
    schedule: str = "constant"
    final_ratio: float | None = None
    schedule_epochs: int = 1
    per_seed_cap: int | None = None
    shuffle: bool = True
    seed: int | None = None
