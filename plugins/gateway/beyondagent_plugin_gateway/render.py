"""A gateway request's messages and tools, as the chat template's prompt text.

Two rules on top of the tokenizer's own template (`beyondagent_plugin_gateway.tool_calls.render_prompt`,
which also presents the tools):

- **The model's own replies are rendered as the model wrote them.** When a client sends back an
  assistant message the gateway returned (the same content and tool calls, arguments compared as
  JSON values, so a client that reformats them still matches), its content becomes the text the
  model generated (tool-call blocks included) and its `tool_calls` are dropped: the template then
  renders exactly what the model produced, and the call extends the earlier one instead of
  splitting on a re-rendered tool call. A template that rewrites earlier turns anyway (one that
  drops earlier reasoning) still splits.
- **Tool calls a template cannot render** (no `tools` in it) become Hermes `<tool_call>` blocks in
  the assistant's content, the format the tools prompt asks for.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from beyondagent_plugin_gateway.tool_calls import call_arguments, render_prompt, template_supports_tools


def reply_key(content: str | None, tool_calls: Sequence[dict[str, Any]] | None) -> tuple:
    """What identifies a reply the client sends back: its text and its calls (arguments as JSON values)."""
    calls = tuple((call.get("function", {}).get("name"), json.dumps(call_arguments(call), sort_keys=True))
                  for call in tool_calls or ())
    return (content or "", calls)


class Replies:
    """The replies an episode's endpoint returned, each with the text the model generated for it."""

    def __init__(self) -> None:
        self._raw: dict[tuple, str] = {}

    def remember(self, content: str | None, tool_calls: Sequence[dict[str, Any]] | None, raw: str) -> None:
        self._raw[reply_key(content, tool_calls)] = raw

    def raw_text(self, message: dict[str, Any]) -> str | None:
        if message.get("role") != "assistant":
            return None
        return self._raw.get(reply_key(message.get("content"), message.get("tool_calls")))


def hermes_blocks(tool_calls: Sequence[dict[str, Any]]) -> str:
    """Calls as `<tool_call>{"name", "arguments"}</tool_call>` blocks (what the tools prompt asks for)."""
    return "\n".join(
        "<tool_call>\n" + json.dumps({"name": call["function"]["name"], "arguments": call_arguments(call)},
                                     ensure_ascii=False) + "\n</tool_call>"
        for call in tool_calls)


def template_messages(tokenizer: Any, messages: Sequence[dict[str, Any]], replies: Replies) -> list[dict[str, Any]]:
    """The request's messages as the chat template gets them (see the module docstring)."""
    native_tools = template_supports_tools(tokenizer)
    rendered = []
    for message in messages:
        message = dict(message)
        raw = replies.raw_text(message)
        if raw is not None:
            message = {"role": "assistant", "content": raw}
        elif message.get("tool_calls"):
            if native_tools:
                message["tool_calls"] = [{"type": "function", "id": call["id"],
                                          "function": {"name": call["function"]["name"],
                                                       "arguments": call_arguments(call)}}
                                         for call in message["tool_calls"]]
            else:
                calls = hermes_blocks(message.pop("tool_calls"))
                message["content"] = f"{message['content']}\n{calls}" if message["content"] else calls
        rendered.append(message)
    return rendered


def prompt_text(tokenizer: Any, messages: Sequence[dict[str, Any]], tools: Sequence[dict[str, Any]] | None,
                replies: Replies) -> str:
    text = render_prompt(tokenizer, template_messages(tokenizer, messages, replies), tools)
    if not isinstance(text, str):
        raise TypeError(f"the chat template gave {type(text).__name__}, not text")
    return text
