"""`math_jsonl` and `arithmetic`: what they read or generate, bad lines, and the core's task-source contract."""

from __future__ import annotations

import json
import re
from fractions import Fraction
from pathlib import Path

import pytest
from beyondagent_plugin_math.arithmetic import ArithmeticSource, generate
from beyondagent_plugin_math.config import ArithmeticConfig, MathJsonlConfig
from beyondagent_plugin_math.jsonl_source import MathJsonlSource

from beyondagent_core.errors import DataError, SpecError
from beyondagent_core.jsonl import BadRecords
from beyondagent_core.registry import Registry
from beyondagent_core.spec import select_component
from beyondagent_core.testing.contracts import TaskSourceContract

pytestmark = pytest.mark.beyondagent_plugins("math")

GSM8K = [
    {"question": "Natalia sold 48 clips in April and half as many in May. How many in all?",
     "answer": "In May she sold 48/2 = 24.\nIn all: 48 + 24 = 72.\n#### 72"},
    {"question": "What is 2 + 2?", "answer": "#### 4"},
]


def write_lines(path: Path, lines: list[object]) -> str:
    path.write_text("".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines))
    return str(path)


def load(config: MathJsonlConfig, policy: str = "fail") -> tuple[list, BadRecords]:
    bad = BadRecords(policy=policy)
    return list(MathJsonlSource(config).load(bad)), bad


def test_gsm8k_lines_become_tasks_with_the_whole_solution_as_ground_truth(tmp_path: Path) -> None:
    tasks, _ = load(MathJsonlConfig(path=write_lines(tmp_path / "gsm8k.jsonl", GSM8K)))
    assert [t.task_id for t in tasks] == ["gsm8k-1", "gsm8k-2"]
    assert tasks[0].query.startswith("Natalia") and tasks[0].ground_truth.endswith("#### 72")
    assert tasks[0].env is None and tasks[0].metadata["line"] == 1


def test_math_style_records_with_configured_field_names(tmp_path: Path) -> None:
    lines = [{"problem": "Compute 1/2 + 1/4.", "solution": r"We get $\boxed{\frac{3}{4}}$.", "id": "m1",
              "level": "Level 1"}]
    config = MathJsonlConfig(path=write_lines(tmp_path / "math.jsonl", lines), question_field="problem",
                             answer_field="solution", id_field="id", judge="math_answer")
    [task], _ = load(config)
    assert (task.task_id, task.judge, task.metadata["level"]) == ("m1", "math_answer", "Level 1")
    assert task.ground_truth == r"We get $\boxed{\frac{3}{4}}$."


def test_a_line_without_the_answer_field_names_file_and_line(tmp_path: Path) -> None:
    path = write_lines(tmp_path / "broken.jsonl", [GSM8K[0], {"question": "No answer here?"}])
    with pytest.raises(DataError) as error:
        load(MathJsonlConfig(path=path))
    assert f"{path}:2" in str(error.value)
    assert "missing answer field 'answer'" in str(error.value)
    assert "answer_field" in str(error.value)  # the hint says how to point at another field


def test_bad_lines_are_skipped_and_counted_when_asked(tmp_path: Path) -> None:
    lines = [GSM8K[0], "{not json", {"answer": "3"}, {"question": "q", "answer": ""}, [1, 2], GSM8K[1]]
    path = write_lines(tmp_path / "mixed.jsonl", lines)
    tasks, bad = load(MathJsonlConfig(path=path), policy="skip")
    assert [t.task_id for t in tasks] == ["mixed-1", "mixed-6"]
    assert bad.count == 4
    assert [e.split(": ", 1)[0] for e in bad.examples] == [f"{path}:{n}" for n in (2, 3, 4, 5)]


def test_a_missing_file_is_a_data_error(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="not found"):
        load(MathJsonlConfig(path=str(tmp_path / "nope.jsonl")))


def test_arithmetic_is_seeded_stable_and_correct() -> None:
    config = ArithmeticConfig(level=5, count=50, seed=3)
    tasks = list(ArithmeticSource(config).load(BadRecords()))
    assert tasks == list(ArithmeticSource(config).load(BadRecords()))
    # The 10th task does not depend on how many were asked for.
    assert list(ArithmeticSource(ArithmeticConfig(level=5, count=10, seed=3)).load(BadRecords()))[-1] == tasks[9]
    for task in tasks:
        expression = task.metadata["expression"]
        assert task.query == f"What is {expression}?"
        # Recompute independently: Python's own parser and precedence over exact fractions.
        value = eval(re.sub(r"(\d+)", r"Fraction(\1)", expression), {"Fraction": Fraction})
        assert Fraction(task.ground_truth) == value


def test_splits_and_seeds_give_different_streams() -> None:
    def expressions(**options: object) -> list[str]:
        return [generate(ArithmeticConfig(level=3, **options), i).expression for i in range(20)]

    assert expressions(split="train") != expressions(split="val")
    assert expressions(seed=1) != expressions(seed=2)


@pytest.mark.parametrize("level", [1, 2, 3, 4, 5])
def test_levels_follow_their_presets(level: int) -> None:
    from beyondagent_plugin_math.arithmetic import LEVELS

    preset = LEVELS[level]
    for index in range(30):
        problem = generate(ArithmeticConfig(level=level), index)
        numbers = [int(n) for n in re.findall(r"\d+", problem.expression)]
        assert len(numbers) == preset["operands"] and max(numbers) <= preset["max_operand"]
        assert set(re.findall(r"[+\-*/]", problem.expression)) <= set(preset["operators"])
        assert ("(" in problem.expression) <= preset["parentheses"]


def test_custom_knobs_without_a_level() -> None:
    config = ArithmeticConfig(level=None, operands=4, digits=3, operators=["*"], count=5)
    for task in ArithmeticSource(config).load(BadRecords()):
        assert task.metadata["expression"].count("*") == 3


def test_spec_errors_name_the_bad_key(plugin_manager) -> None:
    registry = Registry(plugin_manager)
    with pytest.raises(SpecError, match="operators"):
        select_component(registry, "task_source", {"name": "arithmetic", "operators": ["^"]},
                         key_path="tasks.train").create()
    with pytest.raises(SpecError, match="questoin_field"):
        select_component(registry, "task_source", {"name": "math_jsonl", "path": "x", "questoin_field": "q"},
                         key_path="tasks.train")


class TestArithmeticContract(TaskSourceContract):
    @pytest.fixture
    def implementation(self) -> dict:
        return {"name": "arithmetic", "level": 4, "count": 12}


class TestMathJsonlContract(TaskSourceContract):
    @pytest.fixture
    def implementation(self, tmp_path: Path) -> dict:
        return {"name": "math_jsonl", "path": write_lines(tmp_path / "gsm8k.jsonl", GSM8K)}
