"""The ChatScheduler: concurrent `llm.chat` calls from many episodes, one generation pass.

Episodes run as asyncio tasks. Each model turn submits its prompt ids to the scheduler and
waits; when every episode in flight is waiting (or the batch is full), the scheduler pads
the prompts and samples all of them together in one KV-cached decoding loop. Batching in
lockstep makes a rollout reproducible: the batches, and each episode's own random generator,
do not depend on thread timing.

Each row has its own temperature (0 = greedy), top-p and token limit; log-probs are those of
the temperature-scaled distribution the token was drawn from, as training recomputes them.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator, Sequence
from typing import Any

import attrs
import torch


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


@attrs.define
class GenerationStats:
    requests: int = 0
    batches: int = 0
    generated_tokens: int = 0
    seconds: float = 0.0


class ChatScheduler:
    """Batches generation requests from concurrent episodes (see the module docstring)."""

    def __init__(self, model: Any, *, eos_token_ids: Sequence[int], pad_token_id: int,
                 max_batch_size: int = 64):
        self.model = model
        self.device = next(model.parameters()).device
        self.eos_token_ids = torch.tensor(sorted(set(eos_token_ids)), device=self.device)
        self.pad_token_id = pad_token_id
        self.max_batch_size = max_batch_size
        self.stats = GenerationStats()
        self._active = 0
        self._waiting: list[_Request] = []
        self._busy = False
        self._check_pending = False

    @contextlib.contextmanager
    def episode(self) -> Iterator[None]:
        """Count an episode as in flight: the scheduler waits for it before sampling a batch."""
        self._active += 1
        try:
            yield
        finally:
            self._active -= 1
            self._maybe_start_batch()

    async def generate(self, order: tuple[int, int], prompt_ids: list[int], sampling: Sampling,
                       max_new_tokens: int, generator: torch.Generator) -> tuple[list[int], list[float]]:
        """Sample one turn for `prompt_ids`; returns the new token ids and their log-probs."""
        future = asyncio.get_running_loop().create_future()
        self._waiting.append(_Request(order, prompt_ids, sampling, max_new_tokens, generator, future))
        self._maybe_start_batch()
        return await future

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
        if len(self._waiting) < min(max(self._active, 1), self.max_batch_size):
            return  # other episodes are still stepping their envs: wait to batch them too
        self._waiting.sort(key=lambda request: request.order)
        batch, self._waiting = self._waiting[: self.max_batch_size], self._waiting[self.max_batch_size:]
        self._busy = True
        asyncio.get_running_loop().create_task(self._run_batch(batch))

    async def _run_batch(self, batch: list[_Request]) -> None:
        loop = asyncio.get_running_loop()
        started = loop.time()
        try:
            # On the event loop's thread, which also trains: torch's CPU thread pool is per thread,
            # and a second thread's pool competing with it slowed decoding 2-3x on 2 cores. Every
            # episode in flight is waiting for this batch anyway (env calls already sent keep
            # running in their worker threads).
            results = self._sample(batch)
        except Exception as exc:  # noqa: BLE001 - every waiting episode learns why
            for request in batch:
                if not request.future.done():
                    request.future.set_exception(exc)
        else:
            for request, result in zip(batch, results):
                if not request.future.done():
                    request.future.set_result(result)
                self.stats.generated_tokens += len(result[0])
        finally:
            self.stats.requests += len(batch)
            self.stats.batches += 1
            self.stats.seconds += loop.time() - started
            self._busy = False
            self._maybe_start_batch()

    @torch.inference_mode()
    def _sample(self, batch: list[_Request]) -> list[tuple[list[int], list[float]]]:
        device, size = self.device, len(batch)
        width = max(len(request.prompt_ids) for request in batch)
        input_ids = torch.full((size, width), self.pad_token_id, dtype=torch.long, device=device)
        attention = torch.zeros((size, width), dtype=torch.long, device=device)
        for row, request in enumerate(batch):  # left padding: every row ends where generation starts
            input_ids[row, width - len(request.prompt_ids):] = torch.tensor(request.prompt_ids, device=device)
            attention[row, width - len(request.prompt_ids):] = 1
        positions = (attention.cumsum(-1) - 1).clamp(min=0)
        temperature = torch.tensor([r.sampling.temperature for r in batch], device=device)
        top_p = torch.tensor([r.sampling.top_p for r in batch], device=device)
        limits = torch.tensor([r.max_new_tokens for r in batch], device=device)
        horizon = int(limits.max())
        # Each episode draws the uniforms for its own token limit from its own generator, so what it
        # samples does not depend on which other episodes share the batch.
        uniforms = torch.zeros((size, horizon))
        for row, request in enumerate(batch):
            uniforms[row, : request.max_new_tokens] = torch.rand(request.max_new_tokens, generator=request.generator)
        uniforms = uniforms.to(device)

        out = self.model(input_ids=input_ids, attention_mask=attention, position_ids=positions, use_cache=True)
        tokens, logprobs = [], []
        done = torch.zeros(size, dtype=torch.bool, device=device)
        lengths = torch.zeros(size, dtype=torch.long, device=device)
        last_position = positions[:, -1:]
        for step in range(horizon):
            chosen, chosen_logprobs = sample_next(out.logits[:, -1, :].float(), temperature, top_p, uniforms[:, step])
            tokens.append(chosen)
            logprobs.append(chosen_logprobs)
            lengths += (~done).long()
            done |= torch.isin(chosen, self.eos_token_ids) | (limits <= step + 1)
            if bool(done.all()):
                break
            next_tokens = torch.where(done, torch.full_like(chosen, self.pad_token_id), chosen)
            attention = torch.cat([attention, (~done).long()[:, None]], dim=1)
            last_position = last_position + 1
            out = self.model(input_ids=next_tokens[:, None], attention_mask=attention, position_ids=last_position,
                             past_key_values=out.past_key_values, use_cache=True)
        token_rows = torch.stack(tokens, 1).tolist()
        logprob_rows = torch.stack(logprobs, 1).tolist()
        return [(t[:n], lp[:n]) for t, lp, n in zip(token_rows, logprob_rows, lengths.tolist())]


def sample_next(logits: torch.Tensor, temperature: torch.Tensor, top_p: torch.Tensor,
                uniforms: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """One token per row and its log-prob under logits / temperature.

    Rows with temperature 0 take the argmax; the others invert the (top-p) CDF at their uniform draw.
    """
    greedy = temperature == 0
    scale = torch.where(greedy, torch.ones_like(temperature), temperature)
    log_probs = torch.log_softmax(logits / scale[:, None], dim=-1)
    cdf = nucleus(log_probs.exp(), top_p).cumsum(-1)
    drawn = torch.searchsorted(cdf, (uniforms[:, None] * cdf[:, -1:]).contiguous()).squeeze(-1)
    chosen = torch.where(greedy, logits.argmax(-1), drawn.clamp(max=logits.shape[-1] - 1))
    return chosen, log_probs.gather(-1, chosen[:, None]).squeeze(-1)


def nucleus(probs: torch.Tensor, top_p: torch.Tensor) -> torch.Tensor:
    """Keep the smallest set of most likely tokens whose mass reaches `top_p` (per row)."""
    if bool((top_p >= 1).all()):
        return probs
    sorted_probs, order = probs.sort(dim=-1, descending=True)
    mass_before = sorted_probs.cumsum(-1) - sorted_probs
    sorted_probs = torch.where(mass_before < top_p[:, None], sorted_probs, torch.zeros_like(sorted_probs))
    kept = torch.zeros_like(probs).scatter(-1, order, sorted_probs)
    return kept / kept.sum(-1, keepdim=True)
