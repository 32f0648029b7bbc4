"""Each math spec key that no other test set reaches the code it configures (the reach audit, issue 37).

Every component is built from a spec block as a user would write it (`select_component(...).create()`),
once with the key at a non-default value and once without it, and the test checks the behaviour the
key is documented to change: `correct_score` and `verify_timeout` of `math_answer` and
`math_answer_or_llm`, `max_operand` and `parentheses` of `arithmetic`, `id_prefix` of `math_jsonl`,
`use_task_prompt` of `math_cot` and `math_tool`, and `observation_role` of `math_tool`. A test fails
if its key were ignored, because the default gives a different result.

The workflows' policy is `ScriptedPolicy` (math_scripted_llm.py) without a tokenizer: it returns
fixed replies and records the messages it was asked with. The LLM behind `math_answer_or_llm` is
the `openai_server` fixture (a scripted OpenAI-compatible server on loopback). Everything else is
real: the registry, the config classes, the judges, the math-verify worker and the sandbox.
"""

from __future__ import annotations

import asyncio
import json
import re
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
from beyondagent_plugin_math.sandbox import isolation_unavailable
from math_scripted_llm import ScriptedPolicy

from beyondagent_core.jsonl import BadRecords
from beyondagent_core.registry import Registry
from beyondagent_core.spec import select_component
from beyondagent_core.types import Task, Trajectory, Turn

pytestmark = pytest.mark.beyondagent_plugins("math")

HALF = Task(task_id="half", query="What is half of one?", ground_truth="1/2")
ROOT_TWO = Task(task_id="root", query="What is the square root of 2?", ground_truth=r"\sqrt{2}")
# A verl row from the `parquet` source: the dataset's own chat messages in `metadata.prompt`.
VERL_ROW = Task(task_id="verl-0", query="What is 6 * 7?", ground_truth="42",
                metadata={"prompt": [{"role": "system", "content": "Dataset instructions: answer after ####."},
                                     {"role": "user", "content": "Compute 6 * 7."}]})
# Isolated where this machine allows it; elsewhere the guarded subprocess (as in test_math_workflows.py).
SANDBOX = {"timeout": 5.0, "cpu_seconds": 5, "max_output_chars": 200, "max_file_mb": 1,
           "unsafe_local": isolation_unavailable() is not None}


def build(plugin_manager, kind: str, block: dict[str, Any]) -> Any:
    return select_component(Registry(plugin_manager), kind, block, key_path=kind).create()


def answered(task: Task, reply: str) -> Trajectory:
    return Trajectory(task=task, turns=[Turn("user", task.query or ""), Turn("assistant", reply)])


def score(judge: Any, task: Task, reply: str):
    return asyncio.run(judge.score(task, answered(task, reply)))


def arithmetic(plugin_manager, **knobs: Any) -> list[Task]:
    block = {"name": "arithmetic", "level": None, "count": 40, **knobs}
    return list(build(plugin_manager, "task_source", block).load(BadRecords()))


def operands(task: Task) -> list[int]:
    return [int(n) for n in re.findall(r"\d+", task.metadata["expression"])]


# --- rewards: correct_score, verify_timeout ---------------------------------------------------


@pytest.mark.parametrize("name", ["math_answer", "math_answer_or_llm"])
def test_correct_score_is_the_score_of_a_right_answer_and_only_of_it(plugin_manager, name: str) -> None:
    judge = build(plugin_manager, "reward", {"name": name, "correct_score": 0.7, "format_score": 0.1})
    right, wrong = score(judge, HALF, r"So \boxed{\frac{1}{2}}."), score(judge, HALF, r"\boxed{3}")
    assert (right.score, right.success, right.details["status"]) == (0.7, True, "correct")
    assert (wrong.score, wrong.details["status"]) == (0.1, "wrong")  # a wrong answer keeps format_score

    default = build(plugin_manager, "reward", {"name": name, "format_score": 0.1})
    assert score(default, HALF, r"So \boxed{\frac{1}{2}}.").score == 1.0
    if name == "math_answer_or_llm":
        assert judge.llm_calls == 0 and right.details["judge"] == "rule"  # the rule judge decided


def test_math_answer_verify_timeout_bounds_the_math_verify_call(plugin_manager) -> None:
    # A symbolic reference goes to the math-verify worker. No check answers in a microsecond, so
    # with that timeout the worker is given up on and the answer is undecided (the documented
    # outcome of a slow verification); the default timeout lets the same answer be verified.
    quick = build(plugin_manager, "reward", {"name": "math_answer", "verify_timeout": 1e-6})
    assert quick.worker.hard_timeout == 1e-6
    slow = score(quick, ROOT_TWO, r"\boxed{\sqrt{8}/2}")
    assert (slow.score, slow.details["status"]) == (0.0, "undecided")
    assert "math-verify took longer than 1e-06s" in slow.reason

    default = build(plugin_manager, "reward", {"name": "math_answer"})
    assert default.worker.hard_timeout == 15.0
    verified = score(default, ROOT_TWO, r"\boxed{\sqrt{8}/2}")
    assert (verified.score, verified.details["status"]) == (1.0, "correct")


