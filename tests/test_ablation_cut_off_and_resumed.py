"""`benchmarks/self_evolve_ablation.py` cut off and resumed: an ablation that did not finish (a device
call's time limit, runs out of GPU memory) still leaves its table, and `--report` rebuilds the table of
what finished. The runs here are metrics files written by hand (`--report` runs nothing) and, for the
failure path, real `beyondagent run` children that fail on a spec error at once."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "self_evolve_ablation.py"


def write_run(out: Path, name: str, successes: list[float]) -> None:
    run_dir = out / name
    run_dir.mkdir(parents=True)
    rows = [{"step": 0, "val/pass@1": 0.0}]
    rows += [{"step": step, "train/success_rate": value} for step, value in enumerate(successes, start=1)]
    (run_dir / "metrics.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))


def ablation(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), "--arms", "grpo,gigpo", "--seeds", "2", "--window", "1",
                           *args], cwd=ROOT, capture_output=True, text=True, timeout=600, check=False)


def test_report_tables_the_finished_runs_and_counts_the_seeds_each_arm_has(tmp_path: Path) -> None:
    out, summary = tmp_path / "runs", tmp_path / "summary"
    write_run(out, "frozenlake2-grpo-0", [0.0, 0.25, 0.5])
    write_run(out, "frozenlake2-grpo-1", [0.0, 0.5, 0.75])
    write_run(out, "frozenlake2-gigpo-0", [0.25, 0.25, 1.0])
    write_run(out, "frozenlake2-gigpo-1", [0.0, 0.5])  # cut off after 2 of 3 steps: not in the table
    proc = ablation("--steps", "3", "--out", str(out), "--summary", str(summary), "--report")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "3 of 4 runs finished" in proc.stdout
    table = json.loads((summary / "ablation.json").read_text())
    assert table["runs_finished"] == 3
    rows = {row["arm"]: row for row in table["rows"]}
    assert rows["grpo"]["seeds"] == 2 and rows["grpo"]["train_success_per_seed"] == [0.5, 0.75]
    assert rows["gigpo"]["seeds"] == 1 and rows["gigpo"]["train_success_per_seed"] == [1.0]
    assert [Path(run).name for run in rows["gigpo"]["runs"]] == ["frozenlake2-gigpo-0"]
    assert (summary / "self_evolve_ablation_frozenlake2.png").stat().st_size > 0
    assert "gigpo                  1" in proc.stdout  # the seeds column


def test_failed_runs_leave_the_others_and_a_table_and_fail_the_command(tmp_path: Path) -> None:
    out = tmp_path / "runs"
    write_run(out, "frozenlake2-grpo-0", [0.0, 0.5])  # finished before: --resume reads it, runs nothing
    proc = ablation("--steps", "2", "--out", str(out), "--resume", "--parallel", "2", "--set", "backend.lr=-1")
    assert proc.returncode == 1
    assert any(line.split()[:3] == ["frozenlake2-grpo-0", "finished", "before,"] for line in proc.stdout.splitlines())
    for name in ("frozenlake2-grpo-1", "frozenlake2-gigpo-0", "frozenlake2-gigpo-1"):
        assert f"{name} failed (exit 2)" in proc.stdout  # each child's spec error, shown
    assert "backend.lr" in proc.stdout
    assert "3 of 4 runs failed (above); the table has the others" in proc.stderr
    table = json.loads((out / "ablation.json").read_text())
    assert table["runs_finished"] == 1 and [row["arm"] for row in table["rows"]] == ["grpo"]


def test_an_arm_that_finished_without_grpo_is_kept_without_ratios(tmp_path: Path) -> None:
    out = tmp_path / "runs"
    write_run(out, "frozenlake2-gigpo-1", [0.0, 0.5])  # every grpo run failed or was cut off
    proc = ablation("--steps", "2", "--out", str(out), "--report")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "success_ratio_vs_grpo (frozenlake2): no grpo run finished" in proc.stdout
    rows = json.loads((out / "ablation.json").read_text())["rows"]
    assert [(row["arm"], row["seeds"], row["train_success_per_seed"]) for row in rows] == [("gigpo", 1, [0.5])]
