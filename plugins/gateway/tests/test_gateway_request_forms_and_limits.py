"""The gateway's wire format, class-wide (`api.py`, `render.py`, the gaps of `tool_calls.py`'s own tests).

- every request parameter's limits exactly on the limit and one past (`n` 1..16, `max_tokens` 1..2**20,
  `temperature` [0, 2], `top_p` (0, 1], at most 4 stop strings, JSON nested 64 levels), each form a
  parameter may take (a stop string or a list, content as text parts, `developer` as `system`,
  `max_completion_tokens` over `max_tokens`, null as absent) and its nearest refusal;
- a reward score exactly at +-1e6 and one past, ints and floats;
- the response and its stream chunks (role, content, each tool call with its index, finish, usage);
- a reply sent back is rendered as the model wrote it (arguments compared as JSON values); tool calls
  a template cannot render become Hermes blocks, ones it can are handed to it as objects;
- tool-call parsing at its text limit, word-bounded `tools` detection, named templates.
"""

from __future__ import annotations

import json

import pytest

from beyondagent_plugin_gateway import api
from beyondagent_plugin_gateway.api import (
    MAX_DEPTH,
    MAX_N,
    MAX_STOP,
    REWARD_LIMIT,
    ApiError,
    ChatResult,
    Choice,
    completion_body,
    parse_request,
    reward_score,
    stream_chunks,
)
from beyondagent_plugin_gateway.render import Replies, hermes_blocks, prompt_text, reply_key, template_messages
from beyondagent_plugin_gateway.tool_calls import MAX_TEXT, parse_tool_calls, template_supports_tools

HI = [{"role": "user", "content": "hi"}]


def refused(body: dict, param: str | None = None) -> ApiError:
    with pytest.raises(ApiError) as caught:
        parse_request(body)
    assert caught.value.status == 400
    if param is not None:
        assert caught.value.param == param, caught.value.message
    return caught.value


# --- limits: on the limit accepted, one past refused ------------------------------------------------

@pytest.mark.parametrize(("key", "good", "bad", "param"), [
    ("n", [1, MAX_N], [0, MAX_N + 1, True, 2.0], "n"),
    ("max_tokens", [1, 1 << 20], [0, (1 << 20) + 1, False, 1.5], "max_tokens"),
    ("max_completion_tokens", [1, 1 << 20], [0, (1 << 20) + 1], "max_tokens"),
    ("temperature", [0, 0.0, 2, 2.0], [-1e-9, 2.000001, True, "1"], "temperature"),
    ("top_p", [1e-9, 1, 1.0], [0, 0.0, 1.000001, False], "top_p"),
    ("stop", ["x", ["a", "b", "c", "d"]], ["", ["a", ""], ["a"] * (MAX_STOP + 1), [1], 7], "stop"),
    ("stream", [True, False], [1, "true"], "stream"),
])
def test_each_parameter_on_its_limit_is_taken_and_one_past_refused(key, good, bad, param) -> None:
    assert MAX_N == 16 and MAX_STOP == 4
    for value in good:
        request = parse_request({"messages": HI, key: value})
        read = {"max_completion_tokens": "max_tokens"}.get(key, key)
        got = getattr(request, read)
        assert got == (tuple([value]) if key == "stop" and isinstance(value, str) else
                       tuple(value) if key == "stop" else value)
    for value in bad:
        refused({"messages": HI, key: value}, param)


def test_the_defaults_of_a_bare_request() -> None:
    request = parse_request({"messages": HI})
    assert (request.n, request.stop, request.max_tokens, request.temperature, request.top_p, request.stream,
            request.include_usage, request.tools, request.model) == (1, (), None, None, None, False, False, None,
                                                                     "policy")
    assert isinstance(parse_request({"messages": HI, "temperature": 1}).temperature, float)


