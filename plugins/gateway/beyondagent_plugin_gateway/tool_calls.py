"""Tool calling for text models: functions into the prompt, model text back into `tool_calls`.

A policy trained here generates text; an agent that calls functions needs two conversions, the
same for every workflow and for the OpenAI-compatible gateway:

- **functions -> prompt.** `render_prompt(tokenizer, messages, tools)` renders through the
  tokenizer's chat template with `tools=` when the template uses tools (Qwen2.5, Llama 3.1,
  Hermes...), and otherwise puts `tools_system_prompt(tools)` in the system message: the
  function signatures as JSON lines inside `<tools></tools>` and the instruction to answer with
  Hermes-style `<tool_call>{"name": ..., "arguments": {...}}</tool_call>` blocks (the words of
  Qwen2.5's own template, so a model tuned on it sees what it knows). A workflow that has no
  tokenizer (it only has `llm.chat`) uses `with_tools(messages, tools)`: the same system text,
  as a message, which every chat template renders.
- **model text -> calls.** `parse_tool_calls(text)` reads `<tool_call>` blocks (JSON, or a
  Python call inside the tags), bare JSON (`{"name", "arguments"}`, BFCL's
  `{"function", "parameters"}`, or a list of them, fenced or not) and BFCL's Python-call style
  `[func(a=1, b="x"), g()]` (read with `ast`, values with `ast.literal_eval`: never `eval`).
  It returns `ParsedCalls`: `calls` in OpenAI's shape (what `llm.py` reads off an endpoint and
  `Turn.tool_calls` carries: `{"id", "type": "function", "function": {"name", "arguments":
  <JSON text>}}`), the prose around them, and `errors`, one line per malformed call; it never
  raises on model output. Text with nothing call-like in it is an answer, not an error.

    parsed = parse_tool_calls('<tool_call>{"name": "ls", "arguments": {"a": true}}</tool_call>')
    parsed.calls[0]["function"] == {"name": "ls", "arguments": '{"a": true}'}
    parse_tool_calls("[cd(folder='docs'), ls()]").names == ["cd", "ls"]
    parse_tool_calls('<tool_call>{"name": "ls", </tool_call>').errors  # ['call 1: not JSON ...']
"""

from __future__ import annotations

import ast
import json
import keyword
import re
from collections.abc import Iterable, Sequence
from typing import Any

import attrs

HERMES_BLOCK = re.compile(r"<tool_call>(.*?)(?:</tool_call>|\Z)", re.DOTALL)
FENCE = re.compile(r"^```[a-zA-Z0-9_-]*[ \t]*\n?(.*?)\n?```$", re.DOTALL)
FORMATS: tuple[str, ...] = ("hermes", "json", "python")
RESERVED_KEYS = ("name", "arguments", "parameters", "function")
MAX_TEXT = 200_000  # longer model output is cut before parsing (a runaway generation)

TOOLS_PROMPT = """\
# Tools

You may call one or more functions to assist with the user query.

You are provided with function signatures within <tools></tools> XML tags:
<tools>
{tools}
</tools>

For each function call, return a json object with function name and arguments within \
<tool_call></tool_call> XML tags:
<tool_call>
{{"name": <function-name>, "arguments": <args-json-object>}}
</tool_call>"""


@attrs.frozen
class ParsedCalls:
    """What a model's text held: OpenAI-shaped `calls`, the `text` around them, `errors` (one per
    malformed call, with what was wrong)."""

    calls: list[dict[str, Any]] = attrs.field(factory=list)
    text: str = ""
    errors: list[str] = attrs.field(factory=list)

    @property
    def malformed(self) -> int:
        return len(self.errors)

    @property
    def names(self) -> list[str]:
        return [call["function"]["name"] for call in self.calls]

    def arguments(self) -> list[dict[str, Any]]:
        """Each call's arguments as a dict (they are JSON text in the OpenAI shape)."""
        return [call_arguments(call) for call in self.calls]


# --- functions -> prompt -------------------------------------------------------------------------


