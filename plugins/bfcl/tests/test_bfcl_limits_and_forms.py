"""The BFCL plugin's logic that runs without `bfcl_eval`, at its edges (after the eighth mutation audit):
each argument cap exactly on its limit and one past (`bounds.py`), the env's config keys at their limits
and their documented defaults, which call formats each `style` reads (and the structured `tool_calls`
fallback), the texts BFCL's executor gets for a call and for one that was not run, the reward's rules
(BFCL's pass is 1 whatever the partial credit; a fail scores the partial credit only with `reward: turns`),
a result cut exactly past `max_output_chars`, the workflow's `system_prompt` and metrics, and an
exploration goal's checks and its 12-call limit.

Main environment only (these modules never import `bfcl_eval`; the env's backends and BFCL's checkers,
which need the plugin's venv, are exercised by the served tests). `_parse`, `_reward` and `_refusal` are
called on a `BFCLEnv` that has no episode open, with the attributes a reset sets, to reach the verdict rules
without BFCL's venv.
"""

from __future__ import annotations

import math
from typing import Any

import pytest
from beyondagent_plugin_bfcl import bounds
from beyondagent_plugin_bfcl.calls import call_text, hermes_text, not_run_text, python_text, safe_name
from beyondagent_plugin_bfcl.config import MAX_STEPS_PER_TURN, BFCLConfig, BFCLWorkflowConfig
from beyondagent_plugin_bfcl.env import BFCLEnv, truncate
from beyondagent_plugin_bfcl.explore import MAX_GOAL_CALLS, achieved_goals, check_goal, describe
from beyondagent_plugin_bfcl.workflow import BFCLWorkflow

from beyondagent_core.protocols import EnvReset, EnvStep

# --- argument caps ------------------------------------------------------------------------------


@pytest.mark.parametrize(("name", "arguments", "refused"), [
    ("power", {"base": 10, "exponent": 4299}, False),  # 4,300 digits: the cap itself
    ("power", {"base": 10, "exponent": 4300}, True),  # 4,301 digits: Python refuses to write it as text
    ("power", {"base": -10, "exponent": 4300}, True),  # the size of |base| counts
    ("power", {"base": 2, "exponent": 14284}, False), ("power", {"base": 2, "exponent": 14285}, True),
    ("power", {"base": 1, "exponent": 10**12}, False), ("power", {"base": -1, "exponent": 10**12}, False),
    ("power", {"base": 10, "exponent": -(10**12)}, False), ("power", {"base": 10, "exponent": 0}, False),
    ("power", {"base": 10.0, "exponent": 10**12}, False),  # a float power is bounded (an overflow error)
    ("power", {"base": 2, "exponent": 10**400}, True),  # past a float: "more than 10**308"
    ("logarithm", {"value": 10, "base": 3, "precision": 1000}, False),
    ("logarithm", {"value": 10, "base": 3, "precision": 1001}, True),
    ("square_root", {"number": 2, "precision": 1000}, False), ("square_root", {"number": 2, "precision": 1001}, True),
    ("square_root", {"number": 2, "precision": -1001}, True),
    ("square_root", {"number": 2, "precision": math.nan}, True),
    ("round_number", {"number": 5, "decimal_places": -1000}, False),
    ("round_number", {"number": 5, "decimal_places": -1001}, True),
    ("round_number", {"number": 5, "decimal_places": 1001}, True),
    ("round_number", {"number": 5, "precision": 10**9}, False),  # only decimal_places is capped there
])
def test_each_cap_lets_its_limit_through_and_refuses_one_past_it(name: str, arguments: dict, refused: bool) -> None:
    why = bounds.refusal("MathAPI", name, arguments)
    assert (why is not None) == refused, why
    if refused:
        assert why.endswith("(docs/bfcl.md, 'Bounds')")


