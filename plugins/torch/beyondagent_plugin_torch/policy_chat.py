"""The `llm` a workflow gets during training: the policy, one client per episode.

It keeps the episode's `TokenSequence`, so the model conditions on exactly the ids training
will see: each `chat(messages)` adds the chat-template tokens of the new messages, asks the
ChatScheduler for the next turn, and records the sampled ids and log-probs. It also holds
the episode's token budget: a turn gets at most `max_tokens` new tokens and never more than
what is left of `max_episode_tokens`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs
import torch

from beyondagent_core.runtime.tokens import ChatTemplate, ContextLengthExceeded, TokenSequence
from beyondagent_core.types import Turn
from beyondagent_plugin_torch.generation import ChatScheduler, Sampling

SAMPLING_KEYS = ("temperature", "top_p", "max_tokens")


class PromptTooLong(ValueError):
    """The episode's first prompt does not fit in `max_episode_tokens`."""


class PolicyChat:
    def __init__(self, scheduler: ChatScheduler, template: ChatTemplate, sampling: Sampling, *,
                 episode: int, max_episode_tokens: int, seed: int, keep_cache: bool = True):
        self.scheduler = scheduler
        self.template = template
        self.sampling = sampling
        self.episode = episode
        self.max_episode_tokens = max_episode_tokens
        self.generator = torch.Generator().manual_seed(seed)
        self.sequence = TokenSequence(template)
        self.session = object() if keep_cache else None  # the scheduler keeps this episode's KV cache by it

    def close(self) -> None:
        """The episode is over: the scheduler frees its KV cache."""
        if self.session is not None:
            self.scheduler.end_session(self.session)

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
        token_ids, logprobs = await self.scheduler.generate(
            order, ids, settings, min(settings.max_tokens, room), self.generator, session=self.session)
        self.sequence.add_generation(token_ids, logprobs)
        text = self.template.tokenizer.decode(token_ids, skip_special_tokens=True)
        # The scheduler ends a turn at a stop token or at the token limit: no stop token last means cut off.
        stopped = bool(token_ids) and token_ids[-1] in self.scheduler.eos_token_ids
        return Turn(role="assistant", content=text, token_ids=token_ids, logprobs=logprobs,
                    finish_reason="stop" if stopped else "length")
