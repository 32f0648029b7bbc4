"""`TokenChat`'s budgets and `split_response` (beyondagent_core/runtime/token_chat.py), token for token.

From the eighth audit, whose mutants found no core test of them: the response budget counts only what
came after the first prompt (model turns and observations), never the prompt itself, and
`split_response` cuts the response `response_length` tokens after the prompt's end (dropping the
observations after the last model turn). `CharTokenizer` is a ChatML template over one token per
character (each special token one token), so every length below is counted by hand; `FixedChat`
answers each turn with the ids it is given, as the verl plugin's test does with its stand-in server.
"""

from __future__ import annotations

import asyncio

import pytest

from beyondagent_core.runtime.token_chat import PromptTooLong, TokenChat, split_response
from beyondagent_core.runtime.tokens import ChatTemplate, ContextLengthExceeded

SPECIAL = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")
IM_END = 2


class CharTokenizer:
    """ChatML, one token per character; `<|endoftext|>` (id 0) is eos, not the end-of-turn `<|im_end|>`."""

    eos_token_id = 0
    all_special_ids = [0, 1, 2]  # as a tokenizer says which ids are its special tokens

    def __init__(self) -> None:
        self.pieces = list(SPECIAL)
        self.ids = {piece: index for index, piece in enumerate(SPECIAL)}

    def apply_chat_template(self, messages, tokenize=False, add_generation_prompt=False) -> str:
        text = "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in messages)
        return text + ("<|im_start|>assistant\n" if add_generation_prompt else "")

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        out, at = [], 0
        while at < len(text):
            piece = next((s for s in SPECIAL if text.startswith(s, at)), text[at])
            if piece not in self.ids:
                self.ids[piece] = len(self.pieces)
                self.pieces.append(piece)
            out.append(self.ids[piece])
            at += len(piece)
        return out

    def decode(self, ids, skip_special_tokens: bool = False) -> str:
        return "".join(self.pieces[i] for i in ids if not (skip_special_tokens and self.pieces[i] in SPECIAL))


class FixedChat(TokenChat):
    """Answers turn k with `replies[k]` (cut to the turn's max_tokens), log-prob -0.5 each."""

    def __init__(self, replies: list[list[int]], **budgets: int):
        super().__init__(ChatTemplate(CharTokenizer()), {}, **budgets)
        self.replies, self.asked = list(replies), []

    async def complete(self, prompt_ids, params):
        self.asked.append((list(prompt_ids), dict(params)))
        ids = self.replies.pop(0)[: params["max_tokens"]]
        return ids, [-0.5] * len(ids)


USER_HI = {"role": "user", "content": "hi"}
# "<|im_start|>" + "user\n" + "hi" + "<|im_end|>" + "\n" + "<|im_start|>" + "assistant\n": 1+5+2+1+1+1+10
PROMPT = 21


def reply(chat: FixedChat, text: str) -> list[int]:
    """`text` as the model's ids, stopped on the template's end-of-turn token."""
    return [*chat.template.encode(text), IM_END]


def three_turns(response_length: int) -> tuple[FixedChat, list[dict]]:
    """hi -> "ok"; "go" -> "yes"; "x" -> over the budget. Returns the chat and each turn's max_tokens."""
    chat = FixedChat([], prompt_length=PROMPT, response_length=response_length, max_new_tokens=40)
    chat.replies = [reply(chat, "ok"), reply(chat, "yes")]  # 3 and 4 ids
    messages = [USER_HI]
    first = asyncio.run(chat.chat(messages))
    messages += [{"role": "assistant", "content": first.content}, {"role": "user", "content": "go"}]
    second = asyncio.run(chat.chat(messages))
    assert (first.content, second.content) == ("ok", "yes")
    return chat, messages + [{"role": "assistant", "content": second.content}, {"role": "user", "content": "x"}]


def test_the_response_budget_counts_what_came_after_the_prompt_only() -> None:
    chat, messages = three_turns(response_length=30)
    # turn 1: nothing used yet, the whole response budget (under max_new_tokens=40) is the turn's
    assert len(chat.asked[0][0]) == PROMPT and chat.asked[0][1]["max_tokens"] == 30
    # turn 2: 3 model ids + "\n" closing the turn (the model wrote <|im_end|>) + "go"'s 21 -> 25 used, 5 left
    assert len(chat.asked[1][0]) == PROMPT + 25 and chat.asked[1][1]["max_tokens"] == 5
    assert chat.response_used == 29 and len(chat.sequence) == PROMPT + 29
    # turn 3: "\n" + "x"'s 20 -> 50 used of 30: no room
    with pytest.raises(ContextLengthExceeded, match="50 response tokens used of the response budget=30"):
        asyncio.run(chat.chat(messages))
    assert len(chat.asked) == 2


def test_a_turn_gets_the_least_of_its_own_limit_the_backends_and_the_room_left() -> None:
    chat = FixedChat([[5, 6, 7]], prompt_length=PROMPT, response_length=100, max_new_tokens=7)
    asyncio.run(chat.chat([USER_HI], max_tokens=2))
    assert chat.asked[0][1]["max_tokens"] == 2 and chat.asked[0][1]["logprobs"] is True
    assert chat.sequence.input_ids[PROMPT:] == [5, 6]
    chat = FixedChat([[5, 6, 7]], prompt_length=PROMPT, response_length=100, max_new_tokens=7)
    asyncio.run(chat.chat([USER_HI], max_tokens=50))
    assert chat.asked[0][1]["max_tokens"] == 7


def test_the_prompt_budget_holds_a_prompt_of_exactly_its_length() -> None:
    chat = FixedChat([[5]], prompt_length=PROMPT, response_length=10, max_new_tokens=4)
    asyncio.run(chat.chat([USER_HI]))
    chat = FixedChat([[5]], prompt_length=PROMPT - 1, response_length=10, max_new_tokens=4)
    too_long = f"the prompt is {PROMPT} tokens, longer than the prompt budget={PROMPT - 1}"
    with pytest.raises(PromptTooLong, match=too_long):
        asyncio.run(chat.chat([USER_HI]))


def test_split_response_cuts_response_length_tokens_after_the_prompt() -> None:
    chat, messages = three_turns(response_length=30)
    with pytest.raises(ContextLengthExceeded):
        asyncio.run(chat.chat(messages))  # adds the 21 tokens of the last observation, then stops
    sequence = chat.sequence
    assert len(sequence) == PROMPT + 50
    prompt, response, mask, logprobs = split_response(sequence, 30)
    assert prompt == sequence.input_ids[:PROMPT]
    # the response ends on the last model token: the trailing observation is dropped
    assert response == sequence.input_ids[PROMPT:PROMPT + 29] and mask == [1] * 3 + [0] * 22 + [1] * 4
    assert logprobs == [-0.5] * 3 + [0.0] * 22 + [-0.5] * 4
    assert chat.template.tokenizer.decode(response[:3]) == "ok<|im_end|>"
    # a shorter response budget cuts it 10 tokens after the prompt, not at token 10
    prompt, response, mask, logprobs = split_response(sequence, 10)
    assert len(prompt) == PROMPT and response == sequence.input_ids[PROMPT:PROMPT + 10]
    assert mask == [1] * 3 + [0] * 7 and logprobs == [-0.5] * 3 + [0.0] * 7
