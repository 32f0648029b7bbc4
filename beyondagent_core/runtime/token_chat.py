"""The `llm` a workflow gets inside another framework's rollout: token in, token out, in its budgets.

verl's agent loop and Trinity-RFT's workflow both run our workflows against an engine that takes
prompt token ids and answers with the sampled ids and their log-probs. `TokenChat` is what they
share: one per episode; each `chat(messages)` adds the chat-template tokens of the new messages to
the episode's `TokenSequence`, asks `complete(prompt_ids, params)` (the subclass's engine) for the
next turn, and records the sampled ids and log-probs exactly as the engine returned them. No text
is re-tokenized.

The budget is the framework's: the first prompt at most `prompt_length` tokens, everything after
it (model turns and observations) at most `response_length`; a turn gets at most `max_new_tokens`.
`split_response` cuts a finished episode into that prompt and response.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from beyondagent_core.runtime.tokens import ChatTemplate, ContextLengthExceeded, TokenSequence
from beyondagent_core.types import Turn

SAMPLING_KEYS = ("temperature", "top_p", "max_tokens", "stop")


class PromptTooLong(ValueError):
    """The episode's first prompt is longer than the framework's prompt budget (`prompt_length`)."""


class TokenChat:
    """A workflow's chat LLM over a token-in/token-out engine; subclasses implement `complete`.

    `engine`, `prompt_limit` and `response_limit` name the framework's settings in errors
    ("verl's rollout", "verl's rollout.prompt_length", ...).
    """

    engine = "the rollout engine"
    prompt_limit = "the prompt budget"
    response_limit = "the response budget"

    def __init__(self, template: ChatTemplate, sampling_params: dict[str, Any], *, prompt_length: int,
                 response_length: int, max_new_tokens: int):
        self.template = template
        self.sampling_params = dict(sampling_params)
        self.prompt_length = prompt_length
        self.response_length = response_length
        self.max_new_tokens = max_new_tokens
        self.sequence = TokenSequence(template)

    async def complete(self, prompt_ids: Sequence[int], params: dict[str, Any]) -> tuple[list[int], list[float] | None]:
        """The engine's next turn for `prompt_ids`: (sampled ids, their log-probs or None)."""
        raise NotImplementedError

    @property
    def response_used(self) -> int:
        return len(self.sequence) - self.sequence.prompt_length

    async def chat(self, messages: Sequence[dict[str, Any]], **sampling: Any) -> Turn:
        unknown = sorted(set(sampling) - set(SAMPLING_KEYS))
        if unknown:
            raise TypeError(f"chat() got unsupported sampling option(s) {', '.join(unknown)}; "
                            f"{self.engine} takes {', '.join(SAMPLING_KEYS)}")
        first_turn = len(self.sequence) == 0
        ids = self.sequence.extend(messages)
        if first_turn and len(ids) > self.prompt_length:
            raise PromptTooLong(f"the prompt is {len(ids)} tokens, longer than {self.prompt_limit}="
                                f"{self.prompt_length} (backend.max_prompt_tokens)")
        room = self.response_length - self.response_used
        if room <= 0:
            raise ContextLengthExceeded(f"{self.response_used} response tokens used of {self.response_limit}="
                                        f"{self.response_length} (backend.max_response_tokens)")
        params = dict(self.sampling_params)
        params.update({key: value for key, value in sampling.items() if key != "max_tokens"})
        params["max_tokens"] = min(int(sampling.get("max_tokens") or self.max_new_tokens), self.max_new_tokens, room)
        params["logprobs"] = True
        params["stop_token_ids"] = self.stop_token_ids
        token_ids, logprobs = await self.complete(ids, params)
        self.sequence.add_generation(token_ids, logprobs)
        text = self.template.tokenizer.decode(token_ids, skip_special_tokens=True)
        return Turn(role="assistant", content=text, token_ids=token_ids, logprobs=logprobs,
                    finish_reason=self.finish_reason(token_ids, params["max_tokens"]))

    @property
    def end_ids(self) -> frozenset[int]:
        """The tokens that end a turn: eos and the template's end-of-turn token (`ChatTemplate.end_of_turn_id`:
        a special token only, never plain text the engine must not stop at)."""
        return frozenset(i for i in (self.template.tokenizer.eos_token_id, self.template.end_of_turn_id)
                         if i is not None)

    @property
    def stop_token_ids(self) -> list[int]:
        """What the engine is asked to stop at besides its own eos (vLLM's and SGLang's `stop_token_ids`):
        a base checkpoint whose template ends a turn with a token that is not its eos would otherwise
        run on past the end of every turn to the token limit."""
        return sorted(self.end_ids)

    def finish_reason(self, token_ids: list[int], limit: int) -> str:
        """Why a turn ended: "length" when it used its whole token limit without ending on eos or end-of-turn."""
        return "length" if len(token_ids) >= limit and (not token_ids or token_ids[-1] not in self.end_ids) else "stop"


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
