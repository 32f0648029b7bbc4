"""The mixers: which tasks one training epoch uses, from original and synthetic tasks.

Every mixer draws its randomness from one stream per epoch, `random.Random(f"{seed}:{epoch}")`
(string seeds hash the same in every process), so a mix is the same for the same seed, epoch,
config and inputs, and each epoch is mixed anew. Tasks are taken from the list they arrive in,
as the `Mixer` protocol says; their `origin` is not re-checked. Sampling draws positions
without replacement, so no task appears more often than in its input list. Inputs are never
modified.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence

from beyondagent_core import Task
from beyondagent_core.logs import get_logger
from beyondagent_plugin_mixers.config import (
    SCHEDULES,
    OriginalConfig,
    RatioConfig,
    SyntheticConfig,
)

# Absorbs float error so that e.g. 100 * 0.29 (= 28.999999999999996) counts as 29.
_ROUNDING_SLACK = 1e-9


# --- helpers shared by the mixers -----------------------------------------------------------


def epoch_rng(config_seed: int | None, run_seed: int, epoch: int) -> random.Random:
    """The random stream of one epoch: seeded by the config's `seed` if set, else the run's."""
    _check_epoch(epoch)
    seed = run_seed if config_seed is None else config_seed
    return random.Random(f"{seed}:{epoch}")


def synthetic_count(n_original: int, ratio: float) -> int:
    """How many synthetic tasks a ratio asks for: `int(n_original * ratio)`."""
    return math.floor(n_original * ratio + _ROUNDING_SLACK)


def cap_per_seed(synthetic: Sequence[Task], cap: int | None, rng: random.Random) -> list[Task]:
    """The synthetic tasks eligible this epoch: at most `cap` per `seed_task_id`, in input order.

    Which tasks of a crowded seed stay is drawn from `rng`. A task without a `seed_task_id`
    shares a seed with nothing, so it is always eligible.
    """
    if cap is None:
        return list(synthetic)
    by_seed: dict[str, list[int]] = {}
    kept: list[int] = []
    for index, task in enumerate(synthetic):
        if task.seed_task_id is None:
            kept.append(index)
        else:
            by_seed.setdefault(task.seed_task_id, []).append(index)
    for indices in by_seed.values():  # first-appearance order: deterministic
        kept.extend(indices if len(indices) <= cap else rng.sample(indices, cap))
    return [synthetic[index] for index in sorted(kept)]


def sample_in_order(tasks: Sequence[Task], k: int, rng: random.Random) -> list[Task]:
    """`k` of `tasks` drawn without replacement, kept in their input order."""
    return [tasks[index] for index in sorted(rng.sample(range(len(tasks)), k))]


def _check_epoch(epoch: int) -> None:
    if epoch < 0:
        raise ValueError(f"epoch must be 0 or more, got {epoch!r}")


def _check_ratio(key: str, value: float) -> None:
    if not (math.isfinite(value) and value >= 0):
        raise ValueError(f"{key} must be a finite number >= 0, got {value!r}")


def _check_cap(value: int | None) -> None:
    if value is not None and value < 1:
        raise ValueError(f"per_seed_cap must be at least 1 (or null for no cap), got {value!r}")


# --- the mixers -----------------------------------------------------------------------------


class Original:
    """The original tasks only, shuffled each epoch unless `shuffle` is false."""

    def __init__(self, config: OriginalConfig):
        self.config = config

    def mix(self, original: Sequence[Task], synthetic: Sequence[Task], *, epoch: int, seed: int) -> list[Task]:
        rng = epoch_rng(self.config.seed, seed, epoch)
        tasks = list(original)
        if self.config.shuffle:
            rng.shuffle(tasks)
        return tasks


class Synthetic:
    """The synthetic tasks only (at most `per_seed_cap` per seed task), shuffled each epoch."""

    def __init__(self, config: SyntheticConfig):
        _check_cap(config.per_seed_cap)
        self.config = config

    def mix(self, original: Sequence[Task], synthetic: Sequence[Task], *, epoch: int, seed: int) -> list[Task]:
        rng = epoch_rng(self.config.seed, seed, epoch)
        tasks = cap_per_seed(synthetic, self.config.per_seed_cap, rng)
        if self.config.shuffle:
            rng.shuffle(tasks)
        return tasks


class Ratio:
    """All originals plus `int(len(original) * ratio)` synthetic tasks, sampled each epoch.

    The synthetic count is computed from `len(original)` even when `use_original` is false
    (AgentEvolver's semantics): the ratio means the same with or without the originals.
    When fewer synthetic tasks are eligible than asked, all are taken and a
    `mixer.not_enough_synthetic` warning is logged; a huge ratio thus means "every synthetic
    task". Without `shuffle` the result is the originals in order, then the sampled synthetic
    tasks in their input order.
    """

    def __init__(self, config: RatioConfig):
        _check_ratio("synthetic_ratio", config.synthetic_ratio)
        if config.schedule not in SCHEDULES:
            raise ValueError(f"schedule must be one of {', '.join(SCHEDULES)}, got {config.schedule!r}")
        if config.schedule == "linear" and config.final_ratio is None:
            raise ValueError("final_ratio is required when schedule is 'linear' (the ratio it ends at)")
        if config.final_ratio is not None:
            _check_ratio("final_ratio", config.final_ratio)
        if config.schedule_epochs < 1:
            raise ValueError(f"schedule_epochs must be at least 1, got {config.schedule_epochs!r}")
        _check_cap(config.per_seed_cap)
        self.config = config

    def ratio_for_epoch(self, epoch: int) -> float:
        """The synthetic ratio of `epoch`: constant, or linear then flat after the schedule."""
        _check_epoch(epoch)
        config = self.config
        if config.schedule == "constant" or config.final_ratio is None:
            return config.synthetic_ratio
        last = config.schedule_epochs - 1
        if epoch >= last:  # schedule_epochs 1 means final_ratio from the start
            return config.final_ratio
        return config.synthetic_ratio + (config.final_ratio - config.synthetic_ratio) * epoch / last

    def mix(self, original: Sequence[Task], synthetic: Sequence[Task], *, epoch: int, seed: int) -> list[Task]:
        rng = epoch_rng(self.config.seed, seed, epoch)
        wanted = synthetic_count(len(original), self.ratio_for_epoch(epoch))
        eligible = cap_per_seed(synthetic, self.config.per_seed_cap, rng)
        if wanted > len(eligible):
            get_logger(__name__).warning(
                "mixer.not_enough_synthetic", wanted=wanted, available=len(eligible), epoch=epoch
            )
            picked = eligible
        else:
            picked = sample_in_order(eligible, wanted, rng)
        tasks = (list(original) if self.config.use_original else []) + picked
        if self.config.shuffle:
            rng.shuffle(tasks)
        return tasks
