"""One gateway episode (`episode.py`, `samples.py`) on the tiny model's tokenizer, class-wide.

- each per-episode limit exactly on the limit and one past: `max_calls`, `max_n`, `max_concurrent_calls`
  (a call that fails, or is refused after it started, gives its slot back), the sample's room
  (`max_episode_tokens` minus the prompt), the token budget shared by `n` choices, `max_prompt_bytes`
  (its documented formula and its comparison);
- the budget token by token: reserved when a call starts, what was not sampled given back (all of it
  when generation fails), never more than was reserved taken;
- the request's sampling settings over the backend's defaults (0.0 is a temperature, not "unset");
- each choice's KV-cache session: the first continues the sample's, the others ended after the call,
  every sample's ended when the episode closes; a closed episode refuses calls;
- every reply form: end-of-turn ("stop"), cut at the token limit ("length"), a stop string, Hermes
  tool calls (ids per call, prose kept, malformed ones left as text, no tools offered: text), `turns()`;
- end-of-turn vs eos: `tiny_eos` (eos `<|endoftext|>`, turns ending on `<|im_end|>`) replays a reply
  with one `<|im_end|>` and continues its sample;
- the answer-leak guard's refusal (not counted as a call), a template error, a lone surrogate;
- `SampleBuilder`: splits counted only when a sample existed, a concurrent continuation forks,
  samples without sampled tokens are not trained, `joined_view`'s offsets.

`Scripted` stands in for the backend's `TokenGenerator` (the policy): it answers replies of known
length, or holds a call open on an event, so each limit can be met exactly.
"""

from __future__ import annotations

import asyncio
import json
import shutil
from typing import Any

import pytest

from beyondagent_core.runtime.answer_leaks import AnswerLeakGuard
from beyondagent_core.runtime.tokens import ChatTemplate, TokenSequence
from beyondagent_core.types import Task
from beyondagent_plugin_gateway.api import ApiError, ChatRequest, parse_request
from beyondagent_plugin_gateway.episode import (
    DEFAULT_MAX_CONCURRENT_CALLS,
    DEFAULT_MAX_N,
    NORMALIZER_SHRINK,
    EpisodeEnded,
    GatewayEpisode,
    GenerationSettings,
    longest_token_bytes,
)
from beyondagent_plugin_gateway.samples import Reply, SampleBuilder, joined_view
from gateway_testkit import Scripted

load_tokenizer = pytest.importorskip("beyondagent_plugin_torch.models").load_tokenizer

HI = [{"role": "user", "content": "hi"}]
TOOLS = [{"type": "function", "function": {"name": "move", "parameters": {"type": "object"}}}]


def episode_of(template: ChatTemplate, generator: Scripted, *, max_tokens: int = 8, max_episode_tokens: int = 1024,
               temperature: float = 0.7, top_p: float = 0.9, **limits: int) -> GatewayEpisode:
    return GatewayEpisode(template, generator, GenerationSettings(temperature, top_p, max_tokens),
                          max_episode_tokens=max_episode_tokens, **limits)


def request(messages: list | None = None, **body: Any) -> ChatRequest:
    return parse_request({"messages": messages or HI, **body})


def run(coroutine: Any) -> Any:
    return asyncio.run(coroutine)


async def refused(episode: GatewayEpisode, req: ChatRequest) -> ApiError:
    with pytest.raises(ApiError) as caught:
        await episode.complete(req)
    return caught.value


def prompt_length(template: ChatTemplate, messages: list) -> int:
    return len(template.encode(template.tokenizer.apply_chat_template(messages, tokenize=False,
                                                                        add_generation_prompt=True)))


# --- the limits ---------------------------------------------------------------------------------

def test_the_episode_defaults_are_the_workflows() -> None:
    from beyondagent_plugin_gateway.config import AgentConfig

    config = AgentConfig(entrypoint="m:f")
    assert (DEFAULT_MAX_CONCURRENT_CALLS, DEFAULT_MAX_N) == (config.max_concurrent_calls, config.max_n) == (4, 4)
    assert NORMALIZER_SHRINK == 4


def test_max_calls_exactly_then_429(template) -> None:
    generator = Scripted(template.tokenizer)
    episode = episode_of(template, generator, max_calls=3)

    async def calls():
        for _ in range(3):
            await episode.complete(request())
        return await refused(episode, request())

    error = run(calls())
    assert (error.status, error.code) == (429, "too_many_calls") and "made 3 model calls" in error.message
    assert len(episode.calls) == 3 and len(generator.asked) == 3


