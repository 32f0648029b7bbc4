"""`beyondagent_plugin_gateway.tool_calls`: functions into the prompt, model text back into OpenAI-shaped calls.

The parser is fed what models really write, good and bad: Hermes tags, bare JSON, BFCL's
Python-call lists, fences, prose around calls, and an adversarial table of malformed outputs,
each of which must come back as counted errors (never an exception, never an `eval`).
"""

from __future__ import annotations

import json

import pytest

from beyondagent_plugin_gateway.tool_calls import (
    as_openai_tools,
    call_arguments,
    parse_tool_calls,
    render_prompt,
    template_supports_tools,
    tool_responses,
    tools_system_prompt,
    with_tools,
)

LS = {"name": "ls", "description": "List a directory.",
      "parameters": {"type": "object", "properties": {"a": {"type": "boolean"}}, "required": []}}


def calls_of(text: str) -> list[tuple[str, dict]]:
    parsed = parse_tool_calls(text)
    return list(zip(parsed.names, parsed.arguments(), strict=True))


# --- well-formed outputs ------------------------------------------------------------------------

WELL_FORMED = [
    ('<tool_call>\n{"name": "ls", "arguments": {"a": true}}\n</tool_call>', [("ls", {"a": True})]),
    ('Let me look.\n<tool_call>{"name": "cd", "arguments": {"folder": "docs"}}</tool_call>\n'
     '<tool_call>{"name": "ls", "arguments": {}}</tool_call>', [("cd", {"folder": "docs"}), ("ls", {})]),
    ('<tool_call>{"name": "ls", "arguments": "{\\"a\\": false}"}</tool_call>', [("ls", {"a": False})]),
    ('<tool_call>{"name": "mv", "arguments": {"source": "a", "destination": "b"}}', [("mv", {"source": "a",
                                                                                            "destination": "b"})]),
    ("<tool_call>cd(folder='docs')</tool_call>", [("cd", {"folder": "docs"})]),
    ('{"name": "ls", "arguments": {"a": true}}', [("ls", {"a": True})]),
    ('[{"name": "ls", "arguments": {}}, {"name": "pwd", "arguments": {}}]', [("ls", {}), ("pwd", {})]),
    ('```json\n[{"function": "math.factorial", "parameters": {"number": 5}}]\n```', [("math.factorial",
                                                                                      {"number": 5})]),
    ('{"function": {"name": "ls", "arguments": "{}"}}', [("ls", {})]),
    ('[{"calculate_triangle_area": {"base": 10, "height": 5}}]', [("calculate_triangle_area",
                                                                   {"base": 10, "height": 5})]),
    ("[cd(folder='document'), mkdir(dir_name='temp')]", [("cd", {"folder": "document"}),
                                                          ("mkdir", {"dir_name": "temp"})]),
    ("math.hypot(x=4, y=5)", [("math.hypot", {"x": 4, "y": 5})]),
    ("```python\n[get_weather(city=\"Paris\", days=[1, 2], opts={'unit': 'C'}, ok=None)]\n```",
     [("get_weather", {"city": "Paris", "days": [1, 2], "opts": {"unit": "C"}, "ok": None})]),
    ("[ls()]", [("ls", {})]),
    ("[f(x=-1.5, y=(1, 2))]", [("f", {"x": -1.5, "y": [1, 2]})]),
]


@pytest.mark.parametrize(("text", "expected"), WELL_FORMED)
def test_well_formed_outputs_become_openai_shaped_calls(text: str, expected: list) -> None:
    parsed = parse_tool_calls(text)
    assert parsed.errors == []
    assert calls_of(text) == expected
    for index, call in enumerate(parsed.calls):
        assert call["type"] == "function" and call["id"] == f"call_{index}"
        assert isinstance(call["function"]["arguments"], str)  # JSON text, as OpenAI sends it
        json.loads(call["function"]["arguments"])


def test_prose_is_an_answer_not_an_error() -> None:
    for text in ["", "   ", "The file has 3 lines.", "I cannot do that: no function fits.",
                 "Sure (I think) it is done.", "print is a function"]:
        parsed = parse_tool_calls(text)
        assert parsed.calls == [] and parsed.errors == [], text
    assert parse_tool_calls("Done. The answer is 42.").text == "Done. The answer is 42."


