"""The `llm` a workflow gets during training: the policy, one client per episode.

It keeps the episode's `TokenSequence`, so the model conditions on exactly the ids training
will see: each `chat(messages)` adds the chat-template tokens of the new messages, asks the
ChatScheduler for the next turn, and records the sampled ids and log-probs. It also holds
the episode's token budget: a turn gets at most `max_tokens` new tokens and never more than
what is left of `max_episode_tokens`.

An episode of the `agent` workflow talks to the policy over HTTP instead: `gateway_episode()`
gives it the episode's gateway endpoint (`beyondagent_plugin_gateway`), generating through the
same scheduler and random generator; `samples` are then the endpoint's training samples.

The chat of a seat that a frozen opponent plays (the opponent pool) is a PolicyChat on the frozen
copy's scheduler; the episode's `Presence` follows its requests from one scheduler to the other.
"""

from __future__ import annotations

import itertools
from collections.abc import Hashable, Sequence
from typing import Any

import attrs
import torch

from beyondagent_plugin_gateway.episode import GatewayEpisode, GenerationSettings
from beyondagent_core.runtime.tokens import ChatTemplate, ContextLengthExceeded, TokenSequence
from beyondagent_core.types import Turn
from beyondagent_plugin_torch.generation import ChatScheduler, Presence, Sampling

SAMPLING_KEYS = ("temperature", "top_p", "max_tokens")


class PromptTooLong(ValueError):
    """The episode's first prompt does not fit in `max_episode_tokens`."""


class PolicyChat:
    def __init__(self, scheduler: ChatScheduler, template: ChatTemplate, sampling: Sampling, *,
                 episode: int, max_episode_tokens: int, seed: int, keep_cache: bool = True,
                 presence: Presence | None = None):
        self.scheduler = scheduler
        self.presence = presence  # the episode's count in flight, moved here before each request
        self.template = template
        self.sampling = sampling
        self.episode = episode
        self.max_episode_tokens = max_episode_tokens
        self.generator = torch.Generator().manual_seed(seed)
        self.sequence = TokenSequence(template)
        self.session = object() if keep_cache else None  # the scheduler keeps this episode's KV cache by it
        self.gateway: GatewayEpisode | None = None

    def close(self) -> None:
        """The episode is over: the scheduler frees its KV cache."""
        if self.session is not None:
            self.scheduler.end_session(self.session)
        if self.gateway is not None:
            self.gateway.close()

    def gateway_episode(self, *, max_calls: int = 100, **limits: int) -> GatewayEpisode:
        """This episode's gateway endpoint (made on first use), generating through the scheduler.
        `limits`: its other limits (`max_concurrent_calls`, `max_n`: `GatewayEpisode`)."""
        if self.gateway is None:
            defaults = GenerationSettings(self.sampling.temperature, self.sampling.top_p, self.sampling.max_tokens)
            self.gateway = GatewayEpisode(self.template, SchedulerGenerator(self), defaults,
                                          max_episode_tokens=self.max_episode_tokens, max_calls=max_calls, **limits)
        return self.gateway

    def follow(self) -> None:
        """The episode's next request is this chat's: count it in flight on this chat's scheduler."""
        if self.presence is not None:
            self.presence.move_to(self.scheduler)

    @property
    def samples(self) -> list[TokenSequence]:
        """The episode's training samples: its own sequence, then the gateway's (never none: an
        episode that generated nothing has its empty sequence)."""
        own = [self.sequence] if self.sequence.generated_tokens or self.gateway is None else []
        return own + (self.gateway.samples if self.gateway is not None else []) or [self.sequence]

    async def chat(self, messages: Sequence[dict[str, Any]], **sampling: Any) -> Turn:
        unknown = sorted(set(sampling) - set(SAMPLING_KEYS))
        if unknown:
            raise TypeError(f"chat() got unsupported sampling option(s) {', '.join(unknown)}; "
                            f"the policy takes {', '.join(SAMPLING_KEYS)}")
        settings = attrs.evolve(self.sampling, **sampling)
        first_turn = len(self.sequence) == 0
        ids = self.sequence.extend(messages)
        room = self.max_episode_tokens - len(ids)
        if room <= 0:
            if first_turn:
                raise PromptTooLong(f"the prompt is {len(ids)} tokens, longer than max_episode_tokens="
                                    f"{self.max_episode_tokens}")
            raise ContextLengthExceeded(f"{len(ids)} tokens used of max_episode_tokens={self.max_episode_tokens}")
        order = (self.episode, self.sequence.model_turns)
        self.follow()
        token_ids, logprobs = await self.scheduler.generate(
            order, ids, settings, min(settings.max_tokens, room), self.generator, session=self.session)
        self.sequence.add_generation(token_ids, logprobs)
        text = self.template.tokenizer.decode(token_ids, skip_special_tokens=True)
        # The scheduler ends a turn at a stop token or at the token limit: no stop token last means cut off.
        stopped = bool(token_ids) and token_ids[-1] in self.scheduler.eos_token_ids
        return Turn(role="assistant", content=text, token_ids=token_ids, logprobs=logprobs,
                    finish_reason="stop" if stopped else "length")


class SchedulerGenerator:
    """The gateway's `TokenGenerator` for one episode: its requests go to the shared scheduler with
    the episode's order key and random generator, so gateway episodes batch with the others."""

    def __init__(self, chat: PolicyChat):
        self.chat = chat
        self.eos_token_ids = frozenset(chat.scheduler.eos_token_ids)
        self._requests = itertools.count()

    async def generate(self, prompt_ids: list[int], settings: GenerationSettings,
                       session: Hashable) -> tuple[list[int], list[float]]:
        sampling = Sampling(settings.temperature, settings.top_p, settings.max_tokens)
        order = (self.chat.episode, next(self._requests))
        self.chat.follow()
        return await self.chat.scheduler.generate(order, prompt_ids, sampling, settings.max_tokens,
                                                  self.chat.generator,
                                                  session=session if self.chat.session is not None else None)

    def end_session(self, session: Hashable) -> None:
        self.chat.scheduler.end_session(session)