def test_a_refusal_says_what_was_asked_and_what_is_allowed() -> None:
    assert bounds.refusal("MathAPI", "power", {"base": 10, "exponent": 4301}) == (
        "its result would have about 4.3e+03 digits; an integer result may have at most 4,300 here "
        "(docs/bfcl.md, 'Bounds')")
    assert "more than 10**308 digits" in bounds.refusal("MathAPI", "power", {"base": 2, "exponent": 10**400})
    assert bounds.refusal("MathAPI", "round_number", {"number": 5, "decimal_places": 1001}).startswith(
        "decimal_places=1001 is outside what this environment allows, from -1,000 to 1,000")


@pytest.mark.parametrize(("class_name", "name"), [("MathAPI", "add"), ("GorillaFileSystem", "power"),
                                                  (None, "power"), ("mathapi", "power")])
def test_only_the_capped_functions_of_their_class_are_checked(class_name: str | None, name: str) -> None:
    assert bounds.refusal(class_name, name, {"base": 10, "exponent": 10**9, "precision": 10**9}) is None


# --- config ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(("key", "value", "accepted"), [
    ("max_calls_per_step", 1, True), ("max_calls_per_step", 0, False),
    ("max_calls_per_step", 1024, True), ("max_calls_per_step", 1025, False),
    ("max_call_memory_mb", 256, True), ("max_call_memory_mb", 255, False),
    ("max_call_memory_mb", 65536, True), ("max_call_memory_mb", 65537, False),
    ("max_call_seconds", 0.1, True), ("max_call_seconds", 0.09, False),
    ("max_output_chars", 100, True), ("max_output_chars", 99, False),
    ("max_steps_per_turn", 1, True), ("max_steps_per_turn", 0, False),
    ("style", "prompting", True), ("reward", "turns", True),
])
def test_env_keys_are_accepted_up_to_their_limits(key: str, value: Any, accepted: bool) -> None:
    if accepted:
        assert getattr(BFCLConfig(**{key: value}), key) == value
    else:
        with pytest.raises(ValueError, match=key):
            BFCLConfig(**{key: value})


@pytest.mark.parametrize(("key", "value", "accepted"), [
    ("top_p", 1, True), ("top_p", 0, False), ("temperature", 0, True), ("temperature", -0.1, False),
    ("max_turns", 1, True), ("max_turns", 0, False), ("max_tokens", 1, True), ("max_tokens", 0, False),
])
def test_workflow_keys_are_accepted_up_to_their_limits(key: str, value: Any, accepted: bool) -> None:
    if accepted:
        assert getattr(BFCLWorkflowConfig(**{key: value}), key) == value
    else:
        with pytest.raises(ValueError, match=key):
            BFCLWorkflowConfig(**{key: value})


def test_the_documented_defaults() -> None:
    config = BFCLConfig()
    assert (config.style, config.reward, config.max_steps_per_turn, config.max_output_chars, config.data_dir,
            config.max_calls_per_step, config.max_call_seconds, config.max_call_memory_mb) == (
        "tools", "official", 20, 4000, "", 64, 5.0, 1024)
    assert MAX_STEPS_PER_TURN == 20  # BFCL's MAXIMUM_STEP_LIMIT
    workflow = BFCLWorkflowConfig()
    assert (workflow.max_turns, workflow.system_prompt, workflow.temperature, workflow.top_p,
            workflow.max_tokens) == (60, "", None, None, None)


# --- what the env reads and sends ----------------------------------------------------------------


TOOL_CALL = '<tool_call>{"name": "cd", "arguments": {"folder": "x"}}</tool_call>'
PYTHON_CALL = "[cd(folder='x'), ls()]"
STRUCTURED = [{"function": {"name": "cd", "arguments": '{"folder": "x"}'}}]


