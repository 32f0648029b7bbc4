"""Group statistics every estimator shares: z-scores within groups, verl's conventions.

`normalize(values, keys)` is GRPO's baseline: each value minus its group's mean, divided by the
group's unbiased (n - 1) standard deviation plus `eps` when `by_std`. A group of one has no
baseline, so (as in verl's `compute_grpo_outcome_advantage`) its mean is taken as 0 and its
std as 1. A group whose values are all equal gets 0.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import numpy as np

from beyondagent_plugin_advantages.config import EPS


def normalize(values: Sequence[float] | np.ndarray, keys: Sequence[Hashable], *, by_std: bool = True,
              eps: float = EPS) -> np.ndarray:
    """Each value's z-score (or centred value) within the values sharing its key; float64."""
    values = np.asarray(values, dtype=np.float64)
    if values.ndim != 1 or len(values) != len(keys):
        raise ValueError(f"need one key per value; got {values.shape} values and {len(keys)} keys")
    members: dict[Hashable, list[int]] = {}
    for index, key in enumerate(keys):
        members.setdefault(key, []).append(index)
    result = np.zeros_like(values)
    for indices in members.values():
        group = values[indices]
        if len(indices) == 1:
            mean, std = 0.0, 1.0
        else:
            mean, std = float(np.mean(group)), float(np.std(group, ddof=1))
        centred = group - mean
        result[indices] = centred / (std + eps) if by_std else centred
    return result

