"""verl's engine is asked to stop a turn at the template's end-of-turn token, not only at the model's eos.

A base checkpoint with a chat template (Qwen2.5 or Llama-3 base models) ends a turn with a token that
is not its eos; vLLM, SGLang and our CPU rollout stop at the eos of the model's configs alone, so every
turn would run on to its token limit. `VerlChat` (a workflow's `llm`) and `VerlGenerator` (the gateway's)
send `stop_token_ids`. `EngineLike` stands in for verl's server manager (no verl import here): it stops
where vLLM does, at eos or a stop id, keeping that token. The tokenizer is tiny's with eos set to
`<|endoftext|>`, so end-of-turn (`<|im_end|>`) and eos differ.
"""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest
from beyondagent_plugin_gateway.episode import GenerationSettings
from beyondagent_plugin_verl.verl_chat import VerlChat, VerlGenerator

from beyondagent_core.runtime.tokens import ChatTemplate

load_tokenizer = pytest.importorskip("beyondagent_plugin_torch.models").load_tokenizer


class EngineLike:
    """Answers with `stream`, cut after the first token that is the model's eos or one of the request's
    `stop_token_ids` (vLLM's rule); records each request's sampling params."""

    def __init__(self, stream: list[int], eos: int):
        self.stream, self.eos, self.params = stream, eos, []

    async def generate(self, request_id: str, *, prompt_ids: list[int], sampling_params: dict) -> SimpleNamespace:
        self.params.append(dict(sampling_params))
        stops = {self.eos, *sampling_params.get("stop_token_ids", ())}
        ids = []
        for token in self.stream[: sampling_params["max_tokens"]]:
            ids.append(token)
            if token in stops:
                break
        return SimpleNamespace(token_ids=ids, log_probs=[-0.1] * len(ids), stop_reason="completed")


def base_checkpoint_setup() -> tuple[ChatTemplate, int, list[int]]:
    """tiny's tokenizer with eos `<|endoftext|>`; the end-of-turn id; a reply that goes on after it."""
    tokenizer = load_tokenizer("tiny")
    tokenizer.eos_token = "<|endoftext|>"
    template = ChatTemplate(tokenizer)
    end_of_turn = template.turn_suffix_ids[0]
    assert end_of_turn != tokenizer.eos_token_id == tokenizer.convert_tokens_to_ids("<|endoftext|>")
    words = tokenizer.encode("The answer is 3 and more words", add_special_tokens=False)
    return template, end_of_turn, [*words[:3], end_of_turn, *words[3:]]


def test_a_workflows_turn_ends_at_the_end_of_turn_token() -> None:
    template, end_of_turn, stream = base_checkpoint_setup()
    engine = EngineLike(stream, template.tokenizer.eos_token_id)
    chat = VerlChat(engine, template, {"temperature": 1.0}, request_id="r", prompt_length=512,
                    response_length=512, max_new_tokens=16)
    turn = asyncio.run(chat.chat([{"role": "user", "content": "What is 0 + 3?"}]))
    assert engine.params[0]["stop_token_ids"] == sorted({end_of_turn, template.tokenizer.eos_token_id})
    assert turn.token_ids == stream[:4] and turn.finish_reason == "stop"


def test_a_gateway_call_asks_to_stop_at_the_end_of_turn_token_too() -> None:
    template, end_of_turn, stream = base_checkpoint_setup()
    engine = EngineLike(stream, template.tokenizer.eos_token_id)
    chat = VerlChat(engine, template, {}, request_id="r", prompt_length=512, response_length=512, max_new_tokens=16)
    generator = VerlGenerator(chat)
    ids, _ = asyncio.run(generator.generate([1, 2, 3], GenerationSettings(1.0, 1.0, 16), session="s"))
    assert end_of_turn in engine.params[0]["stop_token_ids"] and ids == stream[:4]
