"""The gateway with the real `openai` client on loopback, the tiny policy behind it.

Every reply's tokens are the sampled ones (the samples' model tokens are each call's sampled ids,
in order); a conversation the client extends stays one sample; streaming, `n`, `stop` and tools
work through the SDK; bad input gets a 4xx that names what was wrong.
"""

from __future__ import annotations

import json

import openai
import pytest
from gateway_helpers import auth, client, policy_endpoint, tiny_chat
from tiny_and_real import loaded_policy

QUESTION = [{"role": "user", "content": "go left"}]


def model_spans(sequence) -> list[list[int]]:
    return [sequence.input_ids[start:end] for start, end in sequence.turn_spans]


def test_a_conversation_the_client_extends_is_one_sample_of_the_sampled_ids() -> None:
    with policy_endpoint() as (episode, endpoint, _):
        llm = client(endpoint)
        messages = list(QUESTION)
        for observation in ("you moved", "you moved again"):
            reply = llm.chat.completions.create(model="anything", messages=messages, max_tokens=5)
            assert reply.choices[0].finish_reason in ("stop", "length")
            assert reply.usage.completion_tokens == len(episode.calls[-1].replies[0].token_ids)
            messages += [reply.choices[0].message.model_dump(exclude_none=True),
                         {"role": "user", "content": observation}]
        llm.chat.completions.create(model="anything", messages=messages, max_tokens=5)

    assert [call.continued for call in episode.calls] == [False, True, True]
    assert episode.splits == 0 and len(episode.samples) == 1
    sample = episode.samples[0]
    assert model_spans(sample) == [call.replies[0].token_ids for call in episode.calls]
    for call, (start, _) in zip(episode.calls, sample.turn_spans):
        assert sample.input_ids[:start] == call.prompt_ids  # each prompt is the sample so far
        assert sample.logprobs[start:start + len(call.replies[0].logprobs)] == call.replies[0].logprobs


def test_streaming_through_the_sdk() -> None:
    with policy_endpoint() as (episode, endpoint, _):
        stream = client(endpoint).chat.completions.create(model="m", messages=QUESTION, max_tokens=4, stream=True,
                                                     stream_options={"include_usage": True})
        chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    finish = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    assert text == episode.calls[0].choices[0].content
    assert finish == [episode.calls[0].choices[0].finish_reason]
    assert chunks[-1].usage.completion_tokens == len(episode.calls[0].replies[0].token_ids)


def test_n_choices_are_samples_that_train_each_token_once() -> None:
    with policy_endpoint() as (episode, endpoint, _):
        llm = client(endpoint)
        first = llm.chat.completions.create(model="m", messages=QUESTION, max_tokens=3)
        messages = [*QUESTION, first.choices[0].message.model_dump(exclude_none=True),
                    {"role": "user", "content": "again"}]
        reply = llm.chat.completions.create(model="m", messages=messages, max_tokens=3, n=3)
    assert len(reply.choices) == 3
    samples = episode.samples
    assert len(samples) == 3 and episode.splits == 0
    trained = [ids for sample in samples for ids in model_spans(sample)]
    sampled = [first_reply.token_ids for call in episode.calls for first_reply in call.replies]
    assert sorted(map(tuple, trained)) == sorted(map(tuple, sampled))  # each sampled turn trained exactly once


def test_stop_strings_cut_the_reply_and_its_tokens() -> None:
    _, tokenizer = loaded_policy("tiny")
    with policy_endpoint(tiny_chat(max_tokens=12, seed=3)) as (episode, endpoint, _):
        llm = client(endpoint)
        free = llm.chat.completions.create(model="m", messages=QUESTION, max_tokens=12)
        text = free.choices[0].message.content
        stop = text.strip().split()[1] if len(text.split()) > 2 else text.strip()[-2:]
    with policy_endpoint(tiny_chat(max_tokens=12, seed=3)) as (episode, endpoint, _):
        cut = client(endpoint).chat.completions.create(model="m", messages=QUESTION, max_tokens=12, stop=[stop])
    kept = episode.calls[0].replies[0].token_ids
    assert cut.choices[0].finish_reason == "stop"
    assert stop not in cut.choices[0].message.content and text.startswith(cut.choices[0].message.content)
    assert stop in tokenizer.decode(kept, skip_special_tokens=True)
    assert stop not in tokenizer.decode(kept[:-1], skip_special_tokens=True)
    assert model_spans(episode.samples[0]) == [kept]


TOOLS = [{"type": "function", "function": {"name": "move", "description": "Move one square.",
                                           "parameters": {"type": "object",
                                                          "properties": {"direction": {"type": "string"}}}}}]


def test_tools_are_rendered_into_the_prompt() -> None:
    with policy_endpoint() as (episode, endpoint, _):
        client(endpoint).chat.completions.create(model="m", messages=QUESTION, tools=TOOLS, max_tokens=3)
    _, tokenizer = loaded_policy("tiny")
    prompt = tokenizer.decode(episode.calls[0].prompt_ids)
    assert "<tools>" in prompt and '"name": "move"' in prompt


