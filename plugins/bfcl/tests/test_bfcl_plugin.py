"""The BFCL plugin in the main environment: registration, config errors, splits, the task source,
the workflow's prompt. The task source reads BFCL's real data files from the plugin's venv."""

from __future__ import annotations

from typing import Any

import pytest
from beyondagent_plugin_bfcl.config import (
    CATEGORIES,
    BFCLConfig,
    BFCLTasksConfig,
    UnknownCategory,
    category_of,
    check_categories,
    split_of,
)
from beyondagent_plugin_bfcl.workflow import BFCLWorkflow

from beyondagent_core.jsonl import BadRecords
from beyondagent_core.protocols import EnvReset
from beyondagent_core.testing.contracts import TaskSourceContract


def test_a_category_typo_names_the_closest_one() -> None:
    with pytest.raises(UnknownCategory, match="did you mean 'multi_turn_base'"):
        check_categories(["multi_turn_bse"])
    with pytest.raises(UnknownCategory, match="did you mean 'simple_python'"):
        BFCLTasksConfig(categories=["simple_pyton"])
    with pytest.raises(UnknownCategory, match="not the file name"):
        check_categories(["BFCL_v4_multiple.json"])


def test_excluded_categories_say_why() -> None:
    with pytest.raises(UnknownCategory, match="web search"):
        check_categories(["web_search"])
    with pytest.raises(UnknownCategory, match="sentence-transformers"):
        check_categories(["memory"])


def test_groups_expand_and_ids_name_their_category() -> None:
    assert check_categories(["multi_turn"]) == ["multi_turn_base", "multi_turn_miss_func", "multi_turn_miss_param",
                                                "multi_turn_long_context"]
    assert check_categories(["all"]) == list(CATEGORIES)
    assert category_of("live_simple_67-31-0") == "live_simple"
    with pytest.raises(KeyError, match="did you mean a 'multi_turn_base' task"):
        category_of("multi_turn_bse_3")


def test_splits_are_stable_and_about_one_in_five() -> None:
    ids = [f"multi_turn_base_{index}" for index in range(200)]
    val = [task_id for task_id in ids if split_of(task_id) == "val"]
    assert 25 <= len(val) <= 55
    assert [split_of(task_id) for task_id in ids] == [split_of(task_id) for task_id in ids]
    # the rule is the id's SHA-256: these never change
    assert (split_of("multi_turn_base_0"), split_of("simple_python_0")) == (
        ("val" if int(__import__("hashlib").sha256(b"multi_turn_base_0").hexdigest()[:8], 16) % 5 == 0 else "train"),
        ("val" if int(__import__("hashlib").sha256(b"simple_python_0").hexdigest()[:8], 16) % 5 == 0 else "train"))


def test_env_config_values_are_checked() -> None:
    with pytest.raises(ValueError, match="did you mean 'tools'"):
        BFCLConfig(style="tool")
    with pytest.raises(ValueError, match="reward must be one of official, turns"):
        BFCLConfig(reward="partial")


def test_the_workflow_presents_the_functions_as_tools() -> None:
    doc = {"name": "ls", "description": "List.", "parameters": {"type": "dict", "properties": {}, "required": []}}
    reset = EnvReset(messages=[{"role": "user", "content": "list"}], info={"style": "tools", "tools": [doc]})
    messages = BFCLWorkflow().opening(reset)
    assert messages[0]["role"] == "system" and "<tools>" in messages[0]["content"]
    assert '"name": "ls"' in messages[0]["content"] and messages[1]["content"] == "list"
    prompting = EnvReset(messages=[{"role": "system", "content": "BFCL's own"}, {"role": "user", "content": "x"}],
                         info={"style": "prompting", "tools": [doc]})
    assert BFCLWorkflow().opening(prompting)[0]["content"] == "BFCL's own"


@pytest.mark.beyondagent_plugins("bfcl")
class TestBFCLTaskSource(TaskSourceContract):
    @pytest.fixture
    def implementation(self, bfcl_venv: Any) -> dict[str, Any]:
        return {"name": "bfcl", "categories": ["multi_turn_base", "simple_python"], "limit": 3}


def test_the_task_source_reads_bfcls_data(bfcl_venv: Any) -> None:
    from beyondagent_plugin_bfcl.tasks import BFCLTasks

    bad = BadRecords(policy="fail")
    train = list(BFCLTasks(BFCLTasksConfig(categories=["multi_turn_base"], split="train")).load(bad))
    val = list(BFCLTasks(BFCLTasksConfig(categories=["multi_turn_base"], split="val")).load(bad))
    assert len(train) + len(val) == 200 and not {t.task_id for t in train} & {t.task_id for t in val}
    task = next(t for t in train + val if t.task_id == "multi_turn_base_0")
    assert task.env == "bfcl" and task.metadata["eval_group"] == "multi_turn_base"
    assert task.metadata["turns"] == 4 and "mkdir" in task.metadata["functions"]
    assert task.metadata["classes"] == ["GorillaFileSystem", "TwitterAPI"] or set(task.metadata["classes"]) == {
        "GorillaFileSystem", "TwitterAPI"}
    every = list(BFCLTasks(BFCLTasksConfig(categories=["single_turn"], split="all")).load(bad))
    assert {t.metadata["category"] for t in every} == {"simple_python", "multiple", "parallel", "parallel_multiple",
                                                       "live_simple", "live_multiple", "live_parallel",
                                                       "live_parallel_multiple", "irrelevance", "live_irrelevance",
                                                       "live_relevance"}


def test_an_unknown_task_id_is_named_with_what_exists(bfcl_venv: Any) -> None:
    from beyondagent_plugin_bfcl.tasks import BFCLTasks

    with pytest.raises(ValueError, match="no task 'multi_turn_base_999': multi_turn_base has 200 tasks"):
        BFCLTasks(BFCLTasksConfig(ids=["multi_turn_base_999"]))
    with pytest.raises(ValueError, match="is a simple_python task, not one of categories multi_turn_base"):
        BFCLTasks(BFCLTasksConfig(ids=["simple_python_1"]))
