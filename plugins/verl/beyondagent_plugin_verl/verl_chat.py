"""The `llm` a workflow gets inside verl's rollout: verl's server manager, token in, token out.

One `VerlChat` per episode. Each `chat(messages)` adds the chat-template tokens of the new
messages to the episode's `TokenSequence`, asks verl's `server_manager.generate(request_id,
prompt_ids=..., sampling_params=...)` for the next turn (the same request id for the whole
episode, so verl routes it to the same vLLM replica and its prefix cache), and records the
sampled ids and log-probs exactly as the server returned them. No text is re-tokenized.

The budget is verl's: the first prompt at most `prompt_length` tokens, everything after it (model
turns and observations) at most `response_length`; a turn gets at most `max_new_tokens`.
No verl import here: `server_manager` is anything with that `generate` coroutine.

An episode of the `agent` workflow talks to the policy over HTTP instead: `gateway_episode()`
gives it the episode's gateway endpoint (`beyondagent_core.gateway`), generating through the same
server manager (`VerlGenerator`, one request id per sample). verl's agent loop trains one
sequence per episode, so `gateway_sample()` makes an episode whose calls split into several
samples an episode error rather than dropping or force-merging any of them.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from typing import Any

import attrs

from beyondagent_core.gateway.episode import GatewayEpisode, GenerationSettings
from beyondagent_core.runtime.tokens import (
    ChatTemplate,
    ContextLengthExceeded,
    TokenSequence,
)
from beyondagent_core.types import Trajectory, Turn

SAMPLING_KEYS = ("temperature", "top_p", "max_tokens", "stop")


class PromptTooLong(ValueError):
    """The episode's first prompt is longer than verl's `rollout.prompt_length`."""


class VerlChat:
    def __init__(self, server_manager: Any, template: ChatTemplate, sampling_params: dict[str, Any], *,
                 request_id: str, prompt_length: int, response_length: int, max_new_tokens: int):
        self.server_manager = server_manager
        self.template = template
        self.sampling_params = dict(sampling_params)
        self.request_id = request_id
        self.prompt_length = prompt_length
        self.response_length = response_length
        self.max_new_tokens = max_new_tokens
        self.sequence = TokenSequence(template)
        self.generations: list[dict[str, Any]] = []  # what the server returned, turn by turn
        self.gateway: GatewayEpisode | None = None

    def gateway_episode(self, *, max_calls: int = 100) -> GatewayEpisode:
        """This episode's gateway endpoint (made on first use), generating through verl's server manager."""
        if self.gateway is None:
            defaults = GenerationSettings(float(self.sampling_params.get("temperature", 1.0)),
                                          float(self.sampling_params.get("top_p", 1.0)), self.max_new_tokens)
            self.gateway = GatewayEpisode(self.template, VerlGenerator(self), defaults,
                                          max_episode_tokens=self.prompt_length + self.response_length,
                                          max_calls=max_calls)
        return self.gateway

    def close(self) -> None:
        if self.gateway is not None:
            self.gateway.close()

    @property
    def response_used(self) -> int:
        return len(self.sequence) - self.sequence.prompt_length

    async def chat(self, messages: Sequence[dict[str, Any]], **sampling: Any) -> Turn:
        unknown = sorted(set(sampling) - set(SAMPLING_KEYS))
        if unknown:
            raise TypeError(f"chat() got unsupported sampling option(s) {', '.join(unknown)}; "
                            f"verl's rollout takes {', '.join(SAMPLING_KEYS)}")
        first_turn = len(self.sequence) == 0
        ids = self.sequence.extend(messages)
        if first_turn and len(ids) > self.prompt_length:
            raise PromptTooLong(f"the prompt is {len(ids)} tokens, longer than verl's rollout.prompt_length="
                                f"{self.prompt_length} (backend.max_prompt_tokens)")
        room = self.response_length - self.response_used
        if room <= 0:
            raise ContextLengthExceeded(f"{self.response_used} response tokens used of rollout.response_length="
                                        f"{self.response_length} (backend.max_response_tokens)")
        params = dict(self.sampling_params)
        params.update({key: value for key, value in sampling.items() if key != "max_tokens"})
        params["max_tokens"] = min(int(sampling.get("max_tokens") or self.max_new_tokens), self.max_new_tokens, room)
        params["logprobs"] = True
        token_ids, logprobs = await self.generate(self.request_id, ids, params)
        self.sequence.add_generation(token_ids, logprobs)
        text = self.template.tokenizer.decode(token_ids, skip_special_tokens=True)
        return Turn(role="assistant", content=text, token_ids=token_ids, logprobs=logprobs,
                    finish_reason=self._finish_reason(token_ids, params["max_tokens"]))

    async def generate(self, request_id: str, prompt_ids: Sequence[int],
                       params: dict[str, Any]) -> tuple[list[int], list[float] | None]:
        """One generation from verl's server, recorded with the weights version it was made with."""
        output = await self.server_manager.generate(request_id, prompt_ids=list(prompt_ids), sampling_params=params)
        token_ids = [int(t) for t in output.token_ids]
        logprobs = [float(x) for x in output.log_probs] if output.log_probs is not None else None
        extra = getattr(output, "extra_fields", None) or {}
        self.generations.append({"prompt_ids": list(prompt_ids), "token_ids": token_ids, "log_probs": logprobs,
                                 "stop_reason": getattr(output, "stop_reason", None),
                                 # the weights' version (trainer step) the server generated with
                                 "min_global_steps": extra.get("min_global_steps", extra.get("global_steps")),
                                 "max_global_steps": extra.get("max_global_steps", extra.get("global_steps"))})
        return token_ids, logprobs

    @property
    def end_ids(self) -> frozenset[int]:
        """The tokens that end a turn: eos and the template's end-of-turn token."""
        return frozenset(i for i in (self.template.tokenizer.eos_token_id, *self.template.turn_suffix_ids[:1])
                         if i is not None)

    def _finish_reason(self, token_ids: list[int], limit: int) -> str:
        """Why a turn ended: "length" when it used its whole token limit without ending on eos or end-of-turn."""
        return "length" if len(token_ids) >= limit and (not token_ids or token_ids[-1] not in self.end_ids) else "stop"

    def weight_versions(self, fallback: int | None) -> tuple[int | None, int | None]:
        """The first and last weights version (trainer step) this episode was generated with."""
        first = next((g["min_global_steps"] for g in self.generations if g["min_global_steps"] is not None), None)
        last = next((g["max_global_steps"] for g in reversed(self.generations) if g["max_global_steps"] is not None),
                    None)
        return (first if first is not None else fallback), (last if last is not None else fallback)