def test_max_completion_tokens_wins_over_max_tokens_and_null_is_absent() -> None:
    assert parse_request({"messages": HI, "max_tokens": 9, "max_completion_tokens": 3}).max_tokens == 3
    assert parse_request({"messages": HI, "max_tokens": 9, "max_completion_tokens": None}).max_tokens == 9
    # null is what a client sends for "not set": a null seed (never accepted otherwise) is no parameter
    assert parse_request({"messages": HI, "seed": None, "n": None, "temperature": None}).n == 1
    refused({"messages": HI, "seed": 0}, "seed")


def test_ignored_bookkeeping_and_neutral_values() -> None:
    body = {"messages": HI, "model": "gpt-x", "user": "u", "metadata": {"a": 1}, "store": True,
            "parallel_tool_calls": False, "service_tier": "auto", "presence_penalty": 0.0, "frequency_penalty": 0,
            "logprobs": False, "logit_bias": {}, "response_format": {"type": "text"}}
    assert parse_request(body).model == "gpt-x"
    for key, value in [("presence_penalty", 0.1), ("logprobs", True), ("logit_bias", {"1": 1}),
                       ("response_format", {"type": "json_object"}), ("top_k", 5)]:
        error = refused({"messages": HI, key: value}, key)
        assert error.code == "unsupported_parameter" and key in error.message


def test_stream_options_forms() -> None:
    assert parse_request({"messages": HI, "stream": True, "stream_options": {"include_usage": True}}).include_usage
    assert not parse_request({"messages": HI, "stream_options": {}}).include_usage
    refused({"messages": HI, "stream_options": [1]}, "stream_options")
    refused({"messages": HI, "stream_options": {"include_usage": 1}}, "stream_options.include_usage")


def test_a_body_that_is_not_an_object_is_refused() -> None:
    for body in ([], "hi", 3):
        assert "must be a JSON object" in refused(body).message


# --- messages -----------------------------------------------------------------------------------

def test_message_forms_and_their_nearest_refusals() -> None:
    request = parse_request({"messages": [
        {"role": "developer", "content": "be brief"},
        {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "function": {"name": "f", "arguments": {"x": 1}}},
            {"function": {"name": "g", "arguments": "not json"}},
            {"function": {"name": "h"}}]},
        {"role": "tool", "content": "out", "tool_call_id": "c1", "name": "f"},
        {"role": "user", "content": "x", "tool_calls": [{"function": {"name": "f"}}], "name": 3},
    ]})
    system, user, assistant, tool, last = request.messages
    assert system == {"role": "system", "content": "be brief"}
    assert user == {"role": "user", "content": "ab"}
    assert assistant["content"] == "" and assistant["tool_calls"] == [
        {"id": "c1", "type": "function", "function": {"name": "f", "arguments": '{"x": 1}'}},
        {"id": "call_1", "type": "function", "function": {"name": "g", "arguments": "not json"}},
        {"id": "call_2", "type": "function", "function": {"name": "h", "arguments": "{}"}}]
    assert tool == {"role": "tool", "content": "out", "tool_call_id": "c1", "name": "f"}
    assert last == {"role": "user", "content": "x"}  # a user's tool_calls and a non-text name are dropped
    refused({"messages": "hi"}, "messages")
    refused({"messages": ["hi"]}, "messages[0]")
    refused({"messages": [{"role": "bot", "content": "x"}]}, "messages[0].role")
    refused({"messages": [{"role": "user", "content": 3}]}, "messages[0].content")
    refused({"messages": [{"role": "user", "content": [{"type": "text", "text": 3}]}]}, "messages[0].content")
    refused({"messages": [{"role": "assistant", "tool_calls": {"a": 1}}]}, "messages[0].tool_calls")
    refused({"messages": [*HI, {"role": "assistant", "tool_calls": [{"function": {"arguments": "{}"}}]}]},
            "messages[1].tool_calls")


def nested(depth: int) -> object:
    value: object = 1
    for _ in range(depth):
        value = [value]
    return value


