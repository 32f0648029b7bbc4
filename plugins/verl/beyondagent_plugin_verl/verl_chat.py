"""The `llm` a workflow gets inside verl's rollout: verl's server manager, token in, token out.

One `VerlChat` per episode. Each `chat(messages)` adds the chat-template tokens of the new
messages to the episode's `TokenSequence`, asks verl's `server_manager.generate(request_id,
prompt_ids=..., sampling_params=...)` for the next turn (the same request id for the whole
episode, so verl routes it to the same vLLM replica and its prefix cache), and records the
sampled ids and log-probs exactly as the server returned them. No text is re-tokenized.

The budget is verl's: the first prompt at most `prompt_length` tokens, everything after it (model
turns and observations) at most `response_length`; a turn gets at most `max_new_tokens`.
No verl import here: `server_manager` is anything with that `generate` coroutine.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from beyondagent_core.runtime.tokens import (
    ChatTemplate,
    ContextLengthExceeded,
    TokenSequence,
)
from beyondagent_core.types import Turn

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
        output = await self.server_manager.generate(self.request_id, prompt_ids=list(ids), sampling_params=params)
        token_ids = [int(t) for t in output.token_ids]
        logprobs = [float(x) for x in output.log_probs] if output.log_probs is not None else None
        self.sequence.add_generation(token_ids, logprobs)
        extra = getattr(output, "extra_fields", None) or {}
        self.generations.append({"prompt_ids": list(ids), "token_ids": token_ids, "log_probs": logprobs,
                                 "stop_reason": getattr(output, "stop_reason", None),
                                 # the weights' version (trainer step) the server generated with
                                 "min_global_steps": extra.get("min_global_steps", extra.get("global_steps")),
                                 "max_global_steps": extra.get("max_global_steps", extra.get("global_steps"))})
        text = self.template.tokenizer.decode(token_ids, skip_special_tokens=True)
        return Turn(role="assistant", content=text, token_ids=token_ids, logprobs=logprobs,
                    finish_reason=self._finish_reason(token_ids, params["max_tokens"]))

    def _finish_reason(self, token_ids: list[int], limit: int) -> str:
        """Why a turn ended: "length" when it used its whole token limit without ending on eos or end-of-turn."""
        ends = {self.template.tokenizer.eos_token_id, *self.template.turn_suffix_ids[:1]}
        return "length" if len(token_ids) >= limit and (not token_ids or token_ids[-1] not in ends) else "stop"

    def weight_versions(self, fallback: int | None) -> tuple[int | None, int | None]:
        """The first and last weights version (trainer step) this episode was generated with."""
        first = next((g["min_global_steps"] for g in self.generations if g["min_global_steps"] is not None), None)
        last = next((g["max_global_steps"] for g in reversed(self.generations) if g["max_global_steps"] is not None),
                    None)
        return (first if first is not None else fallback), (last if last is not None else fallback)


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