def test_prose_around_hermes_calls_is_kept_apart() -> None:
    parsed = parse_tool_calls('Thinking.\n<tool_call>{"name": "ls", "arguments": {}}</tool_call>\nBye.')
    assert parsed.names == ["ls"] and parsed.text == "Thinking.\n\nBye."


# --- the adversarial table: every malformed output is a counted error -----------------------------

MALFORMED = [
    ('<tool_call>{"name": "ls", </tool_call>', 0, 1),                       # truncated JSON
    ("<tool_call></tool_call>", 0, 1),                                       # empty tag
    ("<tool_call>", 0, 1),                                                   # a lone opening tag
    ('<tool_call>{"arguments": {}}</tool_call>', 0, 1),                      # no name
    ('<tool_call>{"name": 7, "arguments": {}}</tool_call>', 0, 1),           # name not a string
    ('<tool_call>{"name": "ls", "arguments": [1, 2]}</tool_call>', 0, 1),    # arguments not an object
    ('<tool_call>{"name": "ls", "arguments": "{oops"}</tool_call>', 0, 1),   # arguments text not JSON
    ('<tool_call>{"name": "ls; rm -rf /", "arguments": {}}</tool_call>', 0, 1),   # not a name
    ('<tool_call>{"name": "f", "arguments": {"a=1),__import__(\'os\').system(\'x\'": 1}}</tool_call>', 0, 1),
    ('<tool_call>{"name": "ls", "arguments": {}}</tool_call><tool_call>{bad}</tool_call>', 1, 1),  # one of two
    ('{"name": "ls", "arguments": {"a": true}', 0, 1),                       # bare JSON cut off
    ("[1, 2, 3]", 0, 3),                                                     # a list of non-calls
    ('["ls"]', 0, 1),
    ("[cd(folder='a'), 42]", 1, 1),                                          # one call, one non-call
    ("[cd('a')]", 0, 1),                                                     # positional argument
    ("[cd(**{'folder': 'a'})]", 0, 1),                                       # **kwargs
    ("[cd(folder=os.getcwd())]", 0, 1),                                      # not a literal: never evaluated
    ("[cd(folder=__import__('os').system('touch /tmp/pwned'))]", 0, 1),
    ("[(lambda: 1)()]", 0, 1),                                               # calling a non-name
    ("[cd(folder='a'", 0, 1),                                                # unbalanced
    ("[f(x={1, 2})]", 0, 1),                                                 # a set is no JSON value
    ("[f(x=b'raw')]", 0, 1),                                                 # bytes neither
    ("{" * 5000 + "}" * 5000, 0, 1),                                         # deep nesting
    ("[" + "f(x=[" * 200 + "]" * 200 + ")]", 0, 1),
    ('<tool_call>{"name": "f", "arguments": {"a": ' + "[" * 100_000 + "]" * 100_000 + "}}</tool_call>", 0, 1),
    ('<tool_call>{"name": "f", "arguments": "' + "[" * 100_000 + '"}</tool_call>', 0, 1),  # nested past the stack
    ('<tool_call>{"name": "f", "arguments": {"a": ' + "9" * 5000 + "}}</tool_call>", 0, 1),  # an int past 4,300 digits
    ("```json\n{\"name\": \"ls\", \"arguments\": }\n```", 0, 1),
]


@pytest.mark.parametrize(("text", "good", "bad"), MALFORMED)
def test_malformed_outputs_are_counted_never_raised(text: str, good: int, bad: int) -> None:
    parsed = parse_tool_calls(text)
    assert len(parsed.calls) == good, parsed
    assert parsed.malformed == bad, parsed.errors
    assert all(isinstance(error, str) and error for error in parsed.errors)


def test_nothing_is_evaluated(tmp_path) -> None:
    marker = tmp_path / "pwned"
    parse_tool_calls(f"[cd(folder=__import__('os').system('touch {marker}'))]")
    parse_tool_calls(f"<tool_call>open(file='{marker}', mode='w')</tool_call>")  # a call: parsed, not run
    assert not marker.exists()


