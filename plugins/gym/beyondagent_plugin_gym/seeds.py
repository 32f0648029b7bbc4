"""Which seed a gym task uses.

Each split owns a disjoint range of `SPLIT_SIZE` seeds: task `i` of a split is
`{game}-{split}-{i}` and uses seed `base(split) + i`. So `env.task_ids(split)` and the
`gym_tasks` source name the same tasks, and a bare task id (no metadata, as an environment
service client sends) still resets to that task. Any other task id gets a stable seed hashed
from it, above every split's range.
"""

from __future__ import annotations

import hashlib
import re

SPLITS: tuple[str, ...] = ("train", "val", "test")
SPLIT_SIZE = 1_000_000
_HASHED_SEEDS_FROM = len(SPLITS) * SPLIT_SIZE


def check_split(split: str) -> None:
    if split not in SPLITS:
        raise ValueError(f"split must be one of {', '.join(SPLITS)}, got {split!r}")


def split_seed(split: str, index: int) -> int:
    """The seed of task `index` of `split`."""
    check_split(split)
    if not 0 <= index < SPLIT_SIZE:
        raise ValueError(f"a task index must be in [0, {SPLIT_SIZE}), got {index!r}")
    return SPLITS.index(split) * SPLIT_SIZE + index


def split_task_id(game: str, split: str, index: int) -> str:
    return f"{game}-{split}-{index}"


def seed_for_task_id(game: str, task_id: str) -> int:
    """The seed of a task that does not record one: its split seed, or a hash of its id."""
    match = re.fullmatch(rf"{re.escape(game)}-({'|'.join(SPLITS)})-(0|[1-9][0-9]*)", task_id)
    if match and int(match[2]) < SPLIT_SIZE:
        return split_seed(match[1], int(match[2]))
    digest = hashlib.sha256(task_id.encode("utf-8")).digest()
    return _HASHED_SEEDS_FROM + int.from_bytes(digest[:4], "big") % 2**31