def as_openai_tools(functions: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """`{"type": "function", "function": spec}` for each function spec (already wrapped ones kept)."""
    tools = []
    for spec in functions:
        if not isinstance(spec, dict):
            raise TypeError(f"a function spec is a dict with a 'name', got {type(spec).__name__}")
        if spec.get("type") == "function" and isinstance(spec.get("function"), dict):
            tools.append(spec)
        elif isinstance(spec.get("name"), str):
            tools.append({"type": "function", "function": spec})
        else:
            raise ValueError(f"a function spec needs a string 'name', got keys {sorted(spec)[:6]}")
    return tools


def tools_system_prompt(tools: Iterable[dict[str, Any]], preamble: str = "") -> str:
    """The system text that presents `tools` Hermes-style (`preamble` first when given)."""
    lines = "\n".join(json.dumps(tool, ensure_ascii=False) for tool in as_openai_tools(tools))
    text = TOOLS_PROMPT.format(tools=lines)
    return f"{preamble.rstrip()}\n\n{text}" if preamble.strip() else text


def with_tools(messages: Sequence[dict[str, Any]], tools: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """`messages` with the tools' system text: appended to a leading system message, else a new one first."""
    messages = [dict(message) for message in messages]
    if messages and messages[0].get("role") == "system":
        messages[0]["content"] = tools_system_prompt(tools, preamble=str(messages[0].get("content") or ""))
        return messages
    return [{"role": "system", "content": tools_system_prompt(tools)}, *messages]


def template_supports_tools(tokenizer: Any) -> bool:
    """Whether the tokenizer's chat template renders a `tools` variable."""
    template = getattr(tokenizer, "chat_template", None)
    if isinstance(template, dict):  # named templates: the default, else a "tool_use" one
        template = template.get("tool_use") or template.get("default")
    return isinstance(template, str) and re.search(r"\btools\b", template) is not None


def render_prompt(tokenizer: Any, messages: Sequence[dict[str, Any]], tools: Sequence[dict[str, Any]] | None,
                  *, add_generation_prompt: bool = True) -> str:
    """The prompt text: the chat template with `tools=` when it supports tools, else `with_tools`."""
    messages = list(messages)
    if tools and template_supports_tools(tokenizer):
        return tokenizer.apply_chat_template(messages, tools=as_openai_tools(tools), tokenize=False,
                                             add_generation_prompt=add_generation_prompt)
    if tools:
        messages = with_tools(messages, tools)
    return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=add_generation_prompt)


def tool_responses(results: Iterable[str]) -> str:
    """Function results as one message's text, each in `<tool_response>` tags (Hermes, Qwen2.5)."""
    return "\n".join(f"<tool_response>\n{result}\n</tool_response>" for result in results)


# --- model text -> calls -------------------------------------------------------------------------


def call_arguments(call: dict[str, Any]) -> dict[str, Any]:
    """An OpenAI-shaped call's arguments as a dict (`{}` when they are not a JSON object)."""
    raw = call.get("function", {}).get("arguments", "{}")
    if isinstance(raw, dict):
        return raw
    try:
        value = json.loads(raw or "{}")
    except (TypeError, ValueError, RecursionError):
        return {}
    return value if isinstance(value, dict) else {}


def openai_call(name: str, arguments: dict[str, Any], index: int) -> dict[str, Any]:
    return {"id": f"call_{index}", "type": "function",
            "function": {"name": name, "arguments": json.dumps(arguments, ensure_ascii=False)}}


def parse_tool_calls(text: str | None, formats: Sequence[str] = FORMATS) -> ParsedCalls:
    """The function calls in a model's text (see the module docstring); never raises.

    `formats` narrows what counts as a call: `hermes` (`<tool_call>` blocks), `json` (bare JSON),
    `python` (`[f(a=1)]`, also inside tags); text in a format left out is prose, as it is to an
    evaluator that expects one format (BFCL's Qwen FC handler reads only `<tool_call>` blocks).
    """
    unknown = set(formats) - set(FORMATS)
    if unknown:
        raise ValueError(f"unknown call formats {sorted(unknown)}; formats: {', '.join(FORMATS)}")
    text = (text or "")[:MAX_TEXT]
    found: list[tuple[str, dict[str, Any]]] = []
    errors: list[str] = []
    blocks = list(HERMES_BLOCK.finditer(text)) if "hermes" in formats else []
    if blocks:
        for number, block in enumerate(blocks, 1):
            body = block.group(1).strip()
            if not block.group(0).rstrip().endswith("</tool_call>") and not body:
                errors.append(f"call {number}: an opening <tool_call> tag with nothing after it")
                continue
            calls, problems = _parse_body(body, python="python" in formats)
            found += calls
            errors += [f"call {number}: {problem}" for problem in problems]
        prose = HERMES_BLOCK.sub("", text).strip()
    else:
        body = _unfence(text.strip())
        if _looks_like_calls(body, formats):
            calls, problems = _parse_body(body, python="python" in formats, json_ok="json" in formats)
            found += calls
            errors += problems
            prose = ""
        else:
            prose = text.strip()
    checked = []
    for name, arguments in found:
        problem = _check_call(name, arguments)
        if problem:
            errors.append(problem)
        else:
            checked.append(openai_call(name, arguments, len(checked)))
    return ParsedCalls(calls=checked, text=prose, errors=errors)


def _unfence(text: str) -> str:
    match = FENCE.match(text)
    return match.group(1).strip() if match else text


def _looks_like_calls(text: str, formats: Sequence[str]) -> bool:
    """Text meant as calls: JSON or a bracketed list, or the whole text one `name(...)` call."""
    if "json" in formats and text.startswith("{"):
        return True
    if text.startswith("["):
        return "json" in formats or "python" in formats
    return ("python" in formats and re.match(r"^[A-Za-z_][\w.]*\s*\(", text) is not None
            and text.rstrip().endswith(")"))


def _parse_body(body: str, *, python: bool = True, json_ok: bool = True) -> tuple[list[tuple[str, dict[str, Any]]],
                                                                                  list[str]]:
    """Calls from one block of text (JSON first, then Python call syntax), and one error per bad call."""
    if not body:
        return [], ["empty"]
    if json_ok and body.startswith(("{", "[")):
        try:
            value = json.loads(body)
        except json.JSONDecodeError as exc:
            json_error = f"not JSON ({exc.msg} at character {exc.pos})"
        except (ValueError, RecursionError) as exc:  # an integer past 4,300 digits; nesting past the stack
            json_error = f"not JSON ({type(exc).__name__}: {str(exc)[:80]})"
        else:
            return _from_json(value)
        if body.startswith("{") or not python:
            return [], [json_error]
    if not python:
        return [], ["not JSON"]
    return _from_python(body)


def _from_json(value: Any) -> tuple[list[tuple[str, dict[str, Any]]], list[str]]:
    items = value if isinstance(value, list) else [value]
    calls, errors = [], []
    for item in items:
        if not isinstance(item, dict):
            errors.append(f"a call is a JSON object, got {type(item).__name__}")
            continue
        name = item.get("name", item.get("function"))
        if isinstance(name, dict) and "name" in name:  # {"function": {"name", "arguments"}} (OpenAI's shape)
            item, name = name, name.get("name")
        arguments = item.get("arguments", item.get("parameters", {}))
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments) if arguments.strip() else {}
            except (ValueError, RecursionError):
                errors.append(f"{name!s:.40}: arguments are text that is not JSON")
                continue
        key, value = next(iter(item.items()), (None, None))
        if len(item) == 1 and key not in RESERVED_KEYS and isinstance(value, dict):
            name, arguments = key, value  # {"func": {"a": 1}}: BFCL's decoded form
        if not isinstance(name, str):
            errors.append(f"a call has no string 'name' (keys: {', '.join(sorted(map(str, item)))[:80]})")
            continue
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, dict):
            errors.append(f"{name:.40}: arguments must be a JSON object, got {type(arguments).__name__}")
            continue
        calls.append((name, arguments))
    return calls, errors


