"""Parsed calls as BFCL writes them, made safe for BFCL's executor (no `bfcl_eval` import).

BFCL runs a multi-turn call by `eval`-ing its text, `name(arg=repr(value), ...)`, after
prefixing known method names with their backend instance (`multi_turn_utils`). Our calls come
from `beyondagent_plugin_gateway.tool_calls.parse_tool_calls`: a checked dotted name, identifier argument
names and JSON values, so `repr` gives Python literals only. What is left is the name: a name
that is no method of the episode's backends would be looked up among the executor module's
globals and builtins (`open`, `importlib`...), so it becomes a name that exists nowhere; BFCL
reports it as it reports any unknown function ("Error during execution: name ... is not
defined"), and the episode goes on. A call that was not run (an argument cap, a step's limits)
is recorded as `not_run_<name>()`, which fails the same way when BFCL's checker replays it.
"""

from __future__ import annotations

import builtins
import hashlib
import json
import re
from collections.abc import Collection
from typing import Any

from beyondagent_plugin_gateway.tool_calls import ParsedCalls

PLAIN_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")
# Names BFCL's executor module has in scope besides builtins (multi_turn_utils' imports).
EXECUTOR_GLOBALS = frozenset({"copy", "importlib", "inspect", "json", "re", "CLASS_FILE_PATH_MAPPING",
                              "STATELESS_CLASSES", "execute_multi_turn_func_call", "is_empty_execute_response"})


def safe_name(name: str, known: Collection[str]) -> str:
    """`name` when it is a method of the episode's backends or cannot resolve to anything; else a
    name that is defined nowhere (`unknown_function_<hash>`)."""
    if name in known:
        return name
    if PLAIN_NAME.match(name) and name not in EXECUTOR_GLOBALS and not hasattr(builtins, name):
        return name
    return f"unknown_function_{hashlib.sha256(name.encode()).hexdigest()[:8]}"


def call_text(name: str, arguments: dict[str, Any]) -> str:
    """BFCL's text of one call (`convert_to_function_call`): `name(a=repr(v),b=...)`."""
    return f"{name}({','.join(f'{key}={value!r}' for key, value in arguments.items())})"


def execution_texts(parsed: ParsedCalls, known: Collection[str]) -> list[str]:
    """The calls to execute, as BFCL's decoder would give them, names made safe."""
    return [call_text(safe_name(name, known), arguments)
            for name, arguments in zip(parsed.names, parsed.arguments(), strict=True)]


def not_run_text(name: str) -> str:
    """What BFCL's checker replays for a call that was not run here (`bounds.py`, `sandbox.py`): a
    call of a name defined nowhere, without arguments, so it fails at once there too and costs nothing."""
    return f"not_run_{name if PLAIN_NAME.match(name) else 'call'}()"


def ast_form(parsed: ParsedCalls) -> list[dict[str, dict[str, Any]]]:
    """BFCL's decoded AST form of the calls: `[{name: {arg: value}}]` (what its AST checker reads)."""
    return [{name: arguments} for name, arguments in zip(parsed.names, parsed.arguments(), strict=True)]


def hermes_text(calls: list[tuple[str, dict[str, Any]]]) -> str:
    """Calls as a Qwen/Hermes model writes them (what BFCL's Qwen FC handler decodes)."""
    return "\n".join(f'<tool_call>\n{json.dumps({"name": name, "arguments": args})}\n</tool_call>'
                     for name, args in calls)


def python_text(calls: list[tuple[str, dict[str, Any]]]) -> str:
    """Calls in BFCL's prompting format: `[f(a=1), g()]`."""
    return "[" + ", ".join(call_text(name, args) for name, args in calls) + "]"
