"""Rollout over one preallocated KV cache with a slot per episode (`backend.kv_layout: slots`).

The `sessions` layout (generation.py with kv_cache.py) keeps each episode's cache as tensors of its
own and rebuilds the batch's cache whenever rows join, leave or start a turn: copies and
concatenations of every row's cache, each turn. Here the cache is allocated once, per layer keys
and values of shape [slots, kv_heads, capacity, head_dim]. An episode owns a slot from its first
turn to its end; a turn writes only its new tokens into the slot (what the episode's last turn fed
is already there), and a template that re-renders earlier text only moves the slot's length back
to where the ids diverge. Rows never move and no cache is copied.

Every forward runs over all slots at fixed shapes - a prefill of the new tokens as [slots, T], a
decode step as [slots, 1] - and a row with nothing to do writes to a scratch column no row reads;
a 4-D attention mask keeps each row to its own tokens. Fixed shapes are what CUDA graphs need:
with `compile_decode` the decode step is compiled once per run for each attended width it meets
(powers of two from 64 up to the slot's capacity: a handful of graphs;
`torch.compile(mode="reduce-overhead")`, CUDA graphs on a GPU) and replayed at every step, after
every weight update too (the optimizer updates the weights in place). On a CPU the idle rows cost
real arithmetic, so this layout is meant for a GPU; benchmarks/gpu_rollout.py measures both.

Scheduling (lockstep or continuous batching), sampling and the order of noise are the
ChatScheduler's, so both layouts sample the same tokens (tests/test_slots.py).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable, Sequence
from typing import Any

import attrs
import torch

from beyondagent_plugin_torch.generation import ChatScheduler, _Batch, _Request, _Row
from beyondagent_plugin_torch.kv_cache import KVCacheStats, common_prefix

KV_LAYOUTS = ("sessions", "slots")
MIN_BUCKET = 64  # the narrowest attended width a compiled decode step is specialized for


class SlotCacheUnsupported(RuntimeError):
    """The model's attention cannot run over slots (sliding windows, flash-attention's 2-D masks)."""


class SlotCache:
    """Keys and values of every slot, per layer [slots, kv_heads, capacity, head_dim], written in place.

    transformers' attention layers call `update(keys, values, layer)` with the new tokens' keys and
    values of every row ([slots, kv_heads, T, head_dim]); they are scattered to `write_index`
    ([slots, T] positions, set before each forward) and the layer attends over the first `view`
    positions of every slot. The last position (`scratch`) takes the writes of rows that feed nothing.
    """

    def __init__(self, layers: int, slots: int, capacity: int, kv_heads: int, head_dim: int, *,
                 dtype: torch.dtype, device: torch.device):
        shape = (slots, kv_heads, capacity + 1, head_dim)
        self.keys = [torch.zeros(shape, dtype=dtype, device=device) for _ in range(layers)]
        self.values = [torch.zeros(shape, dtype=dtype, device=device) for _ in range(layers)]
        self.scratch = capacity
        self.write_index = torch.full((slots, 1), capacity, dtype=torch.long, device=device)
        self.view = capacity + 1

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, layer_idx: int,
               *args: Any, **kwargs: Any) -> tuple[torch.Tensor, torch.Tensor]:
        index = self.write_index[:, None, :, None].expand(-1, key_states.shape[1], -1, key_states.shape[-1])
        keys, values = self.keys[layer_idx], self.values[layer_idx]
        keys.scatter_(2, index, key_states.to(keys.dtype))
        values.scatter_(2, index, value_states.to(values.dtype))
        return keys[:, :, :self.view], values[:, :, :self.view]

    def get_seq_length(self, layer_idx: int = 0) -> int:
        return 0  # positions are always passed; transformers asks only when they are not

    def memory_bytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in (*self.keys, *self.values))


@attrs.define(eq=False)
class _Slot:
    """One slot's episode and the ids whose keys and values it holds (positions 0..len-1)."""

    owner: Hashable | None = None
    ids: list[int] = attrs.Factory(list)
    busy: bool = False  # a turn of its episode is being prefilled or decoded


