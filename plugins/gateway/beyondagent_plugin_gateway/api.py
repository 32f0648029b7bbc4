"""The OpenAI chat-completions wire format: the request checked, the response and stream chunks built.

`parse_request(body)` turns a JSON body into a `ChatRequest` or raises `ApiError` (an HTTP
status and a one-line message naming the parameter). What is supported: `messages`, `tools`
(with `tool_choice` `auto` or `none`), `n`, `stop`, `max_tokens` / `max_completion_tokens`,
`temperature`, `top_p`, `stream` (with `stream_options.include_usage`); `model` is accepted and
ignored (the model is the policy being trained). Bookkeeping fields a client may send (`user`,
`metadata`, `store`, `parallel_tool_calls`, `service_tier`) are ignored. Any other parameter is a
400 naming it, unless it is sent at its neutral value (`presence_penalty: 0`, `logprobs: false`,
...), which changes nothing.

JSON the gateway walks (`tools`, tool-call arguments, as objects or as JSON text) may nest at
most `MAX_DEPTH` levels (a 400 past that, as is JSON too deep for the parser).

`reward_score(value)` checks a reward an agent gives (posted to `/reward` or returned by its
`run`): a finite number within +-`REWARD_LIMIT`.
"""

from __future__ import annotations

import json
import math
import time
import uuid
from typing import Any

import attrs

ROLES = ("system", "developer", "user", "assistant", "tool")
IGNORED = ("model", "user", "metadata", "store", "parallel_tool_calls", "service_tier")
# Parameters accepted only at the value that changes nothing.
NEUTRAL = {"presence_penalty": (0, 0.0), "frequency_penalty": (0, 0.0), "logprobs": (False,),
           "logit_bias": ({},), "seed": (), "response_format": ({"type": "text"},)}
SUPPORTED = ("messages", "tools", "tool_choice", "n", "stop", "max_tokens", "max_completion_tokens",
             "temperature", "top_p", "stream", "stream_options")
MAX_N = 16  # the most choices any request may ask for; an episode's own limit is lower (workflow.max_n)
MAX_STOP = 4
MAX_DEPTH = 64  # levels of JSON in tools and tool-call arguments: a schema of 30 nested objects fits
# Rewards are finite and within +-1e6: a score past that is a bug in the agent, and far past it the
# group statistics overflow (1e308 made every advantage of its group 0; NaN stopped the run).
REWARD_LIMIT = 1e6
MAX_REASON_CHARS = 1000  # a reward's reason is kept this long (it goes into the episode's records)


class ApiError(Exception):
    """A request the gateway answers with `status` and an OpenAI-shaped error body."""

    def __init__(self, status: int, message: str, *, param: str | None = None, code: str | None = None):
        super().__init__(message)
        self.status, self.message, self.param, self.code = status, message, param, code

    def body(self) -> dict[str, Any]:
        kind = "invalid_request_error" if self.status < 500 else "server_error"
        return {"error": {"message": self.message, "type": kind, "param": self.param, "code": self.code}}


def bad_request(message: str, param: str | None = None, code: str | None = None) -> ApiError:
    return ApiError(400, message, param=param, code=code)


@attrs.frozen
class ChatRequest:
    """A checked chat-completions request; None means "the backend's default"."""

    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] | None = None
    n: int = 1
    stop: tuple[str, ...] = ()
    max_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    stream: bool = False
    include_usage: bool = False
    model: str = "policy"


def parse_request(body: Any) -> ChatRequest:
    if not isinstance(body, dict):
        raise bad_request(f"the request body must be a JSON object, got {type(body).__name__}")
    body = {key: value for key, value in body.items() if value is not None}
    unknown = sorted(key for key in body if key not in SUPPORTED and key not in IGNORED
                     and not (key in NEUTRAL and body[key] in NEUTRAL[key]))
    if unknown:
        raise bad_request(f"unsupported parameter(s): {', '.join(unknown)}; the gateway takes "
                          f"{', '.join(SUPPORTED)} (model is ignored: it is always the policy being trained)",
                          param=unknown[0], code="unsupported_parameter")
    tools = _tools(body.get("tools"), body.get("tool_choice", "auto"))
    max_tokens = body.get("max_completion_tokens", body.get("max_tokens"))
    options = body.get("stream_options") or {}
    if not isinstance(options, dict):
        raise bad_request("stream_options must be an object", param="stream_options")
    return ChatRequest(
        messages=_messages(body.get("messages")),
        tools=tools,
        n=_integer(body.get("n", 1), "n", 1, MAX_N),
        stop=_stop(body.get("stop")),
        max_tokens=None if max_tokens is None else _integer(max_tokens, "max_tokens", 1, 1 << 20),
        temperature=_number(body.get("temperature"), "temperature", 0.0, 2.0),
        top_p=_number(body.get("top_p"), "top_p", 0.0, 1.0, low_open=True),
        stream=_boolean(body.get("stream", False), "stream"),
        include_usage=_boolean(options.get("include_usage", False), "stream_options.include_usage"),
        model=str(body.get("model") or "policy"),
    )