def test_math_answer_or_llm_verify_timeout_sends_a_timed_out_check_to_the_llm(plugin_manager, openai_server) -> None:
    # An undecided rule verdict is what hands the episode to the LLM judge: a timed-out
    # math-verify call must do that, and a verified one must not.
    llm = {"llm": {"model": "grader", "base_url": openai_server.base_url, "max_llm_retries": 0}}
    quick = build(plugin_manager, "reward", {"name": "math_answer_or_llm", "verify_timeout": 1e-6, "llm_judge": llm})
    assert quick.rule.worker.hard_timeout == 1e-6
    openai_server.push("Both are the square root of two. <verdict>yes</verdict>")
    reward = score(quick, ROOT_TWO, r"\boxed{\sqrt{8}/2}")
    assert (reward.score, reward.details["judge"], reward.details["rule_status"]) == (1.0, "llm", "undecided")
    assert "took longer than 1e-06s" in reward.details["rule_reason"]
    assert quick.llm_calls == 1 and len(openai_server.requests) == 1

    default = build(plugin_manager, "reward", {"name": "math_answer_or_llm", "llm_judge": llm})
    verified = score(default, ROOT_TWO, r"\boxed{\sqrt{8}/2}")
    assert (verified.score, verified.details["judge"]) == (1.0, "rule")
    assert default.llm_calls == 0 and len(openai_server.requests) == 1


# --- task sources: max_operand, parentheses, id_prefix ----------------------------------------


def test_max_operand_bounds_the_operands_instead_of_digits(plugin_manager) -> None:
    # digits: 1 alone draws operands in 0..9; max_operand replaces that range, smaller or larger.
    by_digits = [n for task in arithmetic(plugin_manager) for n in operands(task)]
    small = [n for task in arithmetic(plugin_manager, max_operand=3) for n in operands(task)]
    large = [n for task in arithmetic(plugin_manager, max_operand=500) for n in operands(task)]
    assert max(by_digits) == 9 and max(small) == 3 and max(large) > 99
    assert min(small) >= 0 and max(large) <= 500


def test_parentheses_group_sub_expressions_and_keep_the_answer_exact(plugin_manager) -> None:
    knobs = {"operands": 4, "operators": ["+", "-", "*"]}
    flat, grouped = arithmetic(plugin_manager, **knobs), arithmetic(plugin_manager, parentheses=True, **knobs)
    assert not any("(" in task.metadata["expression"] for task in flat)
    assert sum("(" in task.metadata["expression"] for task in grouped) >= 10
    for task in grouped:  # the parentheses are the ones the value needs (Python reads + - * the same way)
        expression = task.metadata["expression"]
        assert Fraction(eval(expression)) == Fraction(task.ground_truth)  # noqa: S307 - only digits, + - * and ( )


def test_id_prefix_prefixes_the_task_ids(plugin_manager, tmp_path: Path) -> None:
    path = tmp_path / "gsm8k.jsonl"
    path.write_text("".join(json.dumps({"question": f"What is {n} + {n}?", "answer": f"#### {2 * n}"}) + "\n"
                            for n in (1, 2)))
    prefixed = build(plugin_manager, "task_source", {"name": "math_jsonl", "path": str(path), "id_prefix": "train"})
    default = build(plugin_manager, "task_source", {"name": "math_jsonl", "path": str(path)})
    assert [task.task_id for task in prefixed.load(BadRecords())] == ["train-1", "train-2"]
    assert [task.task_id for task in default.load(BadRecords())] == ["gsm8k-1", "gsm8k-2"]  # the file's stem


# --- workflows: use_task_prompt, observation_role ---------------------------------------------


def opening(plugin_manager, block: dict[str, Any]) -> tuple[list[dict[str, Any]], Trajectory]:
    policy = ScriptedPolicy([r"6 * 7 = 42, so \boxed{42}."])
    trajectory = asyncio.run(build(plugin_manager, "workflow", block).run(VERL_ROW, None, policy))
    return policy.calls[0]["messages"], trajectory


@pytest.mark.parametrize("name", ["math_cot", "math_tool"])
def test_use_task_prompt_picks_the_tasks_own_messages_or_the_system_prompt_and_query(plugin_manager,
                                                                                     name: str) -> None:
    extra = {"sandbox": SANDBOX} if name == "math_tool" else {}
    own, trajectory = opening(plugin_manager, {"name": name, **extra})
    assert own == VERL_ROW.metadata["prompt"]  # on by default: the dataset's messages as they are
    assert [(t.role, t.content) for t in trajectory.turns[:2]] == [(m["role"], m["content"]) for m in own]

    block = {"name": name, "use_task_prompt": False, "system_prompt": "Box the answer.", **extra}
    ours, trajectory = opening(plugin_manager, block)
    assert ours == [{"role": "system", "content": "Box the answer."}, {"role": "user", "content": "What is 6 * 7?"}]
    assert [t.role for t in trajectory.turns] == ["system", "user", "assistant"]


@pytest.mark.parametrize(("block", "role"), [({}, "user"), ({"observation_role": "tool"}, "tool")])
def test_observation_role_is_the_role_of_the_tool_output(plugin_manager, block: dict[str, Any], role: str) -> None:
    policy = ScriptedPolicy(["Let me compute.\n```python\nprint(6 * 7)\n```", r"\boxed{42}"])
    workflow = build(plugin_manager, "workflow", {"name": "math_tool", "sandbox": SANDBOX, **block})
    trajectory = asyncio.run(workflow.run(Task(task_id="q", query="What is 6 * 7?", ground_truth="42"), None, policy))
    assert [t.role for t in trajectory.turns] == ["system", "user", "assistant", role, "assistant"]
    assert "42" in trajectory.turns[3].content and trajectory.metrics["tool_calls"] == 1
    observation = policy.calls[1]["messages"][-1]  # what the model was shown next
    assert observation["role"] == role and observation["content"] == trajectory.turns[3].content
