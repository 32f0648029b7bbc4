"""Seeds derived from the run's: one per episode, per draw, per mini-batch order.

`episode_seed(run seed, what, step, index, ...)` hashes its parts, so a resumed run (or a replay) derives
the same seed for the same episode of the same step, whatever ran before it in the process.
"""

from __future__ import annotations

import hashlib


def episode_seed(*parts: object) -> int:
    """A 63-bit seed from `parts` (their text, joined): the same parts, the same seed, on any machine."""
    digest = hashlib.sha256(":".join(map(str, parts)).encode()).digest()
    return int.from_bytes(digest[:8], "little") & ((1 << 63) - 1)