class SlotTable:
    """Which slot each episode (session) owns; the `kv` of the slots layout (stats as kv_cache.py's).

    A session keeps its slot between turns; when a new episode needs one and none is free, the
    least recently used idle session loses its slot (counted in `evictions`; its next turn prefills
    in full). A request without a session gets a slot for its turn only.
    """

    def __init__(self, slots: int, capacity: int):
        self.capacity = capacity
        self.slots = [_Slot() for _ in range(slots)]
        self.stats = KVCacheStats()
        self._idle: OrderedDict[int, None] = OrderedDict()  # idle owned slots, least recently used first

    @property
    def tokens(self) -> int:
        return sum(len(slot.ids) for slot in self.slots if slot.owner is not None)

    def __len__(self) -> int:
        return sum(slot.owner is not None for slot in self.slots)

    def take(self, requests: Sequence[_Request]) -> list[tuple[int, int]]:
        """A slot for each request's turn and how many of its leading prompt ids the slot already
        holds; marks them busy. Sessions that own a slot take it first, so that a new episode
        never evicts the slot of a session in the same admission."""
        taken: dict[int, tuple[int, int]] = {}
        for order, request in enumerate(requests):
            owned = next((i for i, slot in enumerate(self.slots)
                          if request.session is not None and slot.owner == request.session), None)
            if owned is not None:
                taken[order] = (owned, self._reuse(owned, request.prompt_ids))
        for order, request in enumerate(requests):
            if order not in taken:
                taken[order] = (self._claim(request.session), 0)
        return [taken[order] for order in range(len(requests))]

    def _reuse(self, index: int, prompt_ids: Sequence[int]) -> int:
        slot = self.slots[index]
        self._idle.pop(index, None)
        # At least one prompt token must be fed, for the logits of the first new token.
        usable = common_prefix(slot.ids, prompt_ids, limit=len(prompt_ids) - 1)
        if list(prompt_ids[:len(slot.ids)]) != slot.ids:
            self.stats.rerenders += 1
        slot.ids, slot.busy = slot.ids[:usable], True
        return usable

    def _claim(self, session: Hashable | None) -> int:
        free = next((i for i, slot in enumerate(self.slots) if slot.owner is None and not slot.busy), None)
        if free is None:
            free = next(iter(self._idle))  # the scheduler takes no more requests than slots not busy
            self._idle.pop(free)
            self.stats.evictions += 1
        slot = self.slots[free]
        slot.owner, slot.ids, slot.busy = session, [], True
        return free

    def release(self, index: int, session: Hashable | None, seen: list[int]) -> None:
        """A turn ended: the slot holds `seen` for the session's next turn (a sessionless turn frees it)."""
        slot = self.slots[index]
        slot.busy = False
        if session is None:
            slot.owner, slot.ids = None, []
            return
        slot.owner, slot.ids = session, seen
        self._idle[index] = None

    def abandon_busy(self) -> None:
        """Free every busy slot, and what it held (a failed pass may have written part of a turn)."""
        for index, slot in enumerate(self.slots):
            if slot.busy:
                slot.owner, slot.ids, slot.busy = None, [], False
                self._idle.pop(index, None)

    def drop(self, session: Hashable) -> None:
        for index, slot in enumerate(self.slots):
            if slot.owner == session and not slot.busy:
                slot.owner, slot.ids = None, []
                self._idle.pop(index, None)


@attrs.define(eq=False)
class _SlotRow(_Row):
    slot: int = -1


