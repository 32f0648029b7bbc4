"""The math judges as a spec selects them, verl's `compute_score`, and the LLM fallback.

The LLM judge's model is `ScriptedOpenAIServer` on loopback (the `openai_server` fixture),
reached through the real `openai` client: it stands in for a hosted LLM.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from importlib.metadata import entry_points

import attrs
import beyondagent_plugin_math
import pytest

from beyondagent_core import RewardSpec, Task, TaskSourceSpec, Trajectory, Turn, WorkflowSpec
from beyondagent_core.errors import SpecError
from beyondagent_core.registry import Registry
from beyondagent_core.spec import select_component

pytestmark = pytest.mark.beyondagent_plugins("math")

TASK = Task(task_id="q1", query="What is half of one?", ground_truth="1/2")


def episode(*replies: str, task: Task = TASK) -> Trajectory:
    turns = [Turn("system", "Answer in \\boxed{}."), Turn("user", task.query or "")]
    for reply in replies:
        turns += [Turn("assistant", reply), Turn("user", "```output\n0.5\n```")]
    return Trajectory(task=task, turns=turns[:-1] if replies else turns)


def build(plugin_manager, block: dict) -> object:
    return select_component(Registry(plugin_manager), "reward", block, key_path="reward").create()


def test_hooks_register_every_component_with_lazy_factories() -> None:
    specs = [*beyondagent_plugin_math.beyondagent_task_sources(), *beyondagent_plugin_math.beyondagent_workflows(),
             *beyondagent_plugin_math.beyondagent_rewards()]
    assert [s.name for s in specs] == ["math_jsonl", "arithmetic", "math_cot", "math_tool", "math_answer",
                                       "math_format", "math_answer_or_llm"]
    for spec in specs:
        assert isinstance(spec, (TaskSourceSpec, WorkflowSpec, RewardSpec)) and attrs.has(spec.config_cls)
        assert isinstance(spec.factory, str) and spec.summary
        spec.load_factory()


def test_entry_point_is_declared() -> None:
    points = {ep.name: ep.value for ep in entry_points(group="beyondagent")}
    assert points.get("math") == "beyondagent_plugin_math"


def test_listing_and_compute_score_import_neither_torch_nor_sympy() -> None:
    code = ("import sys, beyondagent_plugin_math as p; p.beyondagent_rewards(); p.beyondagent_workflows(); "
            "print(p.compute_score('gsm8k', 'so #### 72', 'x\\n#### 72'), 'torch' in sys.modules, "
            "'sympy' in sys.modules)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.split() == ["1.0", "False", "False"]


def test_math_answer_from_a_spec_block_grades_the_last_assistant_turn(plugin_manager) -> None:
    judge = build(plugin_manager, {"name": "math_answer", "format_score": 0.1})
    wrong_then_right = episode("```python\nprint(1/2)\n```", "So \\boxed{\\frac{1}{2}}.")
    assert asyncio.run(judge.score(TASK, wrong_then_right)).score == 1.0
    assert asyncio.run(judge.score(TASK, episode("\\boxed{0.5}", "I am not sure."))).score == 0.0
    reward = asyncio.run(judge.score(TASK, episode("\\boxed{2}")))
    assert reward.score == 0.1 and reward.details["answer"] == "2" and reward.details["status"] == "wrong"
    assert asyncio.run(judge.score(TASK, episode())).details["status"] == "no_answer"


def test_a_typo_in_the_judge_block_names_the_key(plugin_manager) -> None:
    with pytest.raises(SpecError, match="format_scor"):
        select_component(Registry(plugin_manager), "reward", {"name": "math_answer", "format_scor": 0.1},
                         key_path="reward")


def test_math_format(plugin_manager) -> None:
    judge = build(plugin_manager, {"name": "math_format", "score": 0.5})
    assert asyncio.run(judge.score(TASK, episode("\\boxed{7}"))).score == 0.5
    assert asyncio.run(judge.score(TASK, episode("#### 7"))).score == 0.0
    loose = build(plugin_manager, {"name": "math_format", "require_boxed": False})
    assert asyncio.run(loose.score(TASK, episode("#### 7"))).success


@pytest.mark.parametrize(("solution", "ground_truth", "extra_info", "score"), [
    ("Natalia sold 72 clips.\n#### 72", "72", None, 1.0),
    ("#### 72.0", "Natalia sold 48+24 = 72 clips\n#### 72", {"index": 3}, 1.0),
    (r"$\boxed{\dfrac{1}{2}}$", "0.5", None, 1.0),
    (r"\boxed{3}", "4", None, 0.0),
    (r"\boxed{3}", "4", {"format_score": 0.1}, 0.1),
    ("no answer", "4", {"format_score": 0.1}, 0.0),
    ("it is 4", "4", {"last_number": True}, 1.0),
    ("What is 0 + 4?", "4", {"last_number": True}, 0.0),
    (r"\boxed{2+2}", "4", None, 0.0),
    (r"\boxed{2+2}", "4", {"allow_expressions": True}, 1.0),
    ("", "4", None, 0.0),
    (r"\boxed{4}", None, None, 0.0),
    (r"\boxed{4}", 4, "not a dict", 1.0),
])
def test_compute_score_in_verls_shape(solution, ground_truth, extra_info, score) -> None:
    result = beyondagent_plugin_math.compute_score("openai/gsm8k", solution, ground_truth, extra_info)
    assert isinstance(result, float) and result == score


def test_compute_score_loads_from_its_file_as_verl_does() -> None:
    import importlib.util

    from beyondagent_plugin_math import verl_score

    spec = importlib.util.spec_from_file_location("custom_module", verl_score.__file__)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.compute_score("x", r"\boxed{10\%}", "0.1") == 1.0


def test_math_answer_or_llm_asks_the_llm_only_when_the_answer_cannot_be_parsed(plugin_manager, openai_server) -> None:
    block = {"name": "math_answer_or_llm",
             "llm_judge": {"llm": {"model": "grader", "base_url": openai_server.base_url, "max_llm_retries": 0}}}
    judge = build(plugin_manager, block)

    right = asyncio.run(judge.score(TASK, episode("\\boxed{1/2}")))
    wrong = asyncio.run(judge.score(TASK, episode("\\boxed{3}")))
    assert (right.score, right.details["judge"]) == (1.0, "rule")
    assert (wrong.score, wrong.details["judge"]) == (0.0, "rule")
    cut = Trajectory(task=TASK, turns=[Turn("user", "?"), Turn("assistant", "It is one", finish_reason="length")])
    cut_off = asyncio.run(judge.score(TASK, cut))
    assert (cut_off.score, cut_off.details["status"], cut_off.details["judge"]) == (0.0, "truncated", "rule")
    assert openai_server.requests == []  # parsed answers and cut-off replies cost no LLM call

    openai_server.push("The agent says one half in words, which is right. <verdict>yes</verdict>")
    words = asyncio.run(judge.score(TASK, episode("It is one half.")))
    assert words.score == 1.0 and words.success
    assert words.details["judge"] == "llm" and words.details["rule_status"] == "no_answer"
    [request] = openai_server.requests
    prompt = request["messages"][-1]["content"]
    assert "It is one half." in prompt and "1/2" in prompt

    openai_server.push("<verdict>no</verdict>")
    garbled = asyncio.run(judge.score(TASK, episode("\\boxed{???}")))
    assert garbled.details["judge"] in ("rule", "llm")  # math-verify may read '???' as a symbol: then rule decides
    assert garbled.score == 0.0


def test_math_answer_or_llm_keeps_rule_keys_and_rejects_unknown_ones(plugin_manager) -> None:
    judge = build(plugin_manager, {"name": "math_answer_or_llm", "format_score": 0.2,
                                   "llm_judge": {"mode": "score", "k": 2}})
    assert judge.config.format_score == 0.2 and judge.config.llm_judge.k == 2
    assert asyncio.run(judge.score(TASK, episode("\\boxed{5}"))).score == 0.2
    with pytest.raises(SpecError, match="modee"):
        select_component(Registry(plugin_manager), "reward",
                         {"name": "math_answer_or_llm", "llm_judge": {"modee": "x"}}, key_path="reward")
