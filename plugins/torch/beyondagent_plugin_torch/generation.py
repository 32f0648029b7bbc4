"""The ChatScheduler: concurrent `llm.chat` calls from many episodes, one generation pass.

Episodes run as asyncio tasks. Each model turn submits its prompt ids to the scheduler and
waits. In `lockstep` batching (the default), when every episode in flight is waiting (or the
batch is full), the scheduler pads the prompts and samples all of them together in one
KV-cached decoding loop; the batches, and each episode's own random generator, do not depend
on thread timing, so a rollout is reproducible. In `continuous` batching a request joins the
running decoding loop between two steps, so an episode whose env is slow holds nobody else.
Either way a row leaves the batch as soon as its turn is done and its episode goes on.

Prefill is where multi-turn rollout spends its time, so it is not repeated: an episode's KV
cache is kept between its turns (`kv_cache.py`; the next turn feeds only its new tokens), and
rows of a batch with the same prompt (a group's rollouts of one task) are prefilled once and
their cache copied.

Each row has its own temperature (0 = greedy), top-p and token limit; log-probs are those of
the temperature-scaled distribution the token was drawn from, as training recomputes them.
Sampling is an exponential race (`sample_next`) on noise from the episode's own generator, so
what a row samples does not depend on the batch around it, its padding or its cached prefix,
all of which move the logits by float noise.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import math
from collections.abc import Callable, Hashable, Iterator, Sequence
from typing import Any

import attrs
import torch

from beyondagent_plugin_torch.kv_cache import (
    SessionCache,
    cache_layers,
    left_pad,
    make_cache,
    row_prefix,
    stack_prefixes,
)

# Cached tokens kept over all episodes between their turns: for a 1.5B Qwen2 (28 layers, 2 KV
# heads of 128, bf16) that is ~28 KB a token, ~1.8 GB at this budget.
DEFAULT_KV_CACHE_TOKENS = 65536


@attrs.frozen
class Sampling:
    """How one model turn is sampled: `temperature` 0 means greedy."""

    temperature: float = 1.0
    top_p: float = 1.0
    max_tokens: int = 64

    def __attrs_post_init__(self) -> None:
        if self.temperature < 0:
            raise ValueError(f"temperature must be >= 0, got {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")
        if self.max_tokens < 1:
            raise ValueError(f"max_tokens must be >= 1, got {self.max_tokens}")


@attrs.define
class _Request:
    order: tuple[int, int]
    prompt_ids: list[int]
    sampling: Sampling
    max_new_tokens: int
    generator: torch.Generator
    future: asyncio.Future
    session: Hashable | None = None  # the episode whose KV cache carries over between its turns


@attrs.define
class GenerationStats:
    requests: int = 0
    batches: int = 0  # decode loops started (lockstep: one per turn of the episodes in flight)
    prefills: int = 0  # prefill passes (continuous batching: one per admission)
    generated_tokens: int = 0
    seconds: float = 0.0  # in the model and sampling, not waiting for episodes


# Sampling noise is drawn for several tokens at once when the vocabulary is small (up to this many
# uniforms a row): one `torch.rand` call per token cost a fifth of a tiny model's sampling time. On
# CPU a [k, vocab] draw is the same stream as k draws of [vocab], so the tokens do not change.
_NOISE_CHUNK_ELEMENTS = 32768


@attrs.define(eq=False)
class _Row:
    """A request being decoded: its noise generator (seeded at admission) and what it has sampled so far."""

    request: _Request
    noise: torch.Generator
    tokens: list[int] = attrs.Factory(list)
    logprobs: list[float] = attrs.Factory(list)
    _uniforms: tuple[torch.Tensor, ...] = ()  # noise drawn ahead for the row's next tokens, a view per token
    _used: int = 0

    def next_uniforms(self, vocab: int, device: Any) -> torch.Tensor:
        """The noise for the row's next token: [vocab] uniforms from its own generator. Drawn in
        chunks whose size depends only on the vocabulary and the row's token limit, never on the batch."""
        if self._used == len(self._uniforms):
            left = max(self.request.max_new_tokens - len(self.tokens), 1)
            chunk = min(max(_NOISE_CHUNK_ELEMENTS // vocab, 1), left)
            # unbound once: a tuple lookup per token, not a tensor index per token
            self._uniforms, self._used = torch.rand((chunk, vocab), generator=self.noise, device=device).unbind(0), 0
        self._used += 1
        return self._uniforms[self._used - 1]


@attrs.define(eq=False)
class _Batch:
    """The decode batch: one row per running request, the KV cache over the tokens fed so far."""

    rows: list[_Row]
    cache: Any
    attention: torch.Tensor  # [rows, cache length]: 1 where a row has a token, 0 for padding
    positions: torch.Tensor  # [rows, 1]: the position of each row's last token fed
    logits: torch.Tensor  # [rows, vocab]: for each row's next token


BATCHING = ("lockstep", "continuous")


class ChatScheduler:
    """Batches generation requests from concurrent episodes (see the module docstring)."""

    def __init__(self, model: Any, *, eos_token_ids: Sequence[int], pad_token_id: int,
                 max_batch_size: int = 64, kv_cache_tokens: int = DEFAULT_KV_CACHE_TOKENS,
                 batching: str = "lockstep",
                 device_turn: Callable[[], contextlib.AbstractContextManager[Any]] = contextlib.nullcontext):
        if batching not in BATCHING:
            raise ValueError(f"batching must be one of {', '.join(BATCHING)}, got {batching!r}")
        self.model = model
        self.device = next(model.parameters()).device
        self.eos_token_ids = frozenset(eos_token_ids)
        self.pad_token_id = pad_token_id
        self.max_batch_size = max_batch_size
        self.batching = batching
        # Held for each decode step: with asynchronous rollout the update takes its turns between them.
        self.device_turn = device_turn
        self.stats = GenerationStats()
        self.kv = SessionCache(kv_cache_tokens)
        # A prefill needs the logits of its last position only: not [rows, prompt, vocab] of them. A LoRA
        # policy (peft) takes the base model's keywords through **kwargs: its signature is the base's.
        base = model.get_base_model() if callable(getattr(model, "get_base_model", None)) else model
        parameters = inspect.signature(type(base).forward).parameters
        self._last_logits_only = {"logits_to_keep": 1} if "logits_to_keep" in parameters else {}
        # transformers >= 5.2x calls the KV cache `cache` (and warns on every model call that still
        # says `past_key_values`); older releases know only `past_key_values`
        self._cache_key = "cache" if "cache" in parameters else "past_key_values"
        self._rows_copyable = True  # the model's KV cache is one whose rows kv_cache.py can copy
        self._active = 0
        self._turns: dict[Hashable, int] = {}  # session -> its turns in flight
        self._ended: set[Hashable] = set()  # sessions ended while a turn of theirs was in flight
        self._waiting: list[_Request] = []
        self._busy = False
        self._check_pending = False

    @contextlib.contextmanager
    def episode(self) -> Iterator[Presence]:
        """Count an episode as in flight: the scheduler waits for it before sampling a batch. What it
        yields moves the count to another scheduler (`Presence`: a game some of whose seats another
        model plays)."""
        presence = Presence(self)
        try:
            yield presence
        finally:
            presence.close()

    def enter(self) -> None:
        """One more episode in flight here (lockstep batches wait for it)."""
        self._active += 1

    def leave(self) -> None:
        """An episode is no longer in flight here: a batch that waited only for it may start."""
        self._active -= 1
        self._maybe_start_batch()

    async def generate(self, order: tuple[int, int], prompt_ids: list[int], sampling: Sampling,
                       max_new_tokens: int, generator: torch.Generator,
                       session: Hashable | None = None) -> tuple[list[int], list[float]]:
        """Sample one turn for `prompt_ids`; returns the new token ids and their log-probs.

        With a `session`, the KV cache of this turn is kept for the session's next turn (see
        `kv_cache.py`); call `end_session` when the episode ends.
        """
        future = asyncio.get_running_loop().create_future()
        self._waiting.append(_Request(order, list(prompt_ids), sampling, max_new_tokens, generator, future, session))
        if session is not None:
            self._turns[session] = self._turns.get(session, 0) + 1
        self._maybe_start_batch()
        try:
            return await future
        finally:
            if session is not None:
                self._turns[session] -= 1
                if not self._turns[session]:
                    del self._turns[session]
                    self._ended.discard(session)

    def end_session(self, session: Hashable) -> None:
        """An episode ended: free its cached prefix (a turn of it still in flight keeps nothing either)."""
        self.kv.drop(session)
        if session in self._turns:
            self._ended.add(session)

    def kept_session(self, request: _Request) -> Hashable | None:
        """The session a finished turn's cache is kept for: None when the turn had none, or its episode
        ended while the turn was in flight (a gateway episode closed mid-call)."""
        return None if request.session in self._ended else request.session

    def _maybe_start_batch(self) -> None:
        # Decide on the next turn of the event loop, after the episodes that are ready to run
        # (just started, or just back from an env step) have submitted their requests too.
        if not self._check_pending:
            self._check_pending = True
            asyncio.get_running_loop().call_soon(self._start_batch_if_ready)

    def _start_batch_if_ready(self) -> None:
        self._check_pending = False
        if self._busy or not self._waiting:
            return
        lockstep = self.batching == "lockstep" or not self._rows_copyable
        if lockstep and len(self._waiting) < min(max(self._active, 1), self.max_batch_size):
            return  # other episodes are still stepping their envs: wait to batch them too
        self._busy = True
        asyncio.get_running_loop().create_task(self._decode(self._take_waiting(self.max_batch_size)))

    def _take_waiting(self, room: int) -> list[_Request]:
        self._waiting.sort(key=lambda request: request.order)
        taken, self._waiting = self._waiting[:room], self._waiting[room:]
        return taken

    async def _decode(self, requests: list[_Request]) -> None:
        """The decode loop: sample a token for every running row, step after step, until none runs.

        A row leaves the batch when it is done (its episode goes on at once); with continuous
        batching, requests that arrive meanwhile join between two steps (prefilled, then merged).
        It runs on the event loop's thread, which also trains: torch's CPU thread pool is per
        thread, and a second thread's pool competing with it slowed decoding 2-3x on 2 cores. Env
        calls run in their worker threads meanwhile, and the loop yields to episodes between steps.
        """
        loop = asyncio.get_running_loop()
        self.stats.batches += 1
        batch: _Batch | None = None
        try:
            while requests or batch is not None:
                started = loop.time()
                with self.device_turn(), torch.inference_mode():
                    if requests:
                        batch = self._admit(batch, requests)
                        requests = []
                    batch = self._step(batch)
                self.stats.seconds += loop.time() - started
                await asyncio.sleep(0)  # episodes whose turn ended go on; their envs answer
                if batch is not None and self.batching == "continuous" and self._rows_copyable:
                    requests = self._take_waiting(self.max_batch_size - len(batch.rows))
        except Exception as exc:  # noqa: BLE001 - every waiting episode learns why
            for request in [*(row.request for row in (batch.rows if batch else ())), *requests]:
                if not request.future.done():
                    request.future.set_exception(exc)
            self._forget_failed_pass()
        finally:
            self._busy = False
            self._maybe_start_batch()

    def _forget_failed_pass(self) -> None:
        """A decode pass failed: nothing to undo here (its batch's caches are dropped with it)."""

    def _admit(self, batch: _Batch | None, requests: list[_Request]) -> _Batch:
        """Prefill `requests` and add them to `batch` (None: they start one)."""
        # Each episode seeds its row's noise from its own generator, so what it samples does not
        # depend on which other episodes share the batch.
        rows = [_Row(r, self._noise_generator(r.generator)) for r in requests]
        out, attention = self._prefill(requests)
        self.stats.prefills += 1
        self.stats.requests += len(requests)
        positions = torch.tensor([[len(r.prompt_ids) - 1] for r in requests], device=self.device)
        new = _Batch(rows, out[self._cache_key], attention, positions, out.logits[:, -1, :])
        if batch is None:
            return new
        layers, new_layers = cache_layers(batch.cache), cache_layers(new.cache)
        width = max(batch.attention.shape[1], new.attention.shape[1])
        keys, values = ([torch.cat([left_pad(a, width, dim=2), left_pad(b, width, dim=2)])
                         for a, b in zip(old, added)] for old, added in zip(layers, new_layers))
        attention = torch.cat([left_pad(batch.attention, width, dim=1), left_pad(new.attention, width, dim=1)])
        return _Batch(batch.rows + new.rows, make_cache(keys, values), attention,
                      torch.cat([batch.positions, new.positions]), torch.cat([batch.logits, new.logits]))

    def _sample(self, batch: _Batch) -> tuple[torch.Tensor, list[int]]:
        """Sample one token for every row (appended to its tokens); returns them and the rows now done."""
        rows = batch.rows
        temperatures = [row.request.sampling.temperature for row in rows]
        top_ps = [row.request.sampling.top_p for row in rows]
        vocab = batch.logits.shape[-1]
        uniforms = torch.stack([row.next_uniforms(vocab, self.device) for row in rows])
        chosen, chosen_logprobs = sample_next(
            batch.logits.float(), torch.tensor(temperatures, device=self.device),
            torch.tensor(top_ps, device=self.device), uniforms,
            any_greedy=any(t == 0 for t in temperatures), any_nucleus=any(p < 1 for p in top_ps))
        done = []
        for index, (row, token, logprob) in enumerate(zip(rows, chosen.tolist(), chosen_logprobs.tolist())):
            row.tokens.append(token)
            row.logprobs.append(logprob)
            if token in self.eos_token_ids or len(row.tokens) >= row.request.max_new_tokens:
                done.append(index)
        return chosen, done

    def _step(self, batch: _Batch) -> _Batch | None:
        """Sample one token for every row; finish the rows that are done; feed the others' tokens."""
        rows = batch.rows
        chosen, done = self._sample(batch)
        if done:
            layers = cache_layers(batch.cache)
            for index in done:
                self._finish(rows[index], layers, index, batch.attention[index])
            if len(done) == len(rows):
                return None
            keep = torch.tensor([i for i in range(len(rows)) if i not in set(done)], device=self.device)
            batch = self._select(batch, keep)
            chosen = chosen.index_select(0, keep)
        attention = torch.cat([batch.attention, torch.ones_like(batch.attention[:, :1])], dim=1)
        positions = batch.positions + 1
        out = self.model(input_ids=chosen[:, None], attention_mask=attention, position_ids=positions,
                         use_cache=True, **{self._cache_key: batch.cache})
        return _Batch(batch.rows, out[self._cache_key], attention, positions, out.logits[:, -1, :])

    def _noise_generator(self, generator: torch.Generator) -> torch.Generator:
        """A generator on the model's device for one turn's sampling noise, seeded from the episode's."""
        seed = int(torch.randint(0, 2**62, (), generator=generator))
        return torch.Generator(device=self.device).manual_seed(seed)

    def _select(self, batch: _Batch, keep: torch.Tensor) -> _Batch:
        """The batch with only the rows `keep`, its padding columns that no row uses dropped."""
        attention = batch.attention.index_select(0, keep)
        first = int(attention.any(0).nonzero()[0])  # leading columns every kept row pads
        layers = cache_layers(batch.cache)
        if layers is None:  # a cache kv_cache.py cannot rebuild: transformers' own row selection
            batch.cache.batch_select_indices(keep)
            cache, first = batch.cache, 0
        else:
            keys, values = ([t.index_select(0, keep)[:, :, first:] for t in group] for group in layers)
            cache = make_cache(keys, values)
        rows = [batch.rows[i] for i in keep.tolist()]
        return _Batch(rows, cache, attention[:, first:], batch.positions.index_select(0, keep),
                      batch.logits.index_select(0, keep))

    def _finish(self, row: _Row, layers: Any, index: int, attention: torch.Tensor) -> None:
        """Answer a finished row's episode and keep its session's cache for the next turn: every
        token fed, i.e. the prompt and the sampled tokens but the last."""
        request = row.request
        self.stats.generated_tokens += len(row.tokens)
        if not request.future.done():
            request.future.set_result((row.tokens, row.logprobs))
        session = self.kept_session(request)
        if session is None or self.kv.budget_tokens == 0:
            return
        if layers is None:
            self._rows_copyable = False
            self.kv.budget_tokens = 0  # not a cache whose rows this module can copy: re-prefill each turn
            return
        seen = request.prompt_ids + row.tokens[:-1]
        positions = attention.nonzero().squeeze(-1)
        if len(positions) != len(seen):  # cannot happen; never store a cache that does not match its ids
            raise RuntimeError(f"KV cache of {len(positions)} tokens for {len(seen)} ids")
        self.kv.put(session, row_prefix(*layers, index, positions, seen))

    def _prefill(self, batch: list[_Request]) -> tuple[Any, torch.Tensor]:
        """One forward pass over what each row has not seen yet; returns its output (expanded to
        every row) and the attention mask over the cache it leaves.

        A row whose session has a cached prefix feeds only the tokens after it; rows that would
        feed the same prompt from scratch (a group's rollouts of one task) share one prefill row.
        Layout of a prefill row: [left pad][cached prefix][pad][new tokens], so every row's new
        tokens end where generation starts; positions count only real tokens.
        """
        device = self.device
        prefixes = [self.kv.take(r.session, r.prompt_ids) for r in batch]
        work: dict[object, int] = {}
        rows_of = [work.setdefault(tuple(r.prompt_ids) if p is None else ("cached", row), len(work))
                   for row, (r, p) in enumerate(zip(batch, prefixes))]
        firsts = [rows_of.index(unique) for unique in range(len(work))]
        unique_prefixes = [prefixes[row] for row in firsts]
        cached_lens = [0 if p is None else len(p) for p in unique_prefixes]
        new_ids = [batch[row].prompt_ids[n:] for row, n in zip(firsts, cached_lens)]
        width_cached, width_new = max(cached_lens), max(len(ids) for ids in new_ids)
        stats = self.kv.stats
        stats.prefill_tokens += sum(len(ids) for ids in new_ids)
        stats.reused_tokens += sum(0 if p is None else len(p) for p in prefixes)
        stats.shared_prefix_tokens += sum(len(r.prompt_ids) for row, r in enumerate(batch)
                                          if prefixes[row] is None and row not in firsts)

        input_ids = torch.full((len(work), width_new), self.pad_token_id, dtype=torch.long, device=device)
        attention = torch.zeros((len(work), width_cached + width_new), dtype=torch.long, device=device)
        positions = torch.zeros((len(work), width_new), dtype=torch.long, device=device)
        for unique, (cached, ids) in enumerate(zip(cached_lens, new_ids)):
            input_ids[unique, width_new - len(ids):] = torch.tensor(ids, device=device)
            attention[unique, width_cached - cached: width_cached] = 1
            attention[unique, width_cached + width_new - len(ids):] = 1
            positions[unique, width_new - len(ids):] = torch.arange(cached, cached + len(ids), device=device)
        past = None
        if width_cached:
            like = next(p for p in unique_prefixes if p is not None)
            past = make_cache(*stack_prefixes(unique_prefixes, width_cached, like))
        out = self.model(input_ids=input_ids, attention_mask=attention, position_ids=positions,
                         use_cache=True, **{self._cache_key: past}, **self._last_logits_only)
        if len(work) == len(batch):
            return out, attention
        index = torch.tensor(rows_of, device=device)
        layers = cache_layers(out[self._cache_key])
        if layers is None:  # a cache this module cannot copy rows of: prefill every row
            self.kv.budget_tokens = 0
            return self._prefill_every_row(batch)
        keys, values = ([t.index_select(0, index) for t in group] for group in layers)
        out[self._cache_key] = make_cache(keys, values)
        out.logits = out.logits[:, -1:].index_select(0, index)
        return out, attention.index_select(0, index)

    def _prefill_every_row(self, batch: list[_Request]) -> tuple[Any, torch.Tensor]:
        device, size = self.device, len(batch)
        width = max(len(request.prompt_ids) for request in batch)
        input_ids = torch.full((size, width), self.pad_token_id, dtype=torch.long, device=device)
        attention = torch.zeros((size, width), dtype=torch.long, device=device)
        for row, request in enumerate(batch):  # left padding: every row ends where generation starts
            input_ids[row, width - len(request.prompt_ids):] = torch.tensor(request.prompt_ids, device=device)
            attention[row, width - len(request.prompt_ids):] = 1
        positions = (attention.cumsum(-1) - 1).clamp(min=0)
        out = self.model(input_ids=input_ids, attention_mask=attention, position_ids=positions, use_cache=True,
                         **self._last_logits_only)
        return out, attention


def sample_next(logits: torch.Tensor, temperature: torch.Tensor, top_p: torch.Tensor, uniforms: torch.Tensor, *,
                any_greedy: bool | None = None, any_nucleus: bool | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """One token per row and its log-prob under logits / temperature; `uniforms` is [rows, vocab].

    Rows with temperature 0 take the argmax. The others race exponential clocks: token i wins
    when p_i / E_i is largest, E_i = -log(u_i) ~ Exp(1), which draws i with probability p_i
    (restricted to the top-p nucleus). Unlike inverting the CDF with one uniform, the winner
    changes only when the two best races are within float noise of each other: with a 49,152-token
    vocabulary the tail tokens are ~1e-7 of probability wide, and logits 4e-5 apart (a cached vs a
    fresh prefill of the real model) moved about one sampled token in 200 under CDF inversion.
    The race is run on the scaled logits, which differ from the log-probs by a constant per row (the
    same winner, without writing a log-softmax of the whole vocabulary each step); the nucleus and
    the greedy rows' argmax are computed only when some row asks for them (`any_greedy`, `any_nucleus`:
    the caller's answer from its own numbers, so a GPU need not be asked; None: read from the tensors).
    """
    greedy = temperature == 0
    if any_greedy is None:
        any_greedy = bool(greedy.any())
    if any_nucleus is None:
        any_nucleus = bool((top_p < 1).any())
    scale = torch.where(greedy, torch.ones_like(temperature), temperature)
    scaled = logits / scale[:, None]
    normalizer = torch.logsumexp(scaled, dim=-1)
    clocks = torch.log(-torch.log(uniforms))  # log E_i
    if any_nucleus:
        kept = nucleus((scaled - normalizer[:, None]).exp(), top_p) > 0
        race = torch.where(kept, scaled, -math.inf) - clocks
    else:
        race = scaled - clocks
    chosen = race.argmax(-1)
    if any_greedy:
        chosen = torch.where(greedy, logits.argmax(-1), chosen)
    return chosen, scaled.gather(-1, chosen[:, None]).squeeze(-1) - normalizer


def nucleus(probs: torch.Tensor, top_p: torch.Tensor) -> torch.Tensor:
    """Keep the smallest set of most likely tokens whose mass reaches `top_p` (per row)."""
    if bool((top_p >= 1).all()):
        return probs
    sorted_probs, order = probs.sort(dim=-1, descending=True)
    mass_before = sorted_probs.cumsum(-1) - sorted_probs
    sorted_probs = torch.where(mass_before < top_p[:, None], sorted_probs, torch.zeros_like(sorted_probs))
    kept = torch.zeros_like(probs).scatter(-1, order, sorted_probs)
    return kept / kept.sum(-1, keepdim=True)


class Presence:
    """An episode counted in flight by one scheduler at a time: the one it asked last.

    A game some of whose seats are played by another model (the opponent pool's frozen copy, with a
    scheduler of its own) moves between two schedulers; were it counted by both, each one's lockstep
    batch would wait for it while it waits on the other. Counted where it asked last, it holds back
    only that scheduler's next batch, as an episode stepping its env does.
    """

    def __init__(self, scheduler: ChatScheduler):
        self.scheduler = scheduler
        scheduler.enter()

    def move_to(self, scheduler: ChatScheduler) -> None:
        """The episode's next request goes to `scheduler`."""
        if scheduler is not self.scheduler:
            scheduler.enter()
            self.scheduler, before = scheduler, self.scheduler
            before.leave()

    def close(self) -> None:
        self.scheduler.leave()