def test_tools_and_arguments_may_nest_exactly_max_depth_levels() -> None:
    assert MAX_DEPTH == 64
    tool = {"type": "function", "function": {"name": "f", "parameters": {}}}  # 3 levels above `parameters`
    ok = {"messages": HI, "tools": [{**tool, "function": {"name": "f", "parameters": nested(MAX_DEPTH - 2)}}]}
    assert parse_request(ok).tools
    refused({"messages": HI, "tools": [{**tool, "function": {"name": "f", "parameters": nested(MAX_DEPTH - 1)}}]},
            "tools[0]")
    for arguments in (nested(MAX_DEPTH), json.dumps(nested(MAX_DEPTH))):
        call = {"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": arguments}}]}
        assert parse_request({"messages": [*HI, call]}).messages[1]["tool_calls"]
    for arguments in (nested(MAX_DEPTH + 1), json.dumps(nested(MAX_DEPTH + 1))):
        call = {"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": arguments}}]}
        refused({"messages": [*HI, call]}, "messages[1].tool_calls[0].function.arguments")


def test_tool_forms_and_tool_choice() -> None:
    tool = {"type": "function", "function": {"name": "f"}}
    assert parse_request({"messages": HI, "tools": [tool], "tool_choice": "auto"}).tools == [tool]
    assert parse_request({"messages": HI, "tools": [{"function": {"name": "f"}}]}).tools  # type defaults to function
    assert parse_request({"messages": HI, "tools": [tool], "tool_choice": "none"}).tools is None
    assert parse_request({"messages": HI, "tools": []}).tools is None
    for choice in ("required", {"type": "function", "function": {"name": "f"}}):
        assert refused({"messages": HI, "tools": [tool], "tool_choice": choice}, "tool_choice").code \
            == "unsupported_parameter"
    refused({"messages": HI, "tools": tool}, "tools")
    for bad in ({"type": "retrieval", "function": {"name": "f"}}, {"type": "function"}, "f",
                {"type": "function", "function": {"name": 3}}):
        refused({"messages": HI, "tools": [bad]}, "tools[0]")


# --- rewards ------------------------------------------------------------------------------------

def test_a_reward_score_exactly_at_the_limit_is_taken_one_past_refused() -> None:
    assert REWARD_LIMIT == 1e6
    for value in (1_000_000, -1_000_000, 1e6, -1e6, 0, 0.5):
        assert reward_score(value) == float(value) and isinstance(reward_score(value), float)
    for value, said in [(1_000_001, "integer of 20 bits"), (-1_000_001, "integer of 20 bits"),
                        (1e6 + 0.5, "got 1000000.5"), (-1e6 - 0.5, "got -1000000.5"), (True, "got bool"),
                        (None, "got NoneType"), ("1", "got str")]:
        with pytest.raises(ValueError, match=said):
            reward_score(value)


# --- replies ------------------------------------------------------------------------------------

CALL = {"id": "call_0_0", "type": "function", "function": {"name": "f", "arguments": '{"a": 1}'}}


def test_an_error_body_is_a_client_error_below_500_a_server_error_from_500() -> None:
    assert ApiError(499, "m").body()["error"]["type"] == "invalid_request_error"
    assert ApiError(500, "m", param="p", code="c").body() == {
        "error": {"message": "m", "type": "server_error", "param": "p", "code": "c"}}


def test_the_completion_body_and_usage() -> None:
    result = ChatResult([Choice("hello", None, "stop", 3), Choice(None, [CALL], "tool_calls", 5)], prompt_tokens=7)
    assert result.usage() == {"prompt_tokens": 7, "completion_tokens": 8, "total_tokens": 15}
    body = completion_body(result, "my-model")
    assert body["object"] == "chat.completion" and body["model"] == "my-model" and body["id"].startswith("chatcmpl-")
    assert body["choices"] == [
        {"index": 0, "message": {"role": "assistant", "content": "hello"}, "finish_reason": "stop", "logprobs": None},
        {"index": 1, "message": {"role": "assistant", "content": None, "tool_calls": [CALL]},
         "finish_reason": "tool_calls", "logprobs": None}]
    assert body["usage"] == result.usage()


