"""The `llm` a workflow gets inside verl's rollout: verl's server manager, token in, token out.

One `VerlChat` per episode: the core's `TokenChat` (`beyondagent_core.runtime.token_chat`, shared
with the trinity backend) whose engine is verl's `server_manager.generate(request_id,
prompt_ids=..., sampling_params=...)`: each `chat(messages)` adds the new messages' template
tokens and asks it for the next turn (the same request id for the whole
episode, so verl routes it to the same vLLM replica and its prefix cache), and records the
sampled ids and log-probs exactly as the server returned them. No text is re-tokenized.

The budget is verl's: the first prompt at most `prompt_length` tokens, everything after it (model
turns and observations) at most `response_length`; a turn gets at most `max_new_tokens`.
No verl import here: `server_manager` is anything with that `generate` coroutine.

An episode of the `agent` workflow talks to the policy over HTTP instead: `gateway_episode()`
gives it the episode's gateway endpoint (`beyondagent_plugin_gateway`), generating through the same
server manager (`VerlGenerator`, one request id per sample). verl's agent loop trains one
sequence per episode, so `gateway_sample()` makes an episode whose calls split into several
samples an episode error rather than dropping or force-merging any of them.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from typing import Any

import attrs

from beyondagent_plugin_gateway.episode import GatewayEpisode, GenerationSettings
from beyondagent_core.runtime.token_chat import SAMPLING_KEYS, PromptTooLong, TokenChat, split_response
from beyondagent_core.runtime.tokens import ChatTemplate, TokenSequence
from beyondagent_core.types import Trajectory

__all__ = ["SAMPLING_KEYS", "PromptTooLong", "VerlChat", "VerlGenerator", "gateway_sample", "split_response"]


class VerlChat(TokenChat):
    """`TokenChat` (the core's token-in/token-out chat) on verl's server manager."""

    engine = "verl's rollout"
    prompt_limit = "verl's rollout.prompt_length"
    response_limit = "rollout.response_length"

    def __init__(self, server_manager: Any, template: ChatTemplate, sampling_params: dict[str, Any], *,
                 request_id: str, prompt_length: int, response_length: int, max_new_tokens: int):
        super().__init__(template, sampling_params, prompt_length=prompt_length, response_length=response_length,
                         max_new_tokens=max_new_tokens)
        self.server_manager = server_manager
        self.request_id = request_id
        self.generations: list[dict[str, Any]] = []  # what the server returned, turn by turn
        self.gateway: GatewayEpisode | None = None

    def gateway_episode(self, *, max_calls: int = 100, **limits: int) -> GatewayEpisode:
        """This episode's gateway endpoint (made on first use), generating through verl's server manager.
        `limits`: its other limits (`max_concurrent_calls`, `max_n`: `GatewayEpisode`)."""
        if self.gateway is None:
            defaults = GenerationSettings(float(self.sampling_params.get("temperature", 1.0)),
                                          float(self.sampling_params.get("top_p", 1.0)), self.max_new_tokens)
            self.gateway = GatewayEpisode(self.template, VerlGenerator(self), defaults,
                                          max_episode_tokens=self.prompt_length + self.response_length,
                                          max_calls=max_calls, **limits)
        return self.gateway

    def close(self) -> None:
        if self.gateway is not None:
            self.gateway.close()

    async def complete(self, prompt_ids: Sequence[int], params: dict[str, Any]) -> tuple[list[int], list[float] | None]:
        return await self.generate(self.request_id, prompt_ids, params)

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
        self._sessions = 0  # sessions started: numbers new ids, so one never repeats a live session's

    async def generate(self, prompt_ids: list[int], settings: GenerationSettings,
                       session: Hashable) -> tuple[list[int], list[float]]:
        request_id = self._request_ids.get(session)
        if request_id is None:
            request_id = self.chat.request_id if not self._sessions else f"{self.chat.request_id}-{self._sessions}"
            self._request_ids[session] = request_id
            self._sessions += 1
        params = {**self.chat.sampling_params, "temperature": settings.temperature, "top_p": settings.top_p,
                  "max_tokens": min(settings.max_tokens, self.chat.max_new_tokens), "logprobs": True,
                  "stop_token_ids": self.chat.stop_token_ids}
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
