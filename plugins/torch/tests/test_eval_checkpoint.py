"""`beyondagent eval --checkpoint` on a checkpoint the torch backend just wrote reproduces that run's
validation: greedy, exactly; sampled (k=8), within the sampling error.

Real throughout: the tiny model trained for a few steps on gymnasium FrozenLake, the checkpoint
on disk, the CLI in a child process serving it through the backend's `policy_llm`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
QUICKSTART = ROOT / "examples" / "quickstart.yaml"
SHRINK = ("backend.total_steps=4", "backend.batch_size=2", "algorithm.group_size=4", "backend.eval_every=0",
          "backend.save_every=0", "tasks.train.count=4", "tasks.val.count=12", "backend.report=false")


def eval_cli(run_dir: Path, tmp_path: Path, *args: str) -> dict:
    env = {**os.environ, "BEYONDAGENT_PLUGINS": "gym,mixers,torch"}
    env.pop("BEYONDAGENT_DISABLE_PLUGIN_AUTOLOAD", None)
    out = tmp_path / f"eval-{len(list(tmp_path.glob('eval-*')))}"
    proc = subprocess.run([sys.executable, "-m", "beyondagent_core.cli", "eval", str(QUICKSTART), *SHRINK,
                           f"run.output_dir={run_dir.parent}", "--checkpoint", str(run_dir), "--out", str(out), *args],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads((out / "eval.json").read_text())


@pytest.mark.beyondagent_plugins("gym", "mixers", "torch")
def test_eval_reproduces_the_runs_validation(run_spec, tmp_path) -> None:
    run = run_spec(QUICKSTART, *SHRINK, "backend.val_temperature=0", f"run.output_dir={tmp_path / 'runs'}")
    rows = [json.loads(line) for line in (run.run_dir / "metrics.jsonl").read_text().splitlines()]
    final = next(row for row in reversed(rows) if "val/pass@1" in row)

    greedy = eval_cli(run.run_dir, tmp_path, "--k", "1", "--temperature", "0")
    assert greedy["model"].endswith("step_000004/model")
    assert greedy["summary"]["pass@1"] == pytest.approx(final["val/pass@1"])
    assert greedy["summary"]["avg@1"] == pytest.approx(final["val/reward_mean"], abs=1e-6)

    sampled = eval_cli(run.run_dir, tmp_path, "--k", "8", "--temperature", "1.0")
    summary = sampled["summary"]
    assert summary["episodes"] == 12 * 8 and summary["errors"] == 0
    low, high = summary["pass@1_ci95"]
    assert low <= summary["pass@1"] <= high and summary["pass@1"] <= summary["pass@8"]
