"""A scripted policy for the math workflow tests: a stand-in for a model that writes code on cue.

The tiny random model cannot be made to write a Python block, so this stands in for the policy:
it returns scripted replies, and, like the torch backend's `PolicyChat`, keeps the episode's
`TokenSequence` over a real tokenizer (the tiny model's, built locally), encoding each reply as
the ids the model "sampled". Everything else in the tests is real.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from beyondagent_core.runtime.tokens import ChatTemplate, ContextLengthExceeded, TokenSequence
from beyondagent_core.types import Turn


class ScriptedPolicy:
    def __init__(self, replies: Sequence[str], tokenizer: Any = None, *, max_tokens: int | None = None):
        self.replies = list(replies)
        self.tokenizer = tokenizer
        self.sequence = TokenSequence(ChatTemplate(tokenizer)) if tokenizer is not None else None
        self.max_tokens = max_tokens
        self.calls: list[dict[str, Any]] = []

    async def chat(self, messages: Sequence[dict[str, Any]], **sampling: Any) -> Turn:
        self.calls.append({"messages": [dict(m) for m in messages], "sampling": sampling})
        if not self.replies:
            raise ContextLengthExceeded("the script is over")
        text = self.replies.pop(0)
        if self.sequence is None:
            return Turn(role="assistant", content=text)
        self.sequence.extend(messages)
        end = self.tokenizer.convert_tokens_to_ids("<|im_end|>")
        ids = self.tokenizer.encode(text, add_special_tokens=False) + [end]
        logprobs = [-0.25] * len(ids)
        self.sequence.add_generation(ids, logprobs)
        return Turn(role="assistant", content=text, token_ids=ids, logprobs=logprobs)
