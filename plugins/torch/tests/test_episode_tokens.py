"""Multi-turn token sequences with real tokenizers: tiny's and the real model's (tiny_and_real.py).

The sequence must read exactly as the chat template renders the conversation (the real
template's default system prompt included, once), with the loss mask on the model's own ids
only, and the rollout's live sequence must equal the replay of the saved trajectory.
"""

from __future__ import annotations

import asyncio

import pytest
from tiny_and_real import both_models

from beyondagent_core.runtime.tokens import ChatTemplate, ConversationRewritten, TokenSequence, episode_tokens
from beyondagent_core.types import Turn


def model_turn(tokenizer, text: str, *, stopped: bool = True) -> Turn:
    ids = tokenizer.encode(text, add_special_tokens=False)
    if stopped:
        ids.append(tokenizer.convert_tokens_to_ids("<|im_end|>"))
    return Turn(role="assistant", content=text, token_ids=ids, logprobs=[-0.5] * len(ids))


def conversation(tokenizer, *, system: bool = True) -> list[Turn]:
    """Three model turns; without `system` the real template adds its default system prompt."""
    opening = [Turn("system", "You are in a grid. Answer with left, right, up or down.")] if system else []
    return [
        *opening,
        Turn("user", "You are at row 0, column 0."),
        model_turn(tokenizer, "right"),
        Turn("user", "You are at row 0, column 1."),
        model_turn(tokenizer, "Action: down"),
        Turn("user", "Invalid action."),
        Turn("user", "Try again: you are at row 0, column 1."),
        model_turn(tokenizer, "down"),
    ]


@pytest.mark.parametrize("system", [True, False], ids=["system", "no-system"])
def test_the_sequence_reads_as_the_chat_template_renders_it(tokenizer, system) -> None:
    turns = conversation(tokenizer, system=system)
    sequence = episode_tokens(turns, ChatTemplate(tokenizer))
    messages = [{"role": t.role, "content": t.content} for t in turns]
    rendered = tokenizer.apply_chat_template(messages, tokenize=False)
    # The template closes the last assistant turn with "<|im_end|>\n"; the model stopped at <|im_end|>.
    assert tokenizer.decode(sequence.input_ids) + "\n" == rendered
    # Id for id too (the model turns here are their text's own encoding): the increments tokenized
    # on their own give the ids of the whole rendering.
    assert sequence.input_ids == tokenizer.encode(rendered.removesuffix("\n"), add_special_tokens=False)
    assert len(sequence.input_ids) == len(sequence.loss_mask) == len(sequence.logprobs)
    # The real template adds its default system prompt to a conversation without one: once, first.
    alone = tokenizer.apply_chat_template([{"role": "user", "content": "u"}], tokenize=False)
    default = alone.split("<|im_start|>user")[0]
    opening = "<|im_start|>system\nYou are in a grid" if system else default
    text = tokenizer.decode(sequence.input_ids)
    assert text.startswith(opening) and text.count("<|im_start|>system") == (1 if opening else 0)


def test_the_mask_covers_exactly_the_model_ids(tokenizer) -> None:
    turns = conversation(tokenizer)
    sequence = episode_tokens(turns, ChatTemplate(tokenizer))
    masked = [t for t, m in zip(sequence.input_ids, sequence.loss_mask) if m]
    expected = [i for t in turns if t.token_ids for i in t.token_ids]
    assert masked == expected
    assert sequence.model_turns == 3 and sequence.generated_tokens == len(expected)
    # Each model turn is one contiguous run of 1s, its recorded log-probs aligned with it.
    runs = "".join(map(str, sequence.loss_mask)).split("0")
    assert [len(r) for r in runs if r] == [len(t.token_ids) for t in turns if t.token_ids]
    assert all(lp == -0.5 for lp, m in zip(sequence.logprobs, sequence.loss_mask) if m)
    assert all(lp == 0.0 for lp, m in zip(sequence.logprobs, sequence.loss_mask) if not m)
    # The prompt ends with the generation prompt and precedes the first model token.
    assert tokenizer.decode(sequence.input_ids[: sequence.prompt_length]).endswith("<|im_start|>assistant\n")
    assert sequence.loss_mask[sequence.prompt_length] == 1


def test_model_output_is_never_retokenized(tokenizer) -> None:
    # "right" + "down" sampled as two odd pieces: re-tokenizing the text would merge them.
    odd = [tokenizer.convert_tokens_to_ids("r"), tokenizer.convert_tokens_to_ids("ight")]
    assert None not in odd and tokenizer.encode("right", add_special_tokens=False) != odd
    turns = [Turn("user", "go"), Turn("assistant", "right", token_ids=odd, logprobs=[-1.0, -2.0])]
    sequence = episode_tokens(turns, ChatTemplate(tokenizer))
    assert [t for t, m in zip(sequence.input_ids, sequence.loss_mask) if m] == odd


def test_a_turn_cut_at_its_token_limit_is_closed_by_the_template(tokenizer) -> None:
    turns = [Turn("user", "go"), model_turn(tokenizer, "left left", stopped=False), Turn("user", "again"),
             model_turn(tokenizer, "up")]
    sequence = episode_tokens(turns, ChatTemplate(tokenizer))
    text = tokenizer.decode(sequence.input_ids)
    assert "left left<|im_end|>\n<|im_start|>user\nagain<|im_end|>\n<|im_start|>assistant\nup<|im_end|>" in text
    im_end = tokenizer.convert_tokens_to_ids("<|im_end|>")
    closing = sequence.input_ids.index(im_end, sequence.prompt_length)
    assert sequence.loss_mask[closing] == 0  # the template's, not the model's


