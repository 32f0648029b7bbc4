"""Group statistics every estimator shares: z-scores within groups, verl's conventions.

`normalize(values, keys)` is GRPO's baseline: each value minus its group's mean, divided by the
group's unbiased (n - 1) standard deviation plus `eps` when `by_std`. A group of one has no
baseline, so (as in verl's `compute_grpo_outcome_advantage`) its mean is taken as 0 and its
std as 1. A group whose values are all equal gets 0.

`leave_one_out(values, keys)` is RLOO's baseline: each value minus the mean of the *other*
values of its group, n/(n-1) (v - mean) (verl's `compute_rloo_outcome_advantage`); a group of
one keeps its raw value there too.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import numpy as np

from beyondagent_plugin_advantages.config import EPS


def members_of(keys: Sequence[Hashable]) -> list[list[int]]:
    """The indices sharing each key, groups in order of first appearance."""
    members: dict[Hashable, list[int]] = {}
    for index, key in enumerate(keys):
        members.setdefault(key, []).append(index)
    return list(members.values())


def _checked(values: Sequence[float] | np.ndarray, keys: Sequence[Hashable]) -> np.ndarray:
    values = np.asarray(values, dtype=np.float64)
    if values.ndim != 1 or len(values) != len(keys):
        raise ValueError(f"need one key per value; got {values.shape} values and {len(keys)} keys")
    return values


def normalize(values: Sequence[float] | np.ndarray, keys: Sequence[Hashable], *, by_std: bool = True,
              eps: float = EPS) -> np.ndarray:
    """Each value's z-score (or centred value) within the values sharing its key; float64."""
    values = _checked(values, keys)
    result = np.zeros_like(values)
    for indices in members_of(keys):
        group = values[indices]
        if len(indices) == 1:
            mean, std = 0.0, 1.0
        else:
            mean, std = float(np.mean(group)), float(np.std(group, ddof=1))
        centred = group - mean
        result[indices] = centred / (std + eps) if by_std else centred
    return result


def leave_one_out(values: Sequence[float] | np.ndarray, keys: Sequence[Hashable]) -> np.ndarray:
    """Each value minus the mean of the other values sharing its key (a lone value: itself); float64."""
    values = _checked(values, keys)
    result = values.copy()
    for indices in members_of(keys):
        n = len(indices)
        if n > 1:
            group = values[indices]
            result[indices] = (group - np.mean(group)) * (n / (n - 1))
    return result