def test_max_n_exactly_then_400(template) -> None:
    generator = Scripted(template.tokenizer)
    episode = episode_of(template, generator, max_n=3)

    async def calls():
        result = await episode.complete(request(n=3))
        return result, await refused(episode, request(n=4))

    result, error = run(calls())
    assert len(result.choices) == 3 and len(generator.asked) == 3
    assert (error.status, error.param) == (400, "n") and "at most 3 choices (workflow.max_n)" in error.message


def test_max_concurrent_calls_exactly_then_429_and_every_exit_gives_its_slot_back(template) -> None:
    generator = Scripted(template.tokenizer)
    episode = episode_of(template, generator, max_concurrent_calls=3, max_episode_tokens=64)

    async def calls():
        generator.gate = asyncio.Event()
        held = [asyncio.create_task(episode.complete(request())) for _ in range(3)]
        while generator.entered < 3:
            await asyncio.sleep(0)
        # refused at once (the bound only turns a call that got through into a failure instead of a hang)
        error = await asyncio.wait_for(refused(episode, request()), 30)
        generator.gate.set()
        await asyncio.gather(*held)
        generator.gate = None
        # a failed generation, and a call refused after it started (its prompt too long), free their slot
        generator.failure = RuntimeError("the policy broke")
        with pytest.raises(RuntimeError, match="the policy broke"):
            await episode.complete(request())
        too_long = await refused(episode, request([{"role": "user", "content": "hi " * 80}]))
        assert too_long.code == "context_length_exceeded"
        generator.gate = asyncio.Event()
        held = [asyncio.create_task(episode.complete(request(max_tokens=1))) for _ in range(3)]
        while generator.entered < 7 and not any(call.done() for call in held):  # one refused: fail, not hang
            await asyncio.sleep(0)
        generator.gate.set()
        await asyncio.gather(*held)
        return error

    error = run(calls())
    assert (error.status, error.code) == (429, "too_many_concurrent_calls")
    assert "3 model calls in flight" in error.message
    assert len(episode.calls) == 6


def test_the_samples_room_exactly_one_token_then_refused(template) -> None:
    length = prompt_length(template, HI)
    generator = Scripted(template.tokenizer)
    fits = episode_of(template, generator, max_episode_tokens=length + 1)
    run(fits.complete(request(max_tokens=50)))
    assert generator.max_tokens == [1]
    error = run(refused(episode_of(template, generator, max_episode_tokens=length), request()))
    assert (error.status, error.param, error.code) == (400, "messages", "context_length_exceeded")
    assert f"the prompt is {length} tokens" in error.message and f"max_episode_tokens={length}" in error.message
    assert len(generator.asked) == 1


def test_the_budget_token_by_token(template) -> None:
    """64 tokens over every call and choice: reserved at the start, the unsampled rest given back."""
    generator = Scripted(template.tokenizer)
    episode = episode_of(template, generator, max_episode_tokens=64, max_tokens=1000)
    long_enough = 64 - prompt_length(template, HI)

    async def calls():
        generator.replies = [[generator.token] * 3]  # asked for 20, sampled 3: 61 left
        await episode.complete(request(max_tokens=20))
        generator.failure = RuntimeError("broke")  # a failed call samples nothing: still 61
        with pytest.raises(RuntimeError):
            await episode.complete(request(max_tokens=30))
        generator.extra = 5  # a backend that returns more than asked is charged what was reserved (10): 51
        await episode.complete(request(max_tokens=10))
        generator.extra = 0
        await episode.complete(request(n=3, max_tokens=1000))  # 51 // 3 = 17 each, all sampled: 0 left
        return await refused(episode, request(max_tokens=1))

    assert long_enough > 20
    error = run(calls())
    assert generator.max_tokens == [20, 30, 10, 17, 17, 17]
    assert (error.param, error.code) == ("max_tokens", "context_length_exceeded")
    assert "sampled its budget of 64 tokens" in error.message and "(0 left for n=1" in error.message


