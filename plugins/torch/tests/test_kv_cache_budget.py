"""The session KV store's budget boundary (plugins/torch/beyondagent_plugin_torch/kv_cache.py)."""

from __future__ import annotations

import torch
from beyondagent_plugin_torch.kv_cache import CachedPrefix, SessionCache


def prefix(n: int) -> CachedPrefix:
    return CachedPrefix(list(range(n)), [torch.zeros(1, n, 2)], [torch.zeros(1, n, 2)])


def test_a_prefix_of_exactly_the_budget_is_kept_and_one_token_more_is_not() -> None:
    store = SessionCache(budget_tokens=6)
    store.put("a", prefix(6))
    assert len(store) == 1 and store.tokens == 6 and store.stats.over_budget == 0
    store.put("b", prefix(7))
    assert store.stats.over_budget == 1 and store.tokens == 6 and len(store) == 1
    got = store.take("a", list(range(8)))
    assert got is not None and len(got) == 6 and store.tokens == 0