class SlotScheduler(ChatScheduler):
    """The ChatScheduler over a `SlotCache` (see the module docstring); `capacity`: tokens one episode
    may hold (its prompt and every sampled token but the last)."""

    def __init__(self, model: Any, *, capacity: int, compile_decode: bool = False, **options: Any):
        super().__init__(model, **options)
        config = model.config
        implementation = getattr(config, "_attn_implementation", "sdpa")
        if implementation not in ("sdpa", "eager"):
            raise SlotCacheUnsupported(f"kv_layout slots needs sdpa or eager attention (a 4-D mask), "
                                       f"not {implementation}")
        if any(kind != "full_attention" for kind in getattr(config, "layer_types", None) or ()) or \
                getattr(config, "use_sliding_window", False):
            raise SlotCacheUnsupported("kv_layout slots supports full attention only, not sliding windows")
        self.capacity = capacity
        self.kv = SlotTable(self.max_batch_size, capacity)
        self._additive_mask = implementation == "eager"  # eager adds the mask to the scores; sdpa takes booleans
        self._cache: SlotCache | None = None
        self._decode_forward = self._forward
        self._compile = compile_decode

    # --- the cache and the forwards over every slot ------------------------------------------------

    def cache(self) -> SlotCache:
        if self._cache is None:
            config = self.model.config
            heads = config.num_attention_heads
            head_dim = getattr(config, "head_dim", None) or config.hidden_size // heads
            dtype = next(self.model.parameters()).dtype
            self._cache = SlotCache(config.num_hidden_layers, self.max_batch_size, self.capacity,
                                    getattr(config, "num_key_value_heads", None) or heads, head_dim,
                                    dtype=dtype, device=self.device)
            if self._compile:
                for tensor in (*self._cache.keys, *self._cache.values):
                    torch._dynamo.mark_static_address(tensor)
                self._decode_forward = torch.compile(self._forward, mode="reduce-overhead", dynamic=False)
        return self._cache

    def _forward(self, input_ids: torch.Tensor, positions: torch.Tensor, mask: torch.Tensor,
                 write_index: torch.Tensor) -> torch.Tensor:
        """One forward over every slot; the logits of each row's last column [slots, vocab]."""
        cache = self.cache()
        cache.write_index = write_index
        out = self.model(input_ids=input_ids, attention_mask=mask, position_ids=positions, use_cache=True,
                         **{self._cache_key: cache}, **self._last_logits_only)
        return out.logits[:, -1, :]

    def _mask(self, allowed: torch.Tensor) -> torch.Tensor:
        """[slots, 1, T, view] booleans as the attention implementation takes them."""
        if not self._additive_mask:
            return allowed
        dtype = next(self.model.parameters()).dtype
        return torch.zeros(allowed.shape, dtype=dtype, device=self.device).masked_fill(
            ~allowed, torch.finfo(dtype).min)

    # --- ChatScheduler's hooks ---------------------------------------------------------------------

    def _forget_failed_pass(self) -> None:
        """A decode pass failed: its episodes were told; their slots are freed (what they hold is unknown)."""
        self.kv.abandon_busy()

    def _take_waiting(self, room: int) -> list[_Request]:
        # a request waits until a slot is not busy (a busy slot is another turn being decoded)
        free = sum(not slot.busy for slot in self.kv.slots)
        return super()._take_waiting(min(room, free))

    def _admit(self, batch: _Batch | None, requests: list[_Request]) -> _Batch:
        """Prefill each request's new tokens into its slot; they join `batch`."""
        cache = self.cache()
        fits = []
        for request in requests:
            if len(request.prompt_ids) + request.max_new_tokens - 1 <= self.capacity:
                fits.append(request)
            elif not request.future.done():  # that episode fails, not the batch
                request.future.set_exception(ValueError(
                    f"a prompt of {len(request.prompt_ids)} tokens and {request.max_new_tokens} new ones do not "
                    f"fit a slot of {self.capacity} tokens (kv_layout slots holds max_episode_tokens an episode)"))
        requests = fits
        if not requests:
            return batch
        slots, starts = zip(*self.kv.take(requests))
        new_ids = [r.prompt_ids[start:] for r, start in zip(requests, starts)]
        width = max(len(ids) for ids in new_ids)
        size = self.max_batch_size
        input_ids = torch.full((size, width), self.pad_token_id, dtype=torch.long, device=self.device)
        positions = torch.zeros((size, width), dtype=torch.long, device=self.device)
        write_index = torch.full((size, width), cache.scratch, dtype=torch.long, device=self.device)
        last = torch.zeros((size, width), dtype=torch.long, device=self.device)  # the last key each query sees
        for slot, start, ids in zip(slots, starts, new_ids):
            span = torch.arange(start, start + len(ids), device=self.device)
            input_ids[slot, width - len(ids):] = torch.tensor(ids, device=self.device)
            positions[slot, width - len(ids):] = span
            write_index[slot, width - len(ids):] = span
            last[slot, width - len(ids):] = span
        view = max(start + len(ids) for start, ids in zip(starts, new_ids))
        cache.view = view
        allowed = torch.arange(view, device=self.device)[None, None, None, :] <= last[:, None, :, None]
        logits = self._forward(input_ids, positions, self._mask(allowed), write_index)
        stats = self.kv.stats
        stats.prefill_tokens += sum(len(ids) for ids in new_ids)
        stats.reused_tokens += sum(starts)
        self.stats.prefills += 1
        self.stats.requests += len(requests)
        rows = []
        for request, slot in zip(requests, slots):
            self.kv.slots[slot].ids = list(request.prompt_ids)
            rows.append(_SlotRow(request, self._noise_generator(request.generator), slot=slot))
        index = torch.tensor(slots, device=self.device)
        new = _Batch(rows, None, torch.empty(0), torch.empty(0), logits.index_select(0, index))
        if batch is None:
            return new
        return _Batch(batch.rows + new.rows, None, batch.attention, batch.positions,
                      torch.cat([batch.logits, new.logits]))

    def _step(self, batch: _Batch) -> _Batch | None:
        """Sample a token for every row; finish the rows that are done; feed the others' tokens."""
        if batch is None:  # every request of the admission was refused
            return None
        chosen, done = self._sample(batch)
        rows = batch.rows
        for index in done:
            self._finish_row(rows[index])
        if len(done) == len(rows):
            return None
        kept = [i for i in range(len(rows)) if i not in set(done)]
        rows = [rows[i] for i in kept]
        chosen = chosen.index_select(0, torch.tensor(kept, device=self.device)) if done else chosen
        cache, size = self.cache(), self.max_batch_size
        slots = torch.tensor([row.slot for row in rows], device=self.device)
        lengths = torch.tensor([len(self.kv.slots[row.slot].ids) for row in rows], device=self.device)
        input_ids = torch.full((size, 1), self.pad_token_id, dtype=torch.long, device=self.device)
        input_ids[slots, 0] = chosen
        last = torch.zeros((size, 1), dtype=torch.long, device=self.device)
        last[slots, 0] = lengths
        write_index = torch.full((size, 1), cache.scratch, dtype=torch.long, device=self.device)
        write_index[slots, 0] = lengths
        view = int(lengths.max()) + 1
        if self._compile:  # a few fixed shapes, each compiled once: the attended width in powers of two
            view = min(max(MIN_BUCKET, 1 << (view - 1).bit_length()), cache.scratch)
        cache.view = view
        allowed = torch.arange(view, device=self.device)[None, None, None, :] <= last[:, None, :, None]
        logits = self._decode_forward(input_ids, last, self._mask(allowed), write_index)
        for row, token in zip(rows, chosen.tolist()):
            self.kv.slots[row.slot].ids.append(token)
        return _Batch(rows, None, batch.attention, batch.positions, logits.index_select(0, slots))

    def _finish_row(self, row: _SlotRow) -> None:
        """Answer the row's episode; its slot keeps every token fed (the prompt and the sampled tokens
        but the last) for the session's next turn."""
        request = row.request
        self.stats.generated_tokens += len(row.tokens)
        if not request.future.done():
            request.future.set_result((row.tokens, row.logprobs))
        seen = request.prompt_ids + row.tokens[:-1]
        held = self.kv.slots[row.slot].ids
        if held != seen:  # cannot happen; never keep a cache that does not match its ids
            raise RuntimeError(f"slot {row.slot} holds {len(held)} ids, its turn fed {len(seen)}")
        self.kv.release(row.slot, self.kept_session(request), seen)  # an ended session's slot is freed


def make_scheduler(model: Any, *, kv_layout: str, compile_decode: bool, max_episode_tokens: int, where: str,
                   **options: Any) -> ChatScheduler:
    """The rollout's scheduler for `backend.kv_layout` (`options` are the ChatScheduler's); a model whose
    attention cannot run over slots is a SpecError naming the key."""
    if kv_layout == "sessions":
        return ChatScheduler(model, **options)
    try:
        return SlotScheduler(model, capacity=max_episode_tokens, compile_decode=compile_decode, **options)
    except SlotCacheUnsupported as exc:
        from beyondagent_core.errors import SpecError

        raise SpecError(str(exc), where=f"{where}, key backend.kv_layout",
                        hint="use kv_layout: sessions (the default) for this model, or attn_implementation: sdpa"
                        ) from None
