"""One token sequence per episode, with a loss mask that is 1 only on model-generated tokens.

A multi-turn episode alternates non-model messages (system prompt, env observations, tool
results) and model turns. The model's turns enter the sequence as the exact ids it sampled,
with the log-probs recorded at sampling time; they are never decoded and re-tokenized. The
non-model parts enter as chat-template *increments*: the text the tokenizer's chat template
adds for the new messages (and to close the previous model turn), tokenized on their own.

`TokenSequence` is built incrementally: the policy's chat client uses one per episode, so the
ids the model conditions on at turn k are exactly the ids training sees. `episode_tokens`
replays a finished trajectory's turns through the same class.

The tokenizer is any object with Hugging Face's `apply_chat_template(messages, tokenize=False,
add_generation_prompt=...)` and `encode(text, add_special_tokens=False)`; no torch here.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from typing import Any

import attrs

from beyondagent_core.types import Turn

# Stand-ins rendered through the chat template to learn what it puts around messages.
_SENTINEL = "\u2063BEYONDAGENT_SENTINEL\u2063"
_BASE_MESSAGES = [
    {"role": "system", "content": "s"},
    {"role": "user", "content": "u"},
    {"role": "assistant", "content": _SENTINEL},
]


# How a model turn is remembered among the messages seen (its content is the sampled ids).
_MODEL_TURN = "\0model"

# Rendered-and-tokenized messages kept per template: a group's rollouts of one task start from the
# same prompt (and often get the same observations), and the template and tokenizer cost ~0.2 ms each.
_MEMO_ENTRIES = 4096


class ContextLengthExceeded(Exception):
    """The episode's token sequence reached its budget (`max_episode_tokens`).

    Raised by the policy's chat client instead of generating; a workflow may catch it to end
    the episode early (the react workflow does), otherwise the episode ends with an error.
    """


class ConversationRewritten(ValueError):
    """A workflow changed messages the model had already seen; training needs append-only."""


def as_message(turn: Turn) -> dict[str, Any]:
    message: dict[str, Any] = {"role": turn.role, "content": turn.content}
    if turn.tool_calls:
        message["tool_calls"] = turn.tool_calls
    return message


def is_special_token(tokenizer: Any, token_id: int) -> bool:
    """A named special token (`all_special_ids`) or an added token marked special."""
    if token_id in set(getattr(tokenizer, "all_special_ids", ())):
        return True
    added = getattr(tokenizer, "added_tokens_decoder", None) or {}
    return bool(getattr(added.get(token_id), "special", False))


class ChatTemplate:
    """The tokenizer's chat template, split into the increments a multi-turn episode needs."""

    def __init__(self, tokenizer: Any):
        self.tokenizer = tokenizer
        closed = self.render(_BASE_MESSAGES, add_generation_prompt=False)
        if _SENTINEL not in closed:
            raise ValueError("the tokenizer's chat template drops assistant message content")
        self._base_text = closed
        # What the template writes after an assistant message's content, e.g. "<|im_end|>\n".
        self.turn_suffix_ids = self.encode(closed.rsplit(_SENTINEL, 1)[1])
        # The token a model ends its turn with (`<|im_end|>`): the suffix's first one when it is a special
        # token, a named one or an added token marked special (a base checkpoint's eos is often
        # `<|endoftext|>`, `<|im_end|>` only added); None when the turn closes with plain text (a newline),
        # where no sampler may stop.
        first = self.turn_suffix_ids[0] if self.turn_suffix_ids else None
        self.end_of_turn_id = first if first is not None and is_special_token(tokenizer, first) else None
        self._memo: dict[tuple[str, str], tuple[int, ...]] = {}

    def render(self, messages: Sequence[dict[str, Any]], *, add_generation_prompt: bool) -> str:
        text = self.tokenizer.apply_chat_template(
            list(messages), tokenize=False, add_generation_prompt=add_generation_prompt
        )
        if not isinstance(text, str):
            raise TypeError(f"apply_chat_template(tokenize=False) returned {type(text).__name__}, not str")
        return text

    def encode(self, text: str) -> list[int]:
        return list(self.tokenizer.encode(text, add_special_tokens=False))

    def prompt_ids(self, messages: Sequence[dict[str, Any]]) -> list[int]:
        """The first prompt: the whole template with the generation prompt."""
        return self._memoized("prompt", messages,
                              lambda: self.encode(self.render(messages, add_generation_prompt=True)))

    def increment_ids(self, last_model_ids: Sequence[int], messages: Sequence[dict[str, Any]]) -> list[int]:
        """The tokens after a model turn: close that turn, add `messages`, open the next turn.

        When the model stopped on the template's end-of-turn token it already produced that
        token, so only the rest of the closing text is added; a turn cut at its token limit
        gets the whole closing text.
        """
        suffix = self.turn_suffix_ids
        if last_model_ids and suffix and last_model_ids[-1] == suffix[0]:
            suffix = suffix[1:]
        return [*suffix, *self._memoized("increment", messages, lambda: self._increment_text_ids(messages))]

    def _increment_text_ids(self, messages: Sequence[dict[str, Any]]) -> list[int]:
        text = self.render([*_BASE_MESSAGES, *messages], add_generation_prompt=True)
        if not text.startswith(self._base_text):
            raise ValueError("the chat template renders earlier messages differently once more are added; "
                             "multi-turn increments need a prefix-stable template")
        return self.encode(text[len(self._base_text):])

    def _memoized(self, kind: str, messages: Sequence[dict[str, Any]], compute: Callable[[], list[int]]) -> list[int]:
        """`compute()`, remembered by the messages' JSON (messages that are not plain JSON are not kept)."""
        try:
            key = (kind, json.dumps(list(messages), sort_keys=True))
        except (TypeError, ValueError):
            return compute()
        ids = self._memo.get(key)
        if ids is None:
            if len(self._memo) >= _MEMO_ENTRIES:
                self._memo.clear()
            ids = self._memo[key] = tuple(compute())
        return list(ids)


