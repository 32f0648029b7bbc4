"""Which seed a task id gets at the edge of a split's range.

From the eighth audit (mutation testing): `{game}-{split}-{i}` uses seed `base(split) + i` only for
`i < SPLIT_SIZE`; an index at or past the end of the range is an ordinary id that gets a seed hashed
from it (above every split's range), and the env still resets to it rather than failing.
"""

from __future__ import annotations

import hashlib

from beyondagent_plugin_gym.config import FrozenLakeConfig
from beyondagent_plugin_gym.frozenlake import FrozenLake
from beyondagent_plugin_gym.seeds import SPLIT_SIZE, seed_for_task_id

from beyondagent_core import Task


def hashed(task_id: str) -> int:
    """seeds.py's documented rule for other ids: 3 * SPLIT_SIZE + the first 4 bytes of SHA-256, mod 2**31."""
    return 3 * SPLIT_SIZE + int.from_bytes(hashlib.sha256(task_id.encode()).digest()[:4], "big") % 2**31


def test_the_last_index_of_each_split_uses_the_last_seed_of_its_range() -> None:
    assert SPLIT_SIZE == 1_000_000
    assert seed_for_task_id("frozenlake", "frozenlake-train-999999") == 999_999
    assert seed_for_task_id("frozenlake", "frozenlake-val-999999") == 1_999_999
    assert seed_for_task_id("frozenlake", "frozenlake-test-999999") == 2_999_999


def test_an_index_past_the_range_gets_a_hashed_seed_not_an_error() -> None:
    for task_id in ("frozenlake-train-1000000", "frozenlake-test-1000000", "frozenlake-val-1000001"):
        seed = seed_for_task_id("frozenlake", task_id)
        assert seed == hashed(task_id) and seed >= 3 * SPLIT_SIZE


def test_the_env_resets_to_a_task_id_past_the_range() -> None:
    env = FrozenLake(FrozenLakeConfig(size=4))
    reset = env.reset(Task(task_id="frozenlake-train-1000000"))
    assert reset.info["metadata"]["seed"] == hashed("frozenlake-train-1000000")
    assert len(reset.info["metadata"]["map"]) == 4
