"""What the gateway's tests share: `Scripted`, a stand-in for the backend's `TokenGenerator`.

The policy cannot be a real model here without slowing every limit test to a model's speed: `Scripted`
answers replies of known length (or holds a call open on an event), so each limit can be met exactly.
"""

from __future__ import annotations

import asyncio
from typing import Any

from beyondagent_plugin_gateway.episode import GenerationSettings


class Scripted:
    """The generator's interface: each call answers the next of `replies` (ids), else `max_tokens` tokens
    of "a" without an end-of-turn; records what it was asked and which sessions were ended."""

    def __init__(self, tokenizer: Any, *replies: list[int], eos: frozenset[int] | None = None):
        im_end = tokenizer.convert_tokens_to_ids("<|im_end|>")
        self.eos_token_ids = eos if eos is not None else frozenset({im_end})
        self.token = tokenizer.encode("a", add_special_tokens=False)[0]
        self.replies = list(replies)
        self.asked: list[tuple[list[int], GenerationSettings, object]] = []
        self.ended: list[object] = []
        self.failure: Exception | None = None
        self.extra = 0  # tokens past max_tokens (a backend that overshoots)
        self.gate: asyncio.Event | None = None
        self.entered = 0

    async def generate(self, prompt_ids, settings, session):
        self.asked.append((list(prompt_ids), settings, session))
        self.entered += 1
        if self.gate is not None:
            await self.gate.wait()
        if self.failure is not None:
            failure, self.failure = self.failure, None
            raise failure
        ids = self.replies.pop(0) if self.replies else [self.token] * (settings.max_tokens + self.extra)
        return list(ids), [-0.5] * len(ids)

    def end_session(self, session) -> None:
        self.ended.append(session)

    @property
    def max_tokens(self) -> list[int]:
        return [settings.max_tokens for _, settings, _ in self.asked]