def test_the_budget_shared_by_n_choices_exactly_one_each_then_refused(template) -> None:
    generator = Scripted(template.tokenizer)
    episode = episode_of(template, generator, max_episode_tokens=40, max_tokens=1000)

    async def calls():
        await episode.complete(request(max_tokens=30))
        await episode.complete(request(max_tokens=7))  # 3 left
        error = await refused(episode, request(n=4))
        await episode.complete(request(n=3))  # one token each
        return error

    error = run(calls())
    assert "(3 left for n=4" in error.message
    assert generator.max_tokens == [30, 7, 1, 1, 1]


def test_the_request_s_sampling_settings_over_the_defaults(template) -> None:
    generator = Scripted(template.tokenizer)
    episode = episode_of(template, generator, max_tokens=6, temperature=0.7, top_p=0.9)

    async def calls():
        await episode.complete(request())
        await episode.complete(request(temperature=0.0, top_p=0.25, max_tokens=3))
        await episode.complete(request(temperature=2, max_completion_tokens=9))

    run(calls())
    assert [settings for _, settings, _ in generator.asked] == [
        GenerationSettings(0.7, 0.9, 6), GenerationSettings(0.0, 0.25, 3), GenerationSettings(2.0, 0.9, 9)]


def test_max_prompt_bytes_is_its_formula_and_a_prompt_of_exactly_that_many_bytes_passes(template) -> None:
    tokenizer = template.tokenizer
    longest = max(len(token.encode("utf-8")) for token in tokenizer.get_vocab())
    assert longest_token_bytes(tokenizer) == longest
    generator = Scripted(tokenizer)
    episode = episode_of(template, generator, max_episode_tokens=100)
    assert episode.max_prompt_bytes == 100 * longest * 4
    messages = [{"role": "user", "content": "hé"}]  # 2-byte characters count as bytes
    size = len(tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True).encode())
    episode.max_prompt_bytes = size
    run(episode.complete(request(messages)))
    episode.max_prompt_bytes = size - 1
    error = run(refused(episode, request(messages)))
    assert (error.param, error.code) == ("messages", "context_length_exceeded")
    assert f"the prompt is {size} bytes" in error.message and f"spell more than {size - 1}" in error.message
    assert len(generator.asked) == 1

    class NoVocabulary:
        def get_vocab(self):
            raise NotImplementedError

    assert longest_token_bytes(NoVocabulary()) == 1 << 20


def test_a_lone_surrogate_and_a_template_error_are_400s(template, tmp_path) -> None:
    generator = Scripted(template.tokenizer)
    episode = episode_of(template, generator)
    error = run(refused(episode, request([{"role": "user", "content": "a\ud800b"}])))
    assert error.param == "messages" and "lone UTF-16 surrogate" in error.message
    strict = load_tokenizer("tiny")
    strict.chat_template = ("{% if messages[0].role == 'tool' %}{{ raise_exception('no tool turns here') }}{% endif %}"
                            + strict.chat_template)
    error = run(refused(episode_of(ChatTemplate(strict), generator), request([{"role": "tool", "content": "x"}])))
    assert error.param == "messages" and error.message.startswith("the chat template could not render these messages")
    assert "no tool turns here" in error.message and not generator.asked


def test_an_answer_leak_is_refused_and_not_counted_as_a_call(template) -> None:
    generator = Scripted(template.tokenizer)
    episode = episode_of(template, generator, max_calls=1)
    task = Task(task_id="synthetic/leaky", origin="synthetic", query="q", ground_truth="right, right, down, down",
                seed_task_id="t")
    episode.prompt_guard = AnswerLeakGuard(task)

    async def calls():
        error = await refused(episode, request([{"role": "user", "content": "go: right, right, down, down"}]))
        await episode.complete(request())  # the one call it may make
        return error

    error = run(calls())
    assert (error.status, error.param, error.code) == (400, "messages", "answer_leak")
    assert episode.leak is not None and "synthetic/leaky" in str(episode.leak)
    assert len(episode.calls) == 1 and len(generator.asked) == 1


# --- sessions and closing -----------------------------------------------------------------------