@pytest.mark.parametrize(("style", "action", "names", "malformed"), [
    ("tools", {"content": TOOL_CALL}, ["cd"], 0),
    ("tools", {"content": PYTHON_CALL}, [], 0),  # a Python list is no call for a Hermes model
    ("prompting", {"content": PYTHON_CALL}, ["cd", "ls"], 0),
    ("prompting", {"content": TOOL_CALL}, [], 0),  # nor a <tool_call> block in BFCL's prompting format
    ("tools", {"content": "", "tool_calls": STRUCTURED}, ["cd"], 0),  # a server's parsed calls
    ("tools", {"content": "<tool_call>{bad</tool_call>", "tool_calls": STRUCTURED}, [], 1),  # the text's error wins
    ("tools", {"content": "", "tool_calls": []}, [], 0),
])
def test_each_style_reads_its_own_call_format(style: str, action: dict, names: list[str], malformed: int) -> None:
    parsed = BFCLEnv(BFCLConfig(style=style))._parse({"role": "assistant", **action})
    assert (parsed.names, parsed.malformed) == (names, malformed)


@pytest.mark.parametrize(("name", "known", "kept"), [
    ("ls", set(), True), ("rm_everything", set(), True), ("a1_b", set(), True),
    ("open", set(), False), ("print", set(), False), ("json", set(), False),  # builtins, the executor's globals
    ("_private", set(), False), ("1st", set(), False), ("os.system", set(), False), ("", set(), False),
    ("message.post", {"message.post"}, True), ("open", {"open"}, True),  # a backend's own method
])
def test_a_call_name_is_kept_only_when_it_is_a_method_or_resolves_to_nothing(name: str, known: set, kept: bool) -> None:
    assert (safe_name(name, known) == name) == kept


def test_the_texts_of_calls_as_bfcl_writes_them() -> None:
    assert call_text("mv", {"source": "a.txt", "destination": "b"}) == "mv(source='a.txt',destination='b')"
    assert call_text("ls", {}) == "ls()"
    assert call_text("f", {"n": 1, "ok": True, "x": None, "l": [1, "a"]}) == "f(n=1,ok=True,x=None,l=[1, 'a'])"
    assert python_text([("cd", {"folder": "x"}), ("ls", {})]) == "[cd(folder='x'), ls()]"
    assert hermes_text([("ls", {})]) == '<tool_call>\n{"name": "ls", "arguments": {}}\n</tool_call>'
    assert not_run_text("power") == "not_run_power()" and not_run_text("os.system") == "not_run_call()"


@pytest.mark.parametrize(("length", "cut"), [(100, False), (101, True)])
def test_a_result_is_cut_only_past_the_limit(length: int, cut: bool) -> None:
    shown = truncate("r" * length, 100)
    assert shown.startswith("r" * 100) and (shown != "r" * length) == cut
    if cut:
        assert shown.endswith("[... 1 more characters not shown ...]")


# --- the reward ------------------------------------------------------------------------------------


def judged(verdict: dict, *, reward: str = "official", partial: float | None = None, kind: str = "multi_turn",
           turn: int = 1, turns: int = 4) -> Any:
    env = BFCLEnv(BFCLConfig(reward=reward))
    # what a reset of a 4-turn multi_turn_base entry sets, and an episode in its second turn
    env.category, env.kind, env.entry, env.turn = "multi_turn_base", kind, {"id": "multi_turn_base_0"}, turn
    env.questions = [[{"role": "user", "content": f"turn {i}"}] for i in range(turns)]
    return env._reward(verdict, partial=partial)


def test_bfcls_pass_scores_one_whatever_the_partial_credit() -> None:
    reward = judged({"valid": True}, reward="turns", partial=0.25)
    assert (reward.score, reward.success, reward.reason) == (1.0, True, "BFCL: pass")
    assert "partial" not in reward.details and reward.details["error_type"] is None
    assert reward.details["official"] is True and reward.details["reward"] == "turns"