@attrs.define
class TokenSequence:
    """An episode's tokens so far: ids, loss mask and recorded log-probs, aligned.

    `extend(messages)` takes the whole conversation a workflow passes to `chat` and adds the
    template tokens for the messages not seen yet; `add_generation(ids, logprobs)` adds a
    model turn. Non-model positions have mask 0 and log-prob 0.0; a model turn without
    recorded log-probs gets NaN there. `turn_spans` holds each model turn's token range (the
    steps an advantage estimator sees).
    """

    template: ChatTemplate
    input_ids: list[int] = attrs.field(factory=list)
    loss_mask: list[int] = attrs.field(factory=list)
    logprobs: list[float] = attrs.field(factory=list)
    prompt_length: int = 0
    turn_spans: list[tuple[int, int]] = attrs.field(factory=list)  # [start, end) of each model turn
    _seen: list[tuple[str, str]] = attrs.field(factory=list)
    _last_model_ids: list[int] = attrs.field(factory=list)

    def __len__(self) -> int:
        return len(self.input_ids)

    @property
    def model_turns(self) -> int:
        return sum(1 for role, _ in self._seen if role == _MODEL_TURN)

    @property
    def generated_tokens(self) -> int:
        return sum(self.loss_mask)

    def extend(self, messages: Sequence[dict[str, Any]]) -> list[int]:
        """Add the messages not seen yet (with the next turn's generation prompt); return all ids."""
        new = self._new_messages(messages)
        if not self.input_ids:
            ids = self.template.prompt_ids(new)
            self.prompt_length = len(ids)
        else:
            ids = self.template.increment_ids(self._last_model_ids, new)
        self._append(ids, mask=0)
        self._seen.extend((str(m.get("role")), str(m.get("content"))) for m in new)
        return list(self.input_ids)

    def add_context(self, token_ids: Sequence[int]) -> None:
        """Add tokens the model conditions on but did not generate (mask 0): a prompt, an observation.

        For sequences built from token ids directly (the gateway's samples), not from messages.
        """
        ids = [int(t) for t in token_ids]
        if not self.input_ids:
            self.prompt_length = len(ids)
        self._append(ids, mask=0)

    def add_generation(self, token_ids: Sequence[int], logprobs: Sequence[float] | None) -> None:
        """Add a model turn exactly as sampled."""
        token_ids = [int(t) for t in token_ids]
        if logprobs is not None and len(logprobs) != len(token_ids):
            raise ValueError(f"{len(logprobs)} log-probs for {len(token_ids)} generated tokens")
        start = len(self.input_ids)
        self._append(token_ids, mask=1, logprobs=logprobs)
        self.turn_spans.append((start, len(self.input_ids)))
        self._last_model_ids = token_ids
        self._seen.append((_MODEL_TURN, ""))

    def _append(self, ids: list[int], *, mask: int, logprobs: Sequence[float] | None = None) -> None:
        self.input_ids.extend(ids)
        self.loss_mask.extend([mask] * len(ids))
        if mask == 0:
            values = [0.0] * len(ids)
        elif logprobs is None:
            values = [math.nan] * len(ids)
        else:
            values = [float(x) for x in logprobs]
        self.logprobs.extend(values)

    def _new_messages(self, messages: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        """Check `messages` starts with what was seen (model turns: any assistant message)."""
        messages = list(messages)
        if len(messages) < len(self._seen):
            raise ConversationRewritten(
                f"chat() got {len(messages)} messages but the episode already had {len(self._seen)}")
        for index, ((role, content), message) in enumerate(zip(self._seen, messages)):
            if role == _MODEL_TURN:
                if message.get("role") != "assistant":
                    raise ConversationRewritten(
                        f"message {index} should be the model's reply (role assistant), got role "
                        f"{message.get('role')!r}")
            elif (str(message.get("role")), str(message.get("content"))) != (role, content):
                raise ConversationRewritten(f"message {index} ({role}) changed after the model saw it")
        return messages[len(self._seen):]


def episode_tokens(turns: Sequence[Turn], template: ChatTemplate) -> TokenSequence:
    """Replay a trajectory's turns: each turn with `token_ids` is a model turn, the rest context."""
    sequence = TokenSequence(template)
    messages: list[dict[str, Any]] = []
    for turn in turns:
        if turn.token_ids is not None:
            sequence.extend(messages)
            sequence.add_generation(turn.token_ids, turn.logprobs)
        messages.append(as_message(turn))
    return sequence