def test_huge_output_is_cut_not_choked_on() -> None:
    parsed = parse_tool_calls("<tool_call>" + "x" * 1_000_000)
    assert parsed.calls == [] and parsed.malformed == 1


# --- functions -> prompt ------------------------------------------------------------------------


def test_tools_system_prompt_is_hermes_style() -> None:
    text = tools_system_prompt([LS])
    assert "<tools>\n" + json.dumps({"type": "function", "function": LS}) + "\n</tools>" in text
    assert "<tool_call>" in text and "</tool_call>" in text
    assert tools_system_prompt([LS], preamble="You are helpful.").startswith("You are helpful.\n\n# Tools")


def test_with_tools_extends_a_system_message_or_adds_one() -> None:
    user = {"role": "user", "content": "list"}
    added = with_tools([user], [LS])
    assert added[0]["role"] == "system" and "<tools>" in added[0]["content"] and added[1] == user
    extended = with_tools([{"role": "system", "content": "Be brief."}, user], [LS])
    assert len(extended) == 2 and extended[0]["content"].startswith("Be brief.")


def test_as_openai_tools_wraps_plain_specs_and_refuses_nonsense() -> None:
    wrapped = {"type": "function", "function": LS}
    assert as_openai_tools([LS, wrapped]) == [wrapped, wrapped]
    with pytest.raises(ValueError, match="string 'name'"):
        as_openai_tools([{"description": "no name"}])
    with pytest.raises(TypeError):
        as_openai_tools(["ls"])


class Tokenizer:
    """A chat template stand-in: the real `apply_chat_template` call shape, a fixed rendering."""

    def __init__(self, template: str):
        self.chat_template = template
        self.seen: dict = {}

    def apply_chat_template(self, messages, tools=None, tokenize=False, add_generation_prompt=False):
        self.seen = {"messages": messages, "tools": tools}
        return "|".join(f"{m['role']}:{m['content']}" for m in messages) + ("|tools" if tools else "")


def test_render_prompt_uses_the_templates_tools_when_it_has_them() -> None:
    native = Tokenizer("{% if tools %}{{ tools | tojson }}{% endif %}{% for m in messages %}{% endfor %}")
    assert template_supports_tools(native)
    assert render_prompt(native, [{"role": "user", "content": "hi"}], [LS]).endswith("|tools")
    assert native.seen["tools"] == [{"type": "function", "function": LS}]
    plain = Tokenizer("{% for m in messages %}{{ m.content }}{% endfor %}")
    assert not template_supports_tools(plain)
    text = render_prompt(plain, [{"role": "user", "content": "hi"}], [LS])
    assert text.startswith("system:# Tools") and plain.seen["tools"] is None


def test_tool_responses_and_call_arguments() -> None:
    assert tool_responses(["1", "{}"]) == "<tool_response>\n1\n</tool_response>\n<tool_response>\n{}\n</tool_response>"
    assert call_arguments({"function": {"name": "f", "arguments": "[1]"}}) == {}
    assert call_arguments({"function": {"name": "f", "arguments": {"a": 1}}}) == {"a": 1}


def test_formats_narrow_what_counts_as_a_call() -> None:
    hermes = '<tool_call>\n{"name": "ls", "arguments": {}}\n</tool_call>'
    assert parse_tool_calls(hermes, formats=("hermes",)).names == ["ls"]
    assert parse_tool_calls(hermes, formats=("python",)).calls == []       # prose to a python-only reader
    assert parse_tool_calls("[ls(a=True)]", formats=("hermes",)).calls == []
    assert parse_tool_calls("[ls(a=True)]", formats=("hermes",)).errors == []
    assert parse_tool_calls("[ls(a=True)]", formats=("python",)).names == ["ls"]
    assert parse_tool_calls('{"name": "ls", "arguments": {}}', formats=("python",)).calls == []
    assert parse_tool_calls("<tool_call>ls(a=True)</tool_call>", formats=("hermes",)).malformed == 1
    with pytest.raises(ValueError, match="unknown call formats"):
        parse_tool_calls("x", formats=("xml",))