@pytest.mark.parametrize(("partial", "score"), [(None, 0.0), (0.0, 0.0), (0.75, 0.75)])
def test_a_fail_scores_the_partial_credit_when_there_is_one(partial: float | None, score: float) -> None:
    reward = judged({"valid": False, "error_type": "multi_turn:state_mismatch", "error_message": "differs"},
                    reward="turns" if partial is not None else "official", partial=partial)
    assert (reward.score, reward.success, reward.details["official"]) == (score, False, False)
    assert reward.reason.startswith("BFCL: fail (multi_turn:state_mismatch): differs")
    assert reward.details.get("partial") == partial
    assert ("partial credit" in reward.reason) == (partial is not None)


def test_a_fails_reason_joins_bfcls_errors_and_is_cut() -> None:
    listed = judged({"valid": False, "error_type": "ast:x", "error": ["one", "two"]})
    assert listed.reason == "BFCL: fail (ast:x): one; two"
    long = judged({"valid": False, "error": ["e" * 500]})
    assert long.reason == "BFCL: fail (?): " + "e" * 300


@pytest.mark.parametrize(("kind", "turn", "reached"), [("multi_turn", 0, 1), ("multi_turn", 3, 4),
                                                       ("multi_turn", 4, 4), ("ast", 0, 1)])
def test_turns_reached_counts_the_turn_in_progress_up_to_the_last(kind: str, turn: int, reached: int) -> None:
    assert judged({"valid": False}, kind=kind, turn=turn).details["turns_reached"] == reached


def test_no_episode_no_step_and_a_clear_verdict() -> None:
    env = BFCLEnv()
    with pytest.raises(RuntimeError, match=r"step\(\) before reset\(\)"):
        env.step({"role": "assistant", "content": TOOL_CALL})
    reward = env.evaluate()
    assert (reward.score, reward.success) == (0.0, False) and "reset() was not called" in reward.reason
    assert env.valid_actions() == [] and env.describe_achieved() == []


@pytest.mark.parametrize(("index", "limit", "refused"), [(1, 2, False), (2, 2, True), (0, 1, False)])
def test_the_calls_of_a_message_past_max_calls_per_step_are_refused(index: int, limit: int, refused: bool) -> None:
    env = BFCLEnv(BFCLConfig(max_calls_per_step=limit))
    why = env._refusal(index, "ls", {})
    assert (why == f"was not run: at most {limit} calls of one message run here") == refused
    assert (why is None) != refused


def test_a_capped_call_is_refused_only_on_the_backend_that_has_it() -> None:
    env = BFCLEnv()
    env.methods, env.known = {"power": "MathAPI"}, {"power"}  # what a reset of a MathAPI entry sets
    assert env._refusal(0, "power", {"base": 10, "exponent": 4301}).startswith("was not run: its result would have")
    assert env._refusal(0, "power", {"base": 10, "exponent": 4299}) is None
    env.methods, env.known = {}, set()
    assert env._refusal(0, "power", {"base": 10, "exponent": 4301}) is None  # no such method: BFCL says so itself


# --- the workflow ----------------------------------------------------------------------------------


DOC = {"name": "ls", "description": "List.", "parameters": {"type": "dict", "properties": {}, "required": []}}


def test_the_system_prompt_comes_before_the_tools_and_merges_with_a_system_message() -> None:
    workflow = BFCLWorkflow(BFCLWorkflowConfig(system_prompt="Be brief."))
    alone = workflow.opening(EnvReset(messages=[{"role": "user", "content": "list"}], info={"tools": [DOC]}))
    assert alone[0]["role"] == "system" and alone[0]["content"].startswith("Be brief.")
    assert "<tools>" in alone[0]["content"] and alone[1] == {"role": "user", "content": "list"}
    merged = workflow.opening(EnvReset(messages=[{"role": "system", "content": "Entry's own."},
                                                 {"role": "user", "content": "list"}], info={}))
    assert merged == [{"role": "system", "content": "Be brief.\n\nEntry's own."}, {"role": "user", "content": "list"}]
    prompting = EnvReset(messages=[{"role": "system", "content": "BFCL's own"}], info={"style": "prompting"})
    assert workflow.opening(prompting) == [{"role": "system", "content": "BFCL's own"}]  # BFCL's prompt as it is
    assert BFCLWorkflow().opening(EnvReset(messages=[{"role": "user", "content": "x"}], info={"tools": []})) == [
        {"role": "user", "content": "x"}]  # no functions, no system message


