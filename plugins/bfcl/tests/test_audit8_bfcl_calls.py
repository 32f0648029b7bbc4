"""What the BFCL plugin does in the main environment before a call runs, the parts the served tests leave
open (the eighth mutation audit): the argument caps read a number written as text (`mpmath` reads it), a
call named after a global of BFCL's executor module never reaches it, and the workflow passes each of its
sampling keys on under its own name. No `bfcl_eval` here: these modules never import it."""

from __future__ import annotations

import hashlib

import pytest
from beyondagent_plugin_bfcl import bounds
from beyondagent_plugin_bfcl.calls import EXECUTOR_GLOBALS, execution_texts, safe_name
from beyondagent_plugin_bfcl.config import BFCLWorkflowConfig
from beyondagent_plugin_bfcl.workflow import BFCLWorkflow

from beyondagent_plugin_gateway.tool_calls import parse_tool_calls


@pytest.mark.parametrize(("name", "arguments", "why"), [
    ("logarithm", {"value": 10, "base": 3, "precision": "3000000"},
     "precision='3000000' is outside what this environment allows, at most 1,000 digits"),
    ("square_root", {"number": 2, "precision": "1001"},
     "precision='1001' is outside what this environment allows, at most 1,000 digits"),
    ("round_number", {"number": 5, "decimal_places": "-1000000000"},
     "decimal_places='-1000000000' is outside what this environment allows, from -1,000 to 1,000"),
])
def test_a_number_written_as_text_is_capped_as_the_number(name: str, arguments: dict, why: str) -> None:
    refused = bounds.refusal("MathAPI", name, arguments)
    assert refused is not None and refused.startswith(why)


@pytest.mark.parametrize("arguments", [{"number": 2, "precision": "1000"}, {"number": 2, "precision": "-1000"},
                                       {"number": 2, "precision": "many"}, {"number": 2}])
def test_text_within_the_cap_or_not_a_number_runs(arguments: dict) -> None:
    assert bounds.refusal("MathAPI", "square_root", arguments) is None  # BFCL itself reports a bad type


@pytest.mark.parametrize("name", sorted(EXECUTOR_GLOBALS))
def test_a_name_of_the_executors_globals_becomes_a_name_defined_nowhere(name: str) -> None:
    hidden = f"unknown_function_{hashlib.sha256(name.encode()).hexdigest()[:8]}"
    assert safe_name(name, set()) == hidden
    assert safe_name(name, {"ls", "cd"}) == hidden
    assert safe_name(name, {name}) == name  # a backend method of that name is the method


def test_only_unsafe_names_are_renamed_in_the_texts_to_run() -> None:
    parsed = parse_tool_calls('<tool_call>{"name": "importlib", "arguments": {"name": "os"}}</tool_call>'
                              '<tool_call>{"name": "cd", "arguments": {"folder": "x"}}</tool_call>'
                              '<tool_call>{"name": "rm_everything", "arguments": {}}</tool_call>')
    texts = execution_texts(parsed, {"cd"})
    assert texts[0] == f"unknown_function_{hashlib.sha256(b'importlib').hexdigest()[:8]}(name='os')"
    assert texts[1:] == ["cd(folder='x')", "rm_everything()"]  # unknown to Python too: BFCL says "not defined"


def test_the_workflows_sampling_keys_reach_the_loop_under_their_own_names() -> None:
    workflow = BFCLWorkflow(BFCLWorkflowConfig(max_turns=9, temperature=0.3, top_p=0.8, max_tokens=77))
    assert workflow.config.max_turns == 9
    assert workflow.sampling == {"temperature": 0.3, "top_p": 0.8, "max_tokens": 77}
    assert BFCLWorkflow(BFCLWorkflowConfig(top_p=0.5)).sampling == {"top_p": 0.5}
    assert BFCLWorkflow().sampling == {}