def test_each_choice_s_session_and_closing_ends_them_all(template) -> None:
    generator = Scripted(template.tokenizer)
    episode = episode_of(template, generator, max_tokens=2)

    async def calls():
        first = await episode.complete(request(n=3))
        history = [*HI, first.choices[0].message(), {"role": "user", "content": "again"}]
        await episode.complete(request(history))

    run(calls())
    (_, _, first), (_, _, second), (_, _, third), (_, _, continued) = generator.asked
    samples = episode.builder.samples
    assert len({id(first), id(second), id(third)}) == 3
    assert first is samples[0].session and continued is first  # the continuing call generates in its sample's
    assert generator.ended == [second, third]  # the other choices' sessions, right after their call
    assert episode.calls[1].continued and len(samples) == 3
    episode.close()
    assert generator.ended[2:] == [sample.session for sample in samples] and episode.closed
    with pytest.raises(EpisodeEnded, match="this episode has ended"):
        run(episode.complete(request()))
    assert len(generator.asked) == 4


# --- reply forms --------------------------------------------------------------------------------

def test_reply_forms_and_their_finish_reasons(template) -> None:
    tokenizer = template.tokenizer
    im_end = tokenizer.convert_tokens_to_ids("<|im_end|>")
    words = tokenizer.encode("left down right", add_special_tokens=False)
    call = '<tool_call>\n{"name": "move", "arguments": {"d": "left"}}\n</tool_call>'
    call_ids = tokenizer.encode(call, add_special_tokens=False)
    prose = tokenizer.encode("ok", add_special_tokens=False)
    bad_call = tokenizer.encode('<tool_call>{"name": "move", </tool_call>', add_special_tokens=False)
    generator = Scripted(tokenizer, [*words, im_end], list(words), list(words), [*call_ids, im_end],
                         [*prose, *call_ids, im_end], [*call_ids, *call_ids], [*call_ids, im_end],
                         [*call_ids, *bad_call, im_end], bad_call)
    episode = episode_of(template, generator)

    async def calls():
        requests = [request(), request(), request(stop=["down"]), request(tools=TOOLS), request(tools=TOOLS),
                    request(tools=TOOLS), request(), request(tools=TOOLS), request(tools=TOOLS)]
        return [(await episode.complete(req)).choices[0] for req in requests]

    eot, length, stopped, tool, with_prose, two, no_tools, half, malformed = run(calls())
    assert (eot.content, eot.finish_reason, eot.completion_tokens) == ("left down right", "stop", len(words) + 1)
    assert (length.content, length.finish_reason, length.completion_tokens) == ("left down right", "length",
                                                                                len(words))
    assert (stopped.content.strip(), stopped.finish_reason, stopped.completion_tokens) == ("left", "stop", 2)
    assert episode.calls[2].replies[0].token_ids == words[:2]  # up to the token that completes the stop
    # (that reply had no end-of-turn: the stop string is what ended it)
    assert (tool.content, tool.finish_reason) == (None, "tool_calls")
    assert tool.tool_calls == [{"id": "call_0_0", "type": "function",
                                "function": {"name": "move", "arguments": json.dumps({"d": "left"})}}]
    assert with_prose.content == "ok" and with_prose.tool_calls[0]["id"] == "call_1_0"
    assert [c["id"] for c in two.tool_calls] == ["call_2_0", "call_2_1"] and two.finish_reason == "tool_calls"
    assert no_tools.tool_calls is None and no_tools.finish_reason == "stop" and "<tool_call>" in no_tools.content
    assert half.tool_calls is None and half.finish_reason == "stop" and half.content.count("<tool_call>") == 2
    assert malformed.tool_calls is None and malformed.finish_reason == "length" and "<tool_call>" in malformed.content
    # the raw ids keep the special tokens, the content does not
    assert episode.calls[0].replies[0].text == "left down right<|im_end|>"
    turns = episode.turns()
    assert [turn.role for turn in turns] == ["user", "assistant"] and turns[0].content == "hi"
    assert turns[-1].finish_reason == "length" and turns[-1].token_ids == episode.calls[-1].replies[0].token_ids
    assert turns[-1].logprobs == [-0.5] * len(turns[-1].token_ids)


def test_turns_of_a_tool_call_end_with_stop_and_no_calls_no_turns(template) -> None:
    tokenizer = template.tokenizer
    call_ids = tokenizer.encode('<tool_call>{"name": "move", "arguments": {}}</tool_call>', add_special_tokens=False)
    episode = episode_of(template, Scripted(tokenizer, call_ids))  # no end-of-turn: still a tool call
    assert episode.turns() == []
    history = [{"role": "system", "content": "s"}, *HI]
    choice = run(episode.complete(request(history, tools=TOOLS))).choices[0]
    assert choice.finish_reason == "tool_calls"
    turns = episode.turns()
    assert [turn.role for turn in turns] == ["system", "user", "assistant"]
    assert turns[-1].finish_reason == "stop" and turns[-1].tool_calls == choice.tool_calls
    assert turns[-1].content == ""