class VerlGenerator:
    """The gateway's `TokenGenerator` inside verl's rollout: each sample of the episode is one verl
    request id (the first sample's is the episode's), so its calls reach the same replica and prefix
    cache; the sampling settings are the request's, on top of verl's rollout settings."""

    def __init__(self, chat: VerlChat):
        self.chat = chat
        self.eos_token_ids = chat.end_ids
        self._request_ids: dict[Hashable, str] = {}

    async def generate(self, prompt_ids: list[int], settings: GenerationSettings,
                       session: Hashable) -> tuple[list[int], list[float]]:
        request_id = self._request_ids.setdefault(
            session, self.chat.request_id if not self._request_ids else f"{self.chat.request_id}-{len(self._request_ids)}")
        params = {**self.chat.sampling_params, "temperature": settings.temperature, "top_p": settings.top_p,
                  "max_tokens": min(settings.max_tokens, self.chat.max_new_tokens), "logprobs": True}
        token_ids, logprobs = await self.chat.generate(request_id, prompt_ids, params)
        return token_ids, logprobs if logprobs is not None else [math.nan] * len(token_ids)

    def end_session(self, session: Hashable) -> None:
        self._request_ids.pop(session, None)


def gateway_sample(chat: VerlChat, trajectory: Trajectory) -> tuple[TokenSequence, Trajectory]:
    """The sequence verl trains for an `agent` episode: its one gateway sample. An episode whose
    calls split into several samples, or whose first prompt is longer than verl's prompt budget,
    becomes an episode error (nothing trained) that says why."""
    samples = chat.gateway.samples if chat.gateway is not None else []
    if trajectory.error is not None or not samples:
        return TokenSequence(chat.template), trajectory
    error = None
    if len(samples) > 1:
        error = (f"GatewaySplit: the agent's {len(chat.gateway.calls)} model calls became {len(samples)} samples "
                 f"(a call did not extend the previous prompt and reply); verl's agent loop trains one sequence per "
                 f"episode, so this episode is not trained: use the torch backend, which trains every sample, or "
                 f"keep the agent's history append-only (docs/agents.md, the split rules)")
    elif samples[0].prompt_length > chat.prompt_length:
        error = (f"{PromptTooLong.__name__}: the agent's first prompt is {samples[0].prompt_length} tokens, longer "
                 f"than verl's rollout.prompt_length={chat.prompt_length} (backend.max_prompt_tokens)")
    if error is not None:
        return TokenSequence(chat.template), attrs.evolve(trajectory, error=error, reward=None)
    return samples[0], trajectory


def split_response(seq: TokenSequence, response_length: int) -> tuple[list[int], list[int], list[int], list[float]]:
    """(prompt ids, response ids, response mask, response log-probs) of an episode, cut to `response_length`.

    The response is everything after the first prompt; observations that came after the last
    model turn carry no learning signal and are dropped, so the response ends on a model token.
    """
    start = seq.prompt_length
    ones = [i for i, m in enumerate(seq.loss_mask) if m]
    end = (ones[-1] + 1) if ones else start
    end = min(end, start + response_length)
    return (list(seq.input_ids[:start]), list(seq.input_ids[start:end]), list(seq.loss_mask[start:end]),
            [0.0 if math.isnan(x) else x for x in seq.logprobs[start:end]])