def test_stream_chunks_per_choice_then_usage_only_when_asked() -> None:
    second = {**CALL, "id": "call_0_1"}
    result = ChatResult([Choice("", None, "length", 2), Choice("see", [CALL, second], "tool_calls", 4)],
                        prompt_tokens=1)
    chunks = stream_chunks(result, "m", include_usage=True)
    assert len({chunk["id"] for chunk in chunks}) == 1 and all(c["object"] == "chat.completion.chunk" for c in chunks)
    shown = [(c["choices"][0]["index"], c["choices"][0]["delta"], c["choices"][0]["finish_reason"])
             for c in chunks[:-1]]
    assert shown == [
        (0, {"role": "assistant", "content": ""}, None), (0, {}, "length"),  # no content chunk for empty text
        (1, {"role": "assistant", "content": ""}, None), (1, {"content": "see"}, None),
        (1, {"tool_calls": [{"index": 0, "id": "call_0_0", "type": "function", "function": CALL["function"]}]}, None),
        (1, {"tool_calls": [{"index": 1, "id": "call_0_1", "type": "function", "function": CALL["function"]}]}, None),
        (1, {}, "tool_calls")]
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"] == {"prompt_tokens": 1, "completion_tokens": 6,
                                                                   "total_tokens": 7}
    assert "usage" not in stream_chunks(result, "m", include_usage=False)[-1]
    assert len(stream_chunks(result, "m", include_usage=False)) == len(chunks) - 1


# --- rendering ----------------------------------------------------------------------------------

class Template:
    """A chat template's call shape: what it was handed, rendered as role:content lines (the tokenizer's
    own templates are used in test_gateway_episode_limits_and_budget.py)."""

    def __init__(self, chat_template: object = "{% for m in messages %}{% endfor %}"):
        self.chat_template = chat_template
        self.seen: list = []

    def apply_chat_template(self, messages, tools=None, tokenize=False, add_generation_prompt=False):
        self.seen.append({"messages": messages, "tools": tools, "add_generation_prompt": add_generation_prompt})
        return "\n".join(f"{m['role']}:{m['content']}" for m in messages)


def test_a_reply_sent_back_renders_as_the_model_wrote_it_matched_by_json_value() -> None:
    replies = Replies()
    replies.remember(None, [CALL], "<tool_call>RAW</tool_call>")
    replies.remember("plain", None, "plain<think>x</think>")
    reformatted = {**CALL, "id": "other", "function": {"name": "f", "arguments": '{ "a" : 1 }'}}
    messages = [{"role": "assistant", "content": None, "tool_calls": [reformatted]},
                {"role": "assistant", "content": "plain"},
                {"role": "user", "content": "plain"},  # only an assistant's message is a reply
                {"role": "assistant", "content": "plain", "tool_calls": [CALL]}]  # other calls: not that reply
    rendered = template_messages(Template(), messages, replies)
    assert rendered[0] == {"role": "assistant", "content": "<tool_call>RAW</tool_call>"}
    assert rendered[1] == {"role": "assistant", "content": "plain<think>x</think>"}
    assert rendered[2] == {"role": "user", "content": "plain"}
    assert rendered[3]["content"].startswith("plain\n<tool_call>") and "tool_calls" not in rendered[3]
    other_name = {**CALL, "function": {"name": "g", "arguments": '{"a": 1}'}}
    assert replies.raw_text({"role": "assistant", "content": None, "tool_calls": [other_name]}) is None
    assert reply_key(None, None) == reply_key("", []) == ("", ())
    assert reply_key("", [{"function": {"name": "f", "arguments": '{"b": 2, "a": 1}'}}]) == \
        reply_key("", [{"function": {"name": "f", "arguments": {"a": 1, "b": 2}}}])


