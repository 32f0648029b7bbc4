"""`beyondagent explore`: exploration alone, its statistics, the finished cache, --force.

Runs the real CLI (a subprocess, through conftest's `cli`) on examples/explore_frozenlake.yaml
(shrunk), with the installed gym, random_explorer, mixers and torch plugins: no LLM is involved.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from beyondagent_core.jsonl import read_tasks

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "explore_frozenlake.yaml"

pytest.importorskip("beyondagent_plugin_random_explorer")
pytest.importorskip("beyondagent_plugin_gym")


PLUGINS = {"BEYONDAGENT_PLUGINS": "gym,random_explorer,mixers,torch,llm"}  # llm: the feasibility filter


def test_explore_prints_statistics_reuses_and_refuses(cli, tmp_path) -> None:
    def explore(*extra: str):
        return cli("explore", str(EXAMPLE), f"run.output_dir={tmp_path}", "tasks.train.count=4", "explore.n=2",
                   *extra, env=PLUGINS)

    first = explore()
    assert first.code == 0, first.err
    out = first.out
    assert "exploration: 4 seeds, 8 explorations" in out
    for row in ("explored now / resumed from cache", "dropped by dedup", "dropped by feasibility",
                "kept (synthetic tasks in the cache)", "tasks per seed"):
        assert row in out
    cache = tmp_path / "explore-frozenlake" / "synthetic_tasks.jsonl"
    tasks = read_tasks(cache)
    kept_row = next(line for line in out.splitlines() if "kept (synthetic tasks in the cache)" in line)
    assert tasks and kept_row.split()[-2] == str(len(tasks))

    again = explore()  # finished: nothing explored again
    assert again.code == 0 and "is finished" in again.out
    assert read_tasks(cache) == tasks

    other = explore("tasks.train.count=3")  # another seed set
    assert other.code == 1
    assert "another seed set" in other.err and "--force" in other.err

    assert explore("tasks.train.count=3", "--force").code == 0
    assert {t.seed_task_id for t in read_tasks(cache)} <= {f"frozenlake-train-{k}" for k in range(3)}


def test_explore_with_n_zero_says_what_to_set(cli, tmp_path) -> None:
    result = cli("explore", str(EXAMPLE), f"run.output_dir={tmp_path}", "explore.n=0", env=PLUGINS)
    assert result.code == 2 and "explore.n is 0" in result.err
