"""Replaying a reference solution through an episode: the model's turns answered from a list of actions.

A synthetic task's reference (`ground_truth`: a list of actions, or a text with one action per line)
is checked by replaying it in a fresh env (the `feasibility` filter's `replay` solver,
beyondagent-plugin-synthesis) and turned into SFT examples by replaying it through the workflow
(the torch backend's `algorithm.sft`). `ReplayLLM` is the `ChatLLM` that does it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import Any

from beyondagent_core.protocols import Message
from beyondagent_core.runtime.tokens import ContextLengthExceeded
from beyondagent_core.types import Turn


class ReferenceExhausted(ContextLengthExceeded):
    """The replayed reference has no more actions.

    A `ContextLengthExceeded`, because that is how a workflow learns that the model will say
    no more: the react workflow then stops and evaluates the episode (which fails unless the
    reference already succeeded); another workflow ends the episode with an error.
    """


class ReplayLLM:
    """A `ChatLLM` that answers with the next action of a reference solution, ignoring the messages."""

    def __init__(self, actions: Sequence[str]):
        self.actions = list(actions)
        self._next: Iterator[str] = iter(self.actions)

    async def chat(self, messages: Sequence[Message], **sampling: Any) -> Turn:
        try:
            return Turn(role="assistant", content=next(self._next))
        except StopIteration:
            raise ReferenceExhausted(f"the reference has no more actions (it has {len(self.actions)})") from None


def reference_actions(ground_truth: Any) -> list[str] | None:
    """The reference as a list of actions: a list of strings, or a text with one action per line."""
    if isinstance(ground_truth, str):
        actions = [line.strip() for line in ground_truth.splitlines() if line.strip()]
        return actions or None
    if isinstance(ground_truth, (list, tuple)) and ground_truth and all(isinstance(a, str) for a in ground_truth):
        return list(ground_truth)
    return None


def format_reference(ground_truth: Any) -> str:
    actions = reference_actions(ground_truth)
    if actions is not None:
        return "\n".join(f"{i}. {action}" for i, action in enumerate(actions, 1))
    return ground_truth if isinstance(ground_truth, str) else json.dumps(ground_truth, ensure_ascii=False, default=str)
