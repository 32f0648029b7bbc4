"""ChatTemplate's remembered ids (audit 7): the memo is keyed by the kind of ids and by the whole conversation.

`prompt_ids` and `increment_ids` of the very same messages are different token ids (the first prompt has
the template's opening, an increment only what follows a model turn), and two conversations that end with
the same message but differ earlier are different prompts: each must get the ids an uncached template
computes, whatever was asked before.
"""

from __future__ import annotations

from beyondagent_core.runtime.tokens import ChatTemplate


def test_a_prompt_and_an_increment_of_the_same_messages_are_remembered_apart(tokenizer) -> None:
    template = ChatTemplate(tokenizer)
    messages = [{"role": "user", "content": "You are at row 0, column 1."}]
    cut = [5, 6]  # a model turn cut at its token limit: the whole closing text comes first
    prompt = ChatTemplate(tokenizer).prompt_ids(messages)
    increment = ChatTemplate(tokenizer).increment_ids(cut, messages)
    # (with the real model's template the prompt opens with its default system prompt, an increment does not)
    # asked in either order on one template, each is what a fresh template computes
    assert template.prompt_ids(messages) == prompt
    assert template.increment_ids(cut, messages) == increment
    other = ChatTemplate(tokenizer)
    assert other.increment_ids(cut, messages) == increment
    assert other.prompt_ids(messages) == prompt


def test_conversations_ending_alike_but_opening_differently_are_different_prompts(tokenizer) -> None:
    template = ChatTemplate(tokenizer)
    question = {"role": "user", "content": "Which way?"}
    grid = [{"role": "system", "content": "You are in a grid."}, question]
    maze = [{"role": "system", "content": "You are in a maze with walls."}, question]
    first, second = template.prompt_ids(grid), template.prompt_ids(maze)
    assert first == ChatTemplate(tokenizer).prompt_ids(grid)
    assert second == ChatTemplate(tokenizer).prompt_ids(maze)
    assert first != second
    assert "maze" in tokenizer.decode(second) and "maze" not in tokenizer.decode(first)