def test_a_tool_call_the_model_made_comes_back_as_tool_calls_and_extends_the_sample() -> None:
    """The tiny model does not write tool calls by itself: its reply here is sampled, then the episode
    is handed the text of a call as if the model had sampled it, through the same code path."""
    from beyondagent_plugin_gateway.api import ChatRequest
    from beyondagent_plugin_gateway.episode import GatewayEpisode

    chat = tiny_chat()
    _, tokenizer = loaded_policy("tiny")
    written = '<tool_call>\n{"name": "move", "arguments": {"direction": "left"}}\n</tool_call>'
    ids = tokenizer.encode(written, add_special_tokens=False) + [tokenizer.convert_tokens_to_ids("<|im_end|>")]

    class Scripted:  # the scheduler's interface, answering with `ids` (a model that writes this call)
        eos_token_ids = frozenset(chat.scheduler.eos_token_ids)

        async def generate(self, prompt_ids, settings, session):
            return list(ids), [-0.1] * len(ids)

        def end_session(self, session):
            pass

    episode = GatewayEpisode(chat.template, Scripted(), chat.gateway_episode().defaults, max_episode_tokens=1024)
    import asyncio

    result = asyncio.run(episode.complete(ChatRequest(messages=list(QUESTION), tools=TOOLS)))
    choice = result.choices[0]
    assert choice.finish_reason == "tool_calls" and choice.content is None
    assert choice.tool_calls[0]["function"] == {"name": "move", "arguments": json.dumps({"direction": "left"})}
    # The client sends the call back with its arguments reformatted, then the tool's result.
    call = {**choice.tool_calls[0], "function": {"name": "move", "arguments": '{ "direction":"left" }'}}
    follow_up = [*QUESTION, {"role": "assistant", "content": None, "tool_calls": [call]},
                 {"role": "tool", "tool_call_id": call["id"], "content": "you moved left"}]
    asyncio.run(episode.complete(ChatRequest(messages=follow_up, tools=TOOLS)))
    assert [c.continued for c in episode.calls] == [False, True] and len(episode.samples) == 1
    assert model_spans(episode.samples[0]) == [ids, ids]


@pytest.mark.parametrize(("body", "status", "names"), [
    ({"messages": QUESTION, "seed": 1}, 400, "seed"),
    ({"messages": QUESTION, "frequency_penalty": 0.5, "logit_bias": {"1": 2}}, 400, "frequency_penalty, logit_bias"),
    ({"messages": QUESTION, "tool_choice": "required", "tools": TOOLS}, 400, "tool_choice"),
    ({"messages": QUESTION, "n": 0}, 400, "n must be"),
    ({"messages": QUESTION, "temperature": -1}, 400, "temperature must be"),
    ({"messages": []}, 400, "messages must be"),
    ({"messages": [{"role": "robot", "content": "x"}]}, 400, "messages[0].role"),
    ({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]}, 400,
     "text only"),
])
def test_bad_requests_get_a_400_naming_the_problem(body: dict, status: int, names: str) -> None:
    import httpx

    with policy_endpoint() as (episode, endpoint, _):
        reply = httpx.post(f"{endpoint.base_url}/chat/completions", json={"model": "m", **body}, headers=auth(endpoint),
                           timeout=60)
    assert reply.status_code == status
    assert names in reply.json()["error"]["message"]
    assert not episode.calls


def test_neutral_values_of_unsupported_parameters_are_accepted() -> None:
    with policy_endpoint() as (_, endpoint, _):
        reply = client(endpoint).chat.completions.create(model="m", messages=QUESTION, max_tokens=2, presence_penalty=0,
                                                    frequency_penalty=0.0, user="someone", parallel_tool_calls=True)
    assert reply.choices


def test_an_ended_episode_answers_410_with_the_reason() -> None:
    with policy_endpoint() as (_, endpoint, gateway):
        gateway.close(endpoint.episode_id, "the agent timed out")
        with pytest.raises(openai.APIStatusError, match="the agent timed out") as ended:
            client(endpoint).chat.completions.create(model="m", messages=QUESTION)
        assert ended.value.status_code == 410
        assert endpoint.episode_id not in ended.value.message  # ids are shown shortened


def test_a_prompt_past_the_episode_budget_is_a_400() -> None:
    with policy_endpoint(tiny_chat(max_episode_tokens=8)) as (_, endpoint, _):
        with pytest.raises(openai.BadRequestError, match="max_episode_tokens=8") as error:
            client(endpoint).chat.completions.create(model="m", messages=[{"role": "user", "content": "a " * 20}])
    assert error.value.code == "context_length_exceeded"


def test_calls_past_max_calls_are_refused() -> None:
    with policy_endpoint(max_calls=1) as (_, endpoint, _):
        llm = client(endpoint)
        llm.chat.completions.create(model="m", messages=QUESTION, max_tokens=2)
        with pytest.raises(openai.RateLimitError, match="max_calls"):
            llm.chat.completions.create(model="m", messages=QUESTION, max_tokens=2)