def _from_python(body: str) -> tuple[list[tuple[str, dict[str, Any]]], list[str]]:
    try:
        tree = ast.parse(body.strip(), mode="eval").body
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        return [], [f"not a call: {type(exc).__name__}: {getattr(exc, 'msg', exc)}"]
    nodes = tree.elts if isinstance(tree, (ast.List, ast.Tuple)) else [tree]
    calls, errors = [], []
    for node in nodes:
        if not isinstance(node, ast.Call):
            errors.append(f"not a function call: {ast.unparse(node)[:60]!r}")
            continue
        name = _dotted(node.func)
        if name is None:
            errors.append(f"the called thing is not a name: {ast.unparse(node.func)[:60]!r}")
            continue
        if node.args:
            errors.append(f"{name}: positional arguments ({len(node.args)}): name each argument")
            continue
        arguments, bad = {}, None
        for given in node.keywords:
            if given.arg is None:
                bad = f"{name}: **kwargs is not allowed"
                break
            try:
                arguments[given.arg] = ast.literal_eval(given.value)
            except (ValueError, TypeError, SyntaxError, RecursionError, MemoryError):
                bad = f"{name}: argument {given.arg} is not a literal value ({ast.unparse(given.value)[:40]!r})"
                break
        if bad:
            errors.append(bad)
            continue
        calls.append((name, arguments))
    return calls, errors


def _dotted(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return f"{base}.{node.attr}" if base else None
    return None


def _identifier(text: Any) -> bool:
    """A Python identifier (Unicode letters too: BFCL has `año_vehiculo`), not a keyword."""
    return isinstance(text, str) and text.isidentifier() and not keyword.iskeyword(text)


def _check_call(name: str, arguments: dict[str, Any]) -> str | None:
    if not all(_identifier(part) for part in name.split(".")):  # dotted names: math.factorial
        return f"{name[:40]!r} is not a function name"
    bad = [key for key in arguments if not _identifier(key)]
    if bad:
        return f"{name}: argument names must be identifiers, got {', '.join(repr(key)[:30] for key in bad[:3])}"
    try:
        json.dumps(arguments)
    except (TypeError, ValueError, RecursionError):
        return f"{name}: arguments must be JSON values (sets, bytes and other Python objects are not)"
    return None