def _messages(messages: Any) -> list[dict[str, Any]]:
    if not isinstance(messages, list) or not messages:
        raise bad_request("messages must be a non-empty list of message objects", param="messages")
    checked = []
    for index, message in enumerate(messages):
        where = f"messages[{index}]"
        if not isinstance(message, dict):
            raise bad_request(f"{where} must be an object, got {type(message).__name__}", param=where)
        role = message.get("role")
        if role not in ROLES:
            raise bad_request(f"{where}.role must be one of {', '.join(ROLES)}, got {role!r}", param=f"{where}.role")
        out = {"role": "system" if role == "developer" else role, "content": message_text(message.get("content"), where)}
        if role == "assistant" and message.get("tool_calls"):
            out["tool_calls"] = _tool_calls(message["tool_calls"], where)
        for key in ("tool_call_id", "name"):
            if isinstance(message.get(key), str):
                out[key] = message[key]
        checked.append(out)
    return checked


def message_text(content: Any, where: str) -> str:
    """A message's content as text: a string, null (""), or a list of text parts joined."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for index, part in enumerate(content):
            if isinstance(part, dict) and part.get("type") == "text" and isinstance(part.get("text"), str):
                parts.append(part["text"])
            else:
                kind = part.get("type") if isinstance(part, dict) else type(part).__name__
                raise bad_request(f"{where}.content[{index}] is a {kind!r} part; the gateway takes text only",
                                  param=f"{where}.content")
        return "".join(parts)
    raise bad_request(f"{where}.content must be a string, null or a list of text parts, got {type(content).__name__}",
                      param=f"{where}.content")


def _tool_calls(calls: Any, where: str) -> list[dict[str, Any]]:
    if not isinstance(calls, list):
        raise bad_request(f"{where}.tool_calls must be a list", param=f"{where}.tool_calls")
    checked = []
    for index, call in enumerate(calls):
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict) or not isinstance(function.get("name"), str):
            raise bad_request(f"{where}.tool_calls[{index}] needs function.name", param=f"{where}.tool_calls")
        arguments = function.get("arguments", "{}")
        at = f"{where}.tool_calls[{index}].function.arguments"
        if isinstance(arguments, str):
            try:
                _check_depth(json.loads(arguments), at)
            except RecursionError:
                raise bad_request(f"{at} is JSON nested more than {MAX_DEPTH} levels deep", param=at) from None
            except ValueError:
                pass  # not JSON: text the template shows as it is
        else:
            _check_depth(arguments, at)
            arguments = json.dumps(arguments, ensure_ascii=False)
        checked.append({"id": str(call.get("id") or f"call_{index}"), "type": "function",
                        "function": {"name": function["name"], "arguments": arguments}})
    return checked


def _tools(tools: Any, choice: Any) -> list[dict[str, Any]] | None:
    if choice not in ("auto", "none"):
        raise bad_request(f"tool_choice {choice!r} is not supported: use 'auto' (or 'none'); the policy decides "
                          "itself whether to call a tool", param="tool_choice", code="unsupported_parameter")
    if tools is None or choice == "none":
        return None
    if not isinstance(tools, list):
        raise bad_request("tools must be a list of {\"type\": \"function\", \"function\": {...}}", param="tools")
    for index, tool in enumerate(tools):
        _check_depth(tool, f"tools[{index}]")
        function = tool.get("function") if isinstance(tool, dict) else None
        if not isinstance(tool, dict) or tool.get("type", "function") != "function" or not isinstance(function, dict) \
                or not isinstance(function.get("name"), str):
            raise bad_request(f"tools[{index}] must be {{\"type\": \"function\", \"function\": {{\"name\": ...}}}}",
                              param=f"tools[{index}]")
    return tools or None


def _check_depth(value: Any, where: str) -> None:
    """A 400 when `value` nests lists and objects more than MAX_DEPTH levels deep (no recursion)."""
    stack = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if not isinstance(node, (dict, list)):
            continue
        if depth > MAX_DEPTH:
            raise bad_request(f"{where} is JSON nested more than {MAX_DEPTH} levels deep", param=where)
        stack.extend((child, depth + 1) for child in (node.values() if isinstance(node, dict) else node)
                     if isinstance(child, (dict, list)))


def _stop(stop: Any) -> tuple[str, ...]:
    if stop is None:
        return ()
    values = [stop] if isinstance(stop, str) else stop
    if not isinstance(values, list) or not all(isinstance(v, str) and v for v in values) or len(values) > MAX_STOP:
        raise bad_request(f"stop must be a non-empty string or a list of at most {MAX_STOP} of them", param="stop")
    return tuple(values)


def _integer(value: Any, name: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise bad_request(f"{name} must be an integer from {low} to {high}, got {value!r}", param=name)
    return value


def _number(value: Any, name: str, low: float, high: float, *, low_open: bool = False) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (
            (low < value if low_open else low <= value) and value <= high):
        interval = f"{'(' if low_open else '['}{low}, {high}]"
        raise bad_request(f"{name} must be a number in {interval}, got {value!r}", param=name)
    return float(value)


def reward_score(value: Any) -> float:
    """`value` as a reward score; a ValueError saying what a score must be otherwise."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"a reward score must be a number, got {type(value).__name__}")
    if isinstance(value, int) and abs(value) > REWARD_LIMIT:  # a huge int: no float(), no repr of 5,000 digits
        raise ValueError(f"a reward score must be a finite number from {-REWARD_LIMIT:g} to {REWARD_LIMIT:g}, "
                         f"got an integer of {value.bit_length()} bits")
    if not (math.isfinite(value) and -REWARD_LIMIT <= value <= REWARD_LIMIT):
        raise ValueError(f"a reward score must be a finite number from {-REWARD_LIMIT:g} to {REWARD_LIMIT:g}, "
                         f"got {value!r}")
    return float(value)