def test_tool_calls_become_hermes_blocks_or_the_templates_own_objects() -> None:
    message = {"role": "assistant", "content": "", "tool_calls": [CALL, {**CALL, "id": "c2"}]}
    plain = template_messages(Template(), [message], Replies())
    block = '<tool_call>\n{"name": "f", "arguments": {"a": 1}}\n</tool_call>'
    assert plain == [{"role": "assistant", "content": f"{block}\n{block}"}]  # no leading newline when no text
    assert hermes_blocks([{"function": {"name": "é", "arguments": "{}"}}]) == \
        '<tool_call>\n{"name": "é", "arguments": {}}\n</tool_call>'
    native = template_messages(Template("{{ tools }}"), [message], Replies())
    assert native[0]["content"] == "" and native[0]["tool_calls"] == [
        {"type": "function", "id": "call_0_0", "function": {"name": "f", "arguments": {"a": 1}}},
        {"type": "function", "id": "c2", "function": {"name": "f", "arguments": {"a": 1}}}]


def test_prompt_text_asks_for_the_generation_prompt_and_refuses_non_text() -> None:
    template = Template()
    assert prompt_text(template, HI, None, Replies()) == "user:hi"
    assert template.seen[-1]["add_generation_prompt"] is True

    class Ids(Template):
        def apply_chat_template(self, *args, **kwargs):
            return [1, 2]

    with pytest.raises(TypeError, match="gave list, not text"):
        prompt_text(Ids(), HI, None, Replies())


def test_template_tools_detection_is_word_bounded_and_reads_named_templates() -> None:
    assert template_supports_tools(Template("{% if tools %}{% endif %}"))
    assert not template_supports_tools(Template("{{ toolset }} {{ my_tools_list }}"))
    assert not template_supports_tools(Template(None))
    assert template_supports_tools(Template({"default": "{{ messages }}", "tool_use": "{{ tools }}"}))
    assert template_supports_tools(Template({"default": "{{ tools }}"}))
    assert not template_supports_tools(Template({"default": "{{ messages }}"}))


def test_model_text_is_parsed_up_to_max_text_characters() -> None:
    call = '<tool_call>{"name": "ls", "arguments": {}}</tool_call>'
    assert parse_tool_calls(" " * (MAX_TEXT - len(call)) + call).names == ["ls"]  # ends exactly at the limit
    late = parse_tool_calls(" " * (MAX_TEXT - len(call) + 1) + call)  # its last character cut off
    assert late.calls == [] and late.malformed == 1


def test_parser_forms_the_tool_call_tests_leave_out() -> None:
    assert parse_tool_calls('{"name": "f", "arguments": null}').arguments() == [{}]
    assert parse_tool_calls('{"name": "f", "arguments": ""}').arguments() == [{}]
    assert parse_tool_calls('{"name": "f", "parameters": {"a": 1}}').arguments() == [{"a": 1}]
    assert parse_tool_calls("año(ciudad='x')").names == ["año"]  # Unicode identifiers are names
    for keyword_name in ('{"name": "class", "arguments": {}}', '{"name": "os.for", "arguments": {}}',
                         '{"name": "f", "arguments": {"lambda": 1}}'):  # keywords are no names
        parsed = parse_tool_calls(keyword_name)
        assert parsed.calls == [] and parsed.malformed == 1
    assert parse_tool_calls("f(a=1) and more").calls == []  # the whole text must be one call
    assert parse_tool_calls("f(a=1) and more").errors == []
    assert parse_tool_calls("[f(a=1)]", formats=("json",)).malformed == 1  # a list, but not JSON
    assert json.loads(parse_tool_calls('{"name": "f", "arguments": {"t": "é"}}').calls[0]["function"]
                      ["arguments"]) == {"t": "é"}
    assert 'é' in parse_tool_calls('{"name": "f", "arguments": {"t": "é"}}').calls[0]["function"]["arguments"]


def test_the_module_constants_the_docstrings_name() -> None:
    assert api.ROLES == ("system", "developer", "user", "assistant", "tool")
    assert set(api.IGNORED) == {"model", "user", "metadata", "store", "parallel_tool_calls", "service_tier"}
