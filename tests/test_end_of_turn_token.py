"""`ChatTemplate.end_of_turn_id`: the token a model ends its turn with, shared by every backend's stop ids.

It is the first token of what the template writes after an assistant message when that token is special
(`<|im_end|>`); a template that closes a turn with plain text (a newline) has none, and no engine is asked
to stop there (it would cut every reply at its first line). Character-level ChatML stands in for a tokenizer.
"""

from __future__ import annotations

from test_audit8_token_chat import IM_END, CharTokenizer

from beyondagent_core.runtime.token_chat import TokenChat
from beyondagent_core.runtime.tokens import ChatTemplate


class PlainClose(CharTokenizer):
    """Assistant turns closed by a newline (a template without an end-of-turn token)."""

    def apply_chat_template(self, messages, tokenize=False, add_generation_prompt=False) -> str:
        text = "".join(f"{m['role']}: {m['content']}\n" for m in messages)
        return text + ("assistant: " if add_generation_prompt else "")


def chat(tokenizer: CharTokenizer) -> TokenChat:
    return TokenChat(ChatTemplate(tokenizer), {}, prompt_length=64, response_length=64, max_new_tokens=8)


def test_a_special_closing_token_is_the_end_of_turn_and_a_stop_id() -> None:
    template = ChatTemplate(CharTokenizer())
    assert template.end_of_turn_id == IM_END == template.turn_suffix_ids[0]
    assert chat(CharTokenizer()).stop_token_ids == [0, IM_END]


def test_plain_closing_text_is_no_end_of_turn_and_never_a_stop_id() -> None:
    template = ChatTemplate(PlainClose())
    assert template.turn_suffix_ids and template.end_of_turn_id is None
    assert chat(PlainClose()).stop_token_ids == [0]  # eos only: not the newline
