"""Each episode's KV cache, kept between its turns, within a token budget.

After a turn the ChatScheduler stores, per episode (a "session"), the keys and values of every
token the model has seen: the prompt and the sampled tokens but the last (which was never fed).
The next turn's prompt starts with those ids (the chat template only appends), so only the new
tokens - the observation and the template's turn markers - are prefilled. When a template
re-renders earlier text the ids diverge: the cache is used up to the common prefix and the
rest is prefilled again (counted as `rerenders`).

Memory is bounded by `budget_tokens` (cached tokens over all sessions): storing past it evicts
the least recently used sessions first (counted); a session larger than the whole budget is not
stored, and its next turn prefills in full. Sessions end when their episode does (`drop`).

Cached tensors are kept per layer without the batch dimension and without padding:
`keys[layer]` / `values[layer]` are `[kv_heads, length, head_dim]`.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable, Sequence

import attrs
import torch


@attrs.define
class CachedPrefix:
    """The KV of `ids`, the tokens a session's model has already seen."""

    ids: list[int]
    keys: list[torch.Tensor]
    values: list[torch.Tensor]

    def __len__(self) -> int:
        return len(self.ids)


@attrs.define
class KVCacheStats:
    prefill_tokens: int = 0  # tokens run through the model in prefills
    reused_tokens: int = 0  # prompt tokens served from a session's cache instead
    shared_prefix_tokens: int = 0  # prompt tokens not prefilled because an identical prompt in the batch was
    rerenders: int = 0  # turns whose prompt diverged from the cached ids before their end
    evictions: int = 0  # sessions dropped to stay within the budget
    over_budget: int = 0  # sessions too large to keep at all

    def as_dict(self) -> dict[str, int]:
        return attrs.asdict(self)


class SessionCache:
    """Cached prefixes by session, least recently used first (see the module docstring)."""

    def __init__(self, budget_tokens: int):
        if budget_tokens < 0:
            raise ValueError(f"the KV cache budget must be >= 0 tokens, got {budget_tokens}")
        self.budget_tokens = budget_tokens
        self.stats = KVCacheStats()
        self._prefixes: OrderedDict[Hashable, CachedPrefix] = OrderedDict()
        self._tokens = 0

    @property
    def tokens(self) -> int:
        return self._tokens

    def __len__(self) -> int:
        return len(self._prefixes)

    def take(self, session: Hashable | None, prompt_ids: Sequence[int]) -> CachedPrefix | None:
        """The session's cached prefix usable for `prompt_ids` (cut to their common prefix), removed
        from the store: the caller stores the session's new prefix after the turn."""
        if session is None or session not in self._prefixes:
            return None
        cached = self._prefixes.pop(session)
        self._tokens -= len(cached)
        # At least one prompt token must be fed, for the logits of the first new token.
        usable = common_prefix(cached.ids, prompt_ids, limit=len(prompt_ids) - 1)
        if list(prompt_ids[: len(cached)]) != cached.ids:
            self.stats.rerenders += 1
        if usable == 0:
            return None
        if usable < len(cached):
            cached = CachedPrefix(cached.ids[:usable], [k[:, :usable] for k in cached.keys],
                                  [v[:, :usable] for v in cached.values])
        return cached

    def put(self, session: Hashable, prefix: CachedPrefix) -> None:
        """Store `prefix` for `session`, evicting least recently used sessions to fit."""
        self.drop(session)
        if len(prefix) > self.budget_tokens:
            self.stats.over_budget += 1
            return
        while self._tokens + len(prefix) > self.budget_tokens:
            self.drop(next(iter(self._prefixes)))
            self.stats.evictions += 1
        self._prefixes[session] = prefix
        self._tokens += len(prefix)

    def drop(self, session: Hashable) -> None:
        cached = self._prefixes.pop(session, None)
        if cached is not None:
            self._tokens -= len(cached)

    def clear(self) -> None:
        self._prefixes.clear()
        self._tokens = 0


def common_prefix(a: Sequence[int], b: Sequence[int], *, limit: int) -> int:
    """How many leading ids `a` and `b` share, at most `limit`."""
    n = min(len(a), len(b), max(limit, 0))
    for i in range(n):
        if a[i] != b[i]:
            return i
    return n


def cache_layers(cache: object) -> tuple[list[torch.Tensor], list[torch.Tensor]] | None:
    """The per-layer `[batch, kv_heads, length, head_dim]` keys and values of a transformers
    `DynamicCache` of plain full-attention layers; None for any other cache (sliding windows,
    quantized, ...), whose layout this module does not rebuild."""
    from transformers import DynamicCache
    from transformers.cache_utils import DynamicLayer

    if type(cache) is not DynamicCache or not all(type(layer) is DynamicLayer for layer in cache.layers):
        return None
    return [layer.keys for layer in cache.layers], [layer.values for layer in cache.layers]


def make_cache(keys: Sequence[torch.Tensor], values: Sequence[torch.Tensor]) -> object:
    """A `DynamicCache` holding these per-layer `[batch, kv_heads, length, head_dim]` tensors themselves
    (its `update` would concatenate them onto empty ones: a copy of the whole cache for nothing)."""
    from transformers import DynamicCache

    cache = DynamicCache()
    for layer, (k, v) in enumerate(zip(keys, values)):
        cache.update(k[..., :0, :], v[..., :0, :], layer)  # the layer, initialized with no tokens
        cache.layers[layer].keys, cache.layers[layer].values = k, v
    return cache


def stack_prefixes(prefixes: Sequence[CachedPrefix | None], width: int,
                   like: CachedPrefix) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """Left-pad each row's cached prefix (None: nothing cached) to `width` tokens and stack them:
    per layer `[rows, kv_heads, width, head_dim]`, zeros where a row has no token (masked out)."""
    keys, values = [], []
    for layer, (k_like, v_like) in enumerate(zip(like.keys, like.values)):
        k = k_like.new_zeros((len(prefixes), k_like.shape[0], width, k_like.shape[-1]))
        v = v_like.new_zeros((len(prefixes), v_like.shape[0], width, v_like.shape[-1]))
        for row, prefix in enumerate(prefixes):
            if prefix is not None and len(prefix):
                k[row, :, width - len(prefix):] = prefix.keys[layer]
                v[row, :, width - len(prefix):] = prefix.values[layer]
        keys.append(k)
        values.append(v)
    return keys, values


def row_prefix(keys: Sequence[torch.Tensor], values: Sequence[torch.Tensor], row: int,
               positions: torch.Tensor, ids: list[int]) -> CachedPrefix:
    """Row `row`'s cache at `positions` (its real, unpadded tokens, in order) as the prefix of `ids`."""
    return CachedPrefix(ids, [k[row].index_select(1, positions) for k in keys],
                        [v[row].index_select(1, positions) for v in values])


def left_pad(tensor: torch.Tensor, width: int, *, dim: int) -> torch.Tensor:
    """`tensor` widened to `width` along `dim` with zeros on the left (masked-out positions)."""
    missing = width - tensor.shape[dim]
    if missing <= 0:
        return tensor
    shape = list(tensor.shape)
    shape[dim] = missing
    return torch.cat([tensor.new_zeros(shape), tensor], dim=dim)
