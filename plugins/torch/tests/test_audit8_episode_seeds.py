"""`episode_seed` by hand (eighth mutation audit).

The seed is the first 8 bytes (little-endian) of the sha256 of the parts' text joined by `:`, cut to
63 bits: other backends and replays derive the same numbers from that rule. The separator keeps
parts apart: (1, 23) and (12, 3) are different episodes with different seeds.
"""

from __future__ import annotations

import hashlib

from beyondagent_plugin_torch.seeds import episode_seed


def by_hand(text: str) -> int:
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little") & (2**63 - 1)


def test_the_seed_is_the_sha256_of_the_parts_joined_by_colons() -> None:
    assert episode_seed(11, "train", 1, 0) == by_hand("11:train:1:0")
    assert episode_seed(0, "val", 3, 2, "seat", 1) == by_hand("0:val:3:2:seat:1")
    assert 0 <= episode_seed(7, "minibatches", 2) < 2**63


def test_parts_that_read_alike_when_run_together_get_different_seeds() -> None:
    assert episode_seed(1, 23) != episode_seed(12, 3)
    assert episode_seed(0, "train", 11, 1) != episode_seed(0, "train", 1, 11)
