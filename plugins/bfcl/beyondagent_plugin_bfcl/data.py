"""BFCL's data files, read as JSON lines: the entries of a category, their answers, function docs.

No `bfcl_eval` import here: the task source reads the files from the main environment (they
are inside the plugin's venv, `.../site-packages/bfcl_eval/data`), the env from inside the venv.
`data_dir()` finds the directory: an explicit one, `$BFCL_DATA_DIR`, the `bfcl_eval` package
importable here (in the venv), else the plugin's venv (built on first use).
"""

from __future__ import annotations

import functools
import importlib.util
import json
import os
from pathlib import Path
from typing import Any

from beyondagent_plugin_bfcl.config import MULTI_TURN, category_of

PREFIX = "BFCL_v4_"
SETUP_HINT = "run `beyondagent venv build bfcl` (or set BFCL_DATA_DIR to a bfcl_eval/data directory)"
# BFCL's `multi_turn_func_doc` file of each backend class (constants/executable_backend_config.py).
FUNC_DOC_FILES = {"GorillaFileSystem": "gorilla_file_system.json", "MathAPI": "math_api.json",
                  "MessageAPI": "message_api.json", "TwitterAPI": "posting_api.json",
                  "TicketAPI": "ticket_api.json", "TradingBot": "trading_bot.json",
                  "TravelAPI": "travel_booking.json", "VehicleControlAPI": "vehicle_control.json"}


class MissingData(ValueError):
    """BFCL's data directory cannot be found (a ValueError: the core reports it as a spec error)."""


def data_dir(explicit: str = "") -> Path:
    """BFCL's `data/` directory (see the module docstring)."""
    chosen = explicit or os.environ.get("BFCL_DATA_DIR", "")
    if chosen:
        path = Path(chosen).expanduser().resolve()
    else:
        spec = importlib.util.find_spec("bfcl_eval")
        if spec is not None and spec.origin:
            path = Path(spec.origin).parent / "data"
        else:
            path = venv_data_dir()
    if not (path / f"{PREFIX}multi_turn_base.json").is_file():
        raise MissingData(f"BFCL's data is not in {path} (no {PREFIX}multi_turn_base.json there); {SETUP_HINT}")
    return path


def venv_data_dir() -> Path:
    """`bfcl_eval/data` inside the plugin's venv (building the venv first when it is missing)."""
    from beyondagent_plugin_bfcl.venv import bfcl_venv

    venv = bfcl_venv()
    found = sorted(venv.path.glob("lib/python*/site-packages/bfcl_eval/data"))
    if not found:
        raise MissingData(f"the bfcl venv at {venv.path} has no bfcl_eval/data; "
                          "rebuild it: `beyondagent venv build bfcl --rebuild`")
    return found[0]


@functools.lru_cache(maxsize=64)
def _read_lines(path: Path) -> tuple[dict[str, Any], ...]:
    entries = []
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            if line.strip():
                try:
                    entries.append(json.loads(line))
                except ValueError as exc:
                    raise MissingData(f"{path}, line {number}: not JSON ({exc})") from None
    return tuple(entries)


def entries(root: Path, category: str) -> tuple[dict[str, Any], ...]:
    """Every entry of `category`, in BFCL's order (treat them as read-only)."""
    path = root / f"{PREFIX}{category}.json"
    if not path.is_file():
        raise MissingData(f"BFCL has no data file {path}; {SETUP_HINT}")
    return _read_lines(path)


@functools.lru_cache(maxsize=64)
def _index(root: Path, category: str) -> dict[str, dict[str, Any]]:
    return {entry["id"]: entry for entry in entries(root, category)}


@functools.lru_cache(maxsize=64)
def _answer_index(root: Path, category: str) -> dict[str, Any]:
    path = root / "possible_answer" / f"{PREFIX}{category}.json"
    if not path.is_file():
        return {}
    return {entry["id"]: entry["ground_truth"] for entry in _read_lines(path)}


def entry(root: Path, task_id: str) -> dict[str, Any]:
    """One entry by id; a KeyError says what ids look like (and the closest category)."""
    category = category_of(task_id)
    found = _index(root, category).get(task_id)
    if found is None:
        count = len(_index(root, category))
        raise KeyError(f"BFCL has no task {task_id!r}: {category} has {count} tasks "
                       f"({category}_0 ... {category}_{count - 1} in BFCL's numbering)")
    return found


def answer(root: Path, task_id: str) -> Any:
    """The possible answer (AST) or ground-truth calls per turn (multi-turn) of a task; None for irrelevance."""
    return _answer_index(root, category_of(task_id)).get(task_id)


@functools.lru_cache(maxsize=16)
def func_doc(root: Path, class_name: str) -> tuple[dict[str, Any], ...]:
    return _read_lines(root / "multi_turn_func_doc" / FUNC_DOC_FILES[class_name])


def functions_of(root: Path, task_id: str) -> tuple[list[dict[str, Any]], dict[str, list[dict[str, Any]]]]:
    """The function docs shown at the start, and the held-out ones per turn (`miss_func`), as BFCL
    builds them (`populate_test_cases_with_predefined_functions`): copies, safe to change."""
    item = entry(root, task_id)
    if category_of(task_id) not in MULTI_TURN:
        return json.loads(json.dumps(item["function"])), {}
    functions = [json.loads(json.dumps(doc)) for name in item["involved_classes"] for doc in func_doc(root, name)]
    held_out: dict[str, list[dict[str, Any]]] = {}
    for turn, names in item.get("missed_function", {}).items():
        held_out[turn] = []
        for name in names:
            for index, doc in enumerate(functions):
                if doc["name"] == name:
                    held_out[turn].append(functions.pop(index))
                    break
    return functions, held_out