@pytest.fixture(scope="module")
def tiny_eos_tokenizer(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """tiny's tokenizer set up as a base checkpoint's: eos `<|endoftext|>`, turns ending on `<|im_end|>`."""
    from beyondagent_plugin_torch.tiny import tiny_model_dir

    directory = tmp_path_factory.mktemp("tiny-eos")
    for source in tiny_model_dir().iterdir():
        if source.is_file() and source.suffix != ".safetensors":
            shutil.copy(source, directory / source.name)
    config = json.loads((directory / "tokenizer_config.json").read_text())
    config.update(eos_token="<|endoftext|>", pad_token="<|endoftext|>")
    (directory / "tokenizer_config.json").write_text(json.dumps(config))
    return load_tokenizer(str(directory))


def test_eos_that_is_not_the_end_of_turn_a_reply_replays_with_one_im_end(tiny_eos_tokenizer) -> None:
    tokenizer = tiny_eos_tokenizer
    im_end, endoftext = tokenizer.convert_tokens_to_ids("<|im_end|>"), tokenizer.convert_tokens_to_ids("<|endoftext|>")
    assert tokenizer.eos_token_id == endoftext != im_end
    template = ChatTemplate(tokenizer)
    assert template.end_of_turn_id == im_end
    reply = tokenizer.encode("left", add_special_tokens=False) + [im_end]
    # the backend stops on both (trainer.stop_token_ids): the eos and the template's end of turn
    generator = Scripted(tokenizer, reply, reply, eos=frozenset({endoftext, im_end}))
    episode = episode_of(template, generator)

    async def calls():
        first = await episode.complete(request())
        second = [*HI, first.choices[0].message(), {"role": "user", "content": "again"}]
        await episode.complete(request(second))
        return first.choices[0], second

    choice, second = run(calls())
    assert (choice.content, choice.finish_reason) == ("left", "stop")
    prompt = tokenizer.decode(episode.calls[1].prompt_ids)
    assert prompt == tokenizer.apply_chat_template(second, tokenize=False, add_generation_prompt=True)
    assert "<|im_end|><|im_end|>" not in prompt and episode.calls[1].continued and episode.splits == 0


# --- samples ------------------------------------------------------------------------------------

def test_splits_count_only_past_the_first_sample_and_a_concurrent_continuation_forks(template) -> None:
    builder = SampleBuilder(template)
    first = builder.prompt("<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n")
    builder.record(first, [Reply([5, 6], [-0.1, -0.2], "a b")])
    assert builder.splits == 0 and len(builder.samples) == 1
    sample = builder.samples[0]
    text = sample.text + "<|im_end|>\n<|im_start|>user\nx<|im_end|>\n<|im_start|>assistant\n"
    one, two = builder.prompt(text), builder.prompt(text)  # two calls with the same history, in flight together
    assert one.continues is sample and two.continues is sample
    (placed,) = builder.record(one, [Reply([7], [-0.3], "c")])
    (forked,) = builder.record(two, [Reply([8], [-0.4], "d")])
    assert placed is sample and forked is not sample and builder.splits == 0
    assert forked.sequence.input_ids == [*two.ids, 8] and forked.sequence.generated_tokens == 1
    assert forked.session is not sample.session
    builder.record(builder.prompt("unrelated"), [Reply([], [], "")])  # a new history: a split
    assert builder.splits == 1 and len(builder.samples) == 3
    assert len(builder.sequences()) == 2  # the sample that sampled nothing is not trained


def test_joined_view_lays_samples_end_to_end(template) -> None:
    first, second = TokenSequence(template), TokenSequence(template)
    first.add_context([1, 2])
    first.add_generation([3, 4], [-0.1, -0.1])
    second.add_context([5])
    second.add_generation([6], [-0.1])
    second.add_context([7])
    second.add_generation([8, 9], [-0.1, -0.1])
    spans, length, offsets = joined_view([first, second])
    assert offsets == [0, 4] and length == 9
    assert spans == [(2, 4), (5, 6), (7, 9)]
