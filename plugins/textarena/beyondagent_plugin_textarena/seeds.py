"""Which seed a TextArena task plays.

Task `i` of a split is `textarena-{game}-{split}-{i}` and plays seed `base(split) + i`: the splits use
disjoint seed ranges, so the env's `task_ids(split)` and the `textarena_tasks` source name the same
games, and a bare task id (as an env-service client sends) still plays its game. Any other task id
plays a stable seed hashed from it, above every split's range.
"""

from __future__ import annotations

import hashlib
import re

from beyondagent_plugin_textarena.config import SPLIT_SIZE, SPLITS

_ID = re.compile(rf"textarena-([a-z_]+)-({'|'.join(SPLITS)})-(0|[1-9][0-9]{{0,5}})")


def task_id(game: str, split: str, index: int) -> str:
    return f"textarena-{game}-{split}-{index}"


def parse_task_id(task_id: str) -> tuple[str, int] | None:
    """(game, seed) of a split task id; None for any other id."""
    match = _ID.fullmatch(task_id)
    if match is None or int(match[3]) >= SPLIT_SIZE:
        return None
    return match[1], SPLITS.index(match[2]) * SPLIT_SIZE + int(match[3])


def seed_of(task_id: str) -> int:
    """The seed of a task that records none: its split seed, or a hash of its id above the splits'."""
    parsed = parse_task_id(task_id)
    if parsed is not None:
        return parsed[1]
    digest = int.from_bytes(hashlib.sha256(task_id.encode("utf-8", "surrogatepass")).digest()[:6], "big")
    return len(SPLITS) * SPLIT_SIZE + digest
