"""A `miss_func` entry's held-out functions are not shown before their turn (the ninth mutation audit).

BFCL's `multi_turn_miss_func` entries hold some functions out of the first turns: the model must
notice it lacks them, and the env adds them in the turn the entry names ("I have updated some more
functions"). `data.functions_of` builds what is shown from the data directory (the task source's
`functions`, and the env's entries with `data_dir` set): a held-out function left among the shown ones
would leak into the prompt from the start. Main venv only: a small data directory written here in
BFCL's layout (`BFCL_v4_<category>.json` lines, `multi_turn_func_doc/math_api.json`).
"""

from __future__ import annotations

import json
from pathlib import Path

from beyondagent_plugin_bfcl import data
from beyondagent_plugin_bfcl.config import BFCLTasksConfig
from beyondagent_plugin_bfcl.tasks import BFCLTasks

from beyondagent_core.jsonl import BadRecords

TASK = "multi_turn_miss_func_0"
DOCS = [{"name": name, "description": f"{name} a number", "parameters": {"type": "dict", "properties": {}}}
        for name in ("add", "square_root", "logarithm")]


def data_dir(root: Path) -> Path:
    entry = {"id": TASK, "involved_classes": ["MathAPI"], "initial_config": {},
             "question": [[{"role": "user", "content": "Add 2 and 3."}], [{"role": "user", "content": "And?"}], []],
             "missed_function": {"2": ["square_root"]}}
    (root / "multi_turn_func_doc").mkdir(parents=True)
    (root / "BFCL_v4_multi_turn_base.json").write_text("")
    (root / "BFCL_v4_multi_turn_miss_func.json").write_text(json.dumps(entry) + "\n")
    (root / "multi_turn_func_doc" / "math_api.json").write_text("".join(json.dumps(doc) + "\n" for doc in DOCS))
    return root


def test_a_held_out_function_is_shown_only_in_its_turn(tmp_path: Path) -> None:
    root = data_dir(tmp_path / "data")
    shown, held_out = data.functions_of(root, TASK)
    assert [doc["name"] for doc in shown] == ["add", "logarithm"]
    assert {turn: [doc["name"] for doc in docs] for turn, docs in held_out.items()} == {"2": ["square_root"]}
    again, _ = data.functions_of(root, TASK)  # the cached docs were copied, not emptied
    assert [doc["name"] for doc in again] == ["add", "logarithm"]


def test_the_task_sources_functions_leave_the_held_out_ones_out(tmp_path: Path) -> None:
    root = data_dir(tmp_path / "data")
    config = BFCLTasksConfig(categories=["multi_turn_miss_func"], split="all", data_dir=str(root))
    [task] = BFCLTasks(config).load(BadRecords(policy="fail"))
    assert task.task_id == TASK and task.metadata["functions"] == ["add", "logarithm"]
