"""`VerlChat` marks a turn cut off at its token limit (`finish_reason="length"`), which judges read.

No verl import is needed: `FixedServer` stands in for verl's server manager (its `generate`
coroutine) and answers with the token ids it is given; the tokenizer and chat template are the
tiny model's, built locally.
"""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest
from beyondagent_plugin_verl.verl_chat import VerlChat

from beyondagent_core.runtime.tokens import ChatTemplate

load_tokenizer = pytest.importorskip("beyondagent_plugin_torch.models").load_tokenizer


class FixedServer:
    """Stands in for verl's server manager: returns `token_ids` for every request."""

    def __init__(self, token_ids: list[int]):
        self.token_ids = token_ids

    async def generate(self, request_id: str, *, prompt_ids: list[int], sampling_params: dict) -> SimpleNamespace:
        ids = self.token_ids[: sampling_params["max_tokens"]]
        return SimpleNamespace(token_ids=ids, log_probs=[-0.1] * len(ids), stop_reason="completed")


@pytest.mark.parametrize(("ending", "max_new_tokens", "reason"), [
    ("eos", 8, "stop"),       # ended by the model
    ("none", 8, "stop"),      # shorter than the limit: a stop string or the server ended it
    ("none", 3, "length"),    # cut at the limit
    ("eos", 3, "length"),     # the limit came before the model's eos
])
def test_finish_reason(ending: str, max_new_tokens: int, reason: str) -> None:
    tokenizer = load_tokenizer("tiny")
    ids = tokenizer.encode("The answer is 3", add_special_tokens=False)[:3]
    assert len(ids) == 3
    if ending == "eos":
        ids = [*ids, tokenizer.eos_token_id]
    chat = VerlChat(FixedServer(ids), ChatTemplate(tokenizer), {}, request_id="r", prompt_length=512,
                    response_length=512, max_new_tokens=max_new_tokens)
    turn = asyncio.run(chat.chat([{"role": "user", "content": "What is 0 + 3?"}]))
    assert turn.finish_reason == reason
