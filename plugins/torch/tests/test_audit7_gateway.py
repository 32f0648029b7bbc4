"""A reply the gateway returned comes back in the next prompt as the model wrote it (audit 7), closed once.

The model's reply stops on the template's end-of-turn token (`<|im_end|>`, tiny's eos). The gateway
remembers the reply's text without that token, because the chat template closes the turn itself: when the
agent sends the reply back with a new user message, the next prompt is exactly the template's rendering of
the conversation (one `<|im_end|>` after the reply, not two) and the call continues the first sample.
"""

from __future__ import annotations

import asyncio

from beyondagent_plugin_gateway.api import ChatRequest
from beyondagent_plugin_gateway.episode import GatewayEpisode, GenerationSettings
from tiny_and_real import loaded_tokenizer

from beyondagent_core.runtime.tokens import ChatTemplate


class OneReply:
    """The policy's stand-in: always the same sampled ids, ending on the end-of-turn token."""

    def __init__(self, ids: list[int], eos: int):
        self.ids, self.eos_token_ids = ids, frozenset({eos})

    async def generate(self, prompt_ids, settings, session):
        return list(self.ids), [-0.1] * len(self.ids)

    def end_session(self, session) -> None:
        pass


def test_a_returned_reply_is_rendered_back_with_one_end_of_turn() -> None:
    tokenizer = loaded_tokenizer("tiny")
    im_end = tokenizer.convert_tokens_to_ids("<|im_end|>")
    assert im_end == tokenizer.eos_token_id == 2
    episode = GatewayEpisode(ChatTemplate(tokenizer), OneReply(tokenizer.encode("left", add_special_tokens=False)
                                                               + [im_end], im_end),
                             GenerationSettings(1.0, 1.0, 8), max_episode_tokens=1024)
    first = [{"role": "user", "content": "Which way?"}]

    async def calls():
        reply = await episode.complete(ChatRequest(messages=first))
        content = reply.choices[0].content
        second = [*first, {"role": "assistant", "content": content}, {"role": "user", "content": "Again?"}]
        await episode.complete(ChatRequest(messages=second))
        return content, second

    content, second = asyncio.run(calls())
    assert content == "left"
    expected = tokenizer.apply_chat_template(second, tokenize=False, add_generation_prompt=True)
    prompt = tokenizer.decode(episode.calls[1].prompt_ids)
    assert prompt == expected and prompt.count("left<|im_end|>") == 1 and "<|im_end|><|im_end|>" not in prompt
    assert episode.calls[1].continued and episode.splits == 0