def test_the_workflows_metrics_add_up_the_steps_counts() -> None:
    steps = [EnvStep(observation=[], info={"calls": 3, "malformed_calls": 1, "errors": 2, "not_run": 1}),
             EnvStep(observation=[], info={"calls": 0, "ended_turn": True}),
             EnvStep(observation=[], info={"calls": 2, "not_run": 2}),
             EnvStep(observation=[], info={"calls": 0, "ended_turn": True}, terminated=True)]  # the last turn
    assert BFCLWorkflow().step_metrics(steps) == {"calls": 5, "malformed_calls": 1, "call_errors": 2,
                                                  "calls_not_run": 3, "user_turns": 2}


# --- exploration goals -----------------------------------------------------------------------------


@pytest.mark.parametrize("goal", [
    {"kind": "calls", "calls": ["ls()"]}, {"kind": "calls", "calls": ["cd(folder='x')", "mkdir(dir_name='y')"]},
    {"kind": "calls", "calls": ["f(a=[1, 2], b={'k': None}, c=-1)"]},
])
def test_a_goal_of_named_calls_with_literal_arguments_is_accepted(goal: dict) -> None:
    assert check_goal(goal) is goal


@pytest.mark.parametrize(("goal", "why"), [
    (None, "a BFCL goal is"), ({"kind": "call", "calls": ["ls()"]}, "a BFCL goal is"),
    ({"kind": "calls", "calls": []}, "a BFCL goal is"), ({"kind": "calls", "calls": "ls()"}, "a BFCL goal is"),
    ({"kind": "calls", "calls": ["ls()", 3]}, "a BFCL goal is"),
    ({"kind": "calls", "calls": ["ls("]}, "is not a call"),
    ({"kind": "calls", "calls": ["ls"]}, "must be name\\(arg=literal"),
    ({"kind": "calls", "calls": ["os.system(c='x')"]}, "must be name\\(arg=literal"),
    ({"kind": "calls", "calls": ["cd('x')"]}, "must be name\\(arg=literal"),
    ({"kind": "calls", "calls": ["cd(folder=x)"]}, "must be name\\(arg=literal"),
])
def test_a_goal_that_is_not_named_calls_with_literal_arguments_is_refused(goal: Any, why: str) -> None:
    with pytest.raises(ValueError, match=why):
        check_goal(goal)


def test_a_goal_may_hold_exactly_max_goal_calls_calls() -> None:
    ran = [{"call": f"cd(folder='d{i}')", "ok": True, "changed": i >= MAX_GOAL_CALLS - 1}
           for i in range(MAX_GOAL_CALLS + 1)]
    goals = achieved_goals(ran, "multi_turn_base_0")
    assert [len(goal["goal"]["calls"]) for goal in goals] == [MAX_GOAL_CALLS] and MAX_GOAL_CALLS == 12
    assert goals[0]["goal"]["seed"] == "multi_turn_base_0" and goals[0]["goal"]["query"] == goals[0]["query"]
    assert goals[0]["query"].startswith("Using the functions you have, do the following, in this order: cd with "
                                        "folder='d0'; cd with folder='d1';")


@pytest.mark.parametrize(("call", "words"), [("mkdir(dir_name='x')", "mkdir with dir_name='x'"),
                                             ("ls()", "ls (no arguments)"), ("ls(", "ls("), ("1 + 2", "1 + 2")])
def test_a_call_is_described_in_words(call: str, words: str) -> None:
    assert describe(call) == words