def _boolean(value: Any, name: str) -> bool:
    if not isinstance(value, bool):
        raise bad_request(f"{name} must be true or false, got {value!r}", param=name)
    return value


# --- replies -----------------------------------------------------------------------------------


@attrs.frozen
class Choice:
    """One sampled reply as the client sees it."""

    content: str | None
    tool_calls: list[dict[str, Any]] | None
    finish_reason: str  # stop | length | tool_calls
    completion_tokens: int

    def message(self) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": self.content}
        if self.tool_calls:
            message["tool_calls"] = self.tool_calls
        return message


@attrs.frozen
class ChatResult:
    choices: list[Choice]
    prompt_tokens: int

    def usage(self) -> dict[str, int]:
        completion = sum(choice.completion_tokens for choice in self.choices)
        return {"prompt_tokens": self.prompt_tokens, "completion_tokens": completion,
                "total_tokens": self.prompt_tokens + completion}


def completion_body(result: ChatResult, model: str) -> dict[str, Any]:
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex}", "object": "chat.completion", "created": int(time.time()), "model": model,
        "choices": [{"index": i, "message": choice.message(), "finish_reason": choice.finish_reason, "logprobs": None}
                    for i, choice in enumerate(result.choices)],
        "usage": result.usage(),
    }


def stream_chunks(result: ChatResult, model: str, *, include_usage: bool) -> list[dict[str, Any]]:
    """The `chat.completion.chunk` objects of a whole reply: per choice, its role, its text, its
    tool calls (one chunk each, with their index), its finish reason; then the usage if asked."""
    base = {"id": f"chatcmpl-{uuid.uuid4().hex}", "object": "chat.completion.chunk", "created": int(time.time()),
            "model": model}

    def chunk(index: int, delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {**base, "choices": [{"index": index, "delta": delta, "finish_reason": finish, "logprobs": None}]}

    chunks = []
    for index, choice in enumerate(result.choices):
        chunks.append(chunk(index, {"role": "assistant", "content": ""}))
        if choice.content:
            chunks.append(chunk(index, {"content": choice.content}))
        for position, call in enumerate(choice.tool_calls or ()):
            chunks.append(chunk(index, {"tool_calls": [{"index": position, "id": call["id"], "type": "function",
                                                        "function": dict(call["function"])}]}))
        chunks.append(chunk(index, {}, choice.finish_reason))
    if include_usage:
        chunks.append({**base, "choices": [], "usage": result.usage()})
    return chunks
