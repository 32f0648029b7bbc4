"""`beyondagent explore`: exploration alone, its statistics, the finished cache, --force.

Runs the CLI in-process on examples/explore_frozenlake.yaml (shrunk), with the installed gym,
random_explorer and mixers plugins: no LLM is involved.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from beyondagent_core.cli import main
from beyondagent_core.jsonl import read_tasks

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "explore_frozenlake.yaml"

pytest.importorskip("beyondagent_plugin_random_explorer")
pytest.importorskip("beyondagent_plugin_gym")


def explore(tmp_path: Path, *extra: str) -> int:
    return main(["explore", str(EXAMPLE), f"run.output_dir={tmp_path}", "tasks.train.count=4", "explore.n=2", *extra])


def test_explore_prints_statistics_reuses_and_refuses(tmp_path, capsys, monkeypatch) -> None:
    monkeypatch.setenv("BEYONDAGENT_PLUGINS", "gym,random_explorer,mixers,torch")
    assert explore(tmp_path) == 0
    out = capsys.readouterr().out
    assert "exploration: 4 seeds, 8 explorations" in out
    for row in ("explored now / resumed from cache", "dropped by dedup", "dropped by feasibility",
                "kept (synthetic tasks in the cache)", "tasks per seed"):
        assert row in out
    cache = tmp_path / "explore-frozenlake" / "synthetic_tasks.jsonl"
    tasks = read_tasks(cache)
    kept_row = next(line for line in out.splitlines() if "kept (synthetic tasks in the cache)" in line)
    assert tasks and kept_row.split()[-2] == str(len(tasks))

    assert explore(tmp_path) == 0  # finished: nothing explored again
    assert "is finished" in capsys.readouterr().out
    assert read_tasks(cache) == tasks

    assert explore(tmp_path, "tasks.train.count=3") == 1  # another seed set
    err = capsys.readouterr().err
    assert "another seed set" in err and "--force" in err

    assert explore(tmp_path, "tasks.train.count=3", "--force") == 0
    assert {t.seed_task_id for t in read_tasks(cache)} <= {f"frozenlake-train-{k}" for k in range(3)}


def test_explore_with_n_zero_says_what_to_set(tmp_path, capsys, monkeypatch) -> None:
    monkeypatch.setenv("BEYONDAGENT_PLUGINS", "gym,random_explorer,mixers,torch")
    assert main(["explore", str(EXAMPLE), f"run.output_dir={tmp_path}", "explore.n=0"]) == 2
    assert "explore.n is 0" in capsys.readouterr().err