def test_a_rewritten_conversation_is_refused(tokenizer) -> None:
    sequence = TokenSequence(ChatTemplate(tokenizer))
    sequence.extend([{"role": "user", "content": "go"}])
    sequence.add_generation(tokenizer.encode("left", add_special_tokens=False), None)
    with pytest.raises(ConversationRewritten, match="changed after the model saw it"):
        sequence.extend([{"role": "user", "content": "GO"}, {"role": "assistant", "content": "left"}])
    with pytest.raises(ConversationRewritten, match="should be the model's reply"):
        sequence.extend([{"role": "user", "content": "go"}, {"role": "user", "content": "left"}])


@both_models
@pytest.mark.parametrize("system", [True, False], ids=["system", "no-system"])
def test_the_live_rollout_sequence_equals_the_replayed_trajectory(policy, system) -> None:
    from beyondagent_plugin_torch.generation import ChatScheduler, Sampling
    from beyondagent_plugin_torch.policy_chat import PolicyChat
    from beyondagent_plugin_torch.trainer import stop_token_ids
    from torch_test_envs import WordGame, WordGameConfig

    from beyondagent_core.envs.local import LocalAsyncEnv
    from beyondagent_core.runtime.react import ReactConfig, ReactWorkflow
    from beyondagent_core.types import Task

    model, tokenizer = policy
    template = ChatTemplate(tokenizer)
    stops = stop_token_ids(model, tokenizer, template)  # as the trainer's scheduler: eos and end-of-turn
    scheduler = ChatScheduler(model, eos_token_ids=stops, pad_token_id=tokenizer.pad_token_id)

    async def episode():
        llm = PolicyChat(scheduler, template, Sampling(1.0, 1.0, 6), episode=0, max_episode_tokens=400, seed=1)
        with scheduler.episode():
            async with LocalAsyncEnv(WordGame(WordGameConfig(turns=3, system=system))) as env:
                trajectory = await ReactWorkflow(ReactConfig(max_turns=3)).run(Task("t"), env, llm)
        return llm.sequence, trajectory

    live, trajectory = asyncio.run(episode())
    replayed = episode_tokens(trajectory.turns, template)
    assert live.model_turns == 3
    for turn in (turn for turn in trajectory.turns if turn.token_ids is not None):
        # A turn that did not end on a stop token used its whole limit of 6 tokens: it was cut off.
        ended = turn.token_ids[-1] in stops
        assert turn.finish_reason == ("stop" if ended else "length") and (ended or len(turn.token_ids) == 6)
    assert (live.input_ids, live.loss_mask, live.logprobs) == (replayed.input_ids, replayed.loss_mask,
                                                                replayed.logprobs)


class CountingTokenizer:
    """The real tokenizer, counting its chat-template renderings and encodings."""

    def __init__(self, tokenizer):
        self.tokenizer, self.renders, self.encodes = tokenizer, 0, 0

    def apply_chat_template(self, *args, **kwargs):
        self.renders += 1
        return self.tokenizer.apply_chat_template(*args, **kwargs)

    def encode(self, *args, **kwargs):
        self.encodes += 1
        return self.tokenizer.encode(*args, **kwargs)


def test_a_groups_shared_prompt_is_rendered_and_tokenized_once(tokenizer) -> None:
    """A group's rollouts start from the same messages: the template remembers their ids (a copy each
    time, so one episode's sequence cannot change another's), and a different conversation is its own."""
    counting = CountingTokenizer(tokenizer)
    template = ChatTemplate(counting)
    uncached = ChatTemplate(tokenizer)
    messages = [{"role": "system", "content": "Answer with one direction word."},
                {"role": "user", "content": "Which way? (3)"}]
    renders, encodes = counting.renders, counting.encodes
    first = template.prompt_ids(messages)
    first.append(-1)  # the caller's list is its own
    assert template.prompt_ids(messages) == uncached.prompt_ids(messages)
    assert (counting.renders - renders, counting.encodes - encodes) == (1, 1)
    other = [messages[0], {"role": "user", "content": "Which way? (4)"}]
    assert template.prompt_ids(other) == uncached.prompt_ids(other) != uncached.prompt_ids(messages)
    # An observation after a model turn: the increment is remembered too, the closing suffix is not.
    observation = [{"role": "user", "content": "Again: which way?"}]
    stopped, cut = [5, tokenizer.convert_tokens_to_ids("<|im_end|>")], [5, 6]
    assert template.increment_ids(stopped, observation) == uncached.increment_ids(stopped, observation)
    renders = counting.renders
    assert template.increment_ids(cut, observation) == uncached.increment_ids(cut, observation)
    assert counting.renders == renders
    assert len(template.increment_ids(cut, observation)) == len(template.increment_ids(stopped, observation)) + 1
    # Messages that are not plain JSON are rendered every time, not remembered under a lossy key.
    odd = [{"role": "user", "content": "Which way?", "extra": object()}]
    renders = counting.renders
    template.prompt_ids(odd)
    template.prompt_ids(odd)
    assert counting.renders == renders + 2
