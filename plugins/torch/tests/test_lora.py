"""`model.lora`: only the adapters train and are checkpointed, `--resume` continues exactly, and
`beyondagent eval` merges the adapters into the base weights once.

Real throughout: the quickstart (tiny model, gymnasium FrozenLake) with LoRA on, peft's adapters,
the checkpoints on disk, the eval CLI in a child process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

ROOT = Path(__file__).resolve().parents[3]
QUICKSTART = ROOT / "examples" / "quickstart.yaml"
SMALL = ("backend.batch_size=2", "algorithm.group_size=4", "backend.eval_every=0", "backend.save_every=1",
         "tasks.train.count=4", "tasks.val.count=8", "backend.report=false", "backend.val_temperature=0",
         "model.lora.rank=4", "model.lora.alpha=8", "algorithm.kl_coef=0.01", "backend.lr=0.01")
COMPARED = ("train/reward_mean", "actor/pg_loss", "actor/grad_norm", "actor/entropy", "actor/kl")


def metrics(run_dir: Path) -> dict[int, dict]:
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return {row["step"]: row for row in rows if "actor/pg_loss" in row}


@pytest.mark.beyondagent_plugins("gym", "mixers", "torch")
def test_lora_trains_and_saves_only_adapters_resumes_exactly_and_evals_merged(run_spec, tmp_path: Path) -> None:
    whole = run_spec(QUICKSTART, *SMALL, "backend.total_steps=2", f"run.output_dir={tmp_path / 'whole'}")
    step = whole.run_dir / "checkpoints" / "step_000002"
    saved = sorted(p.name for p in (step / "model").iterdir())
    assert "adapter_config.json" in saved and "adapter_model.safetensors" in saved
    assert "model.safetensors" not in saved  # the base weights are not copied into checkpoints
    adapters = load_file(step / "model" / "adapter_model.safetensors")
    assert adapters and all("lora_" in name for name in adapters)
    assert any(t.abs().sum() > 0 for name, t in adapters.items() if "lora_B" in name)  # B starts at 0: it trained
    rows = metrics(whole.run_dir)
    assert rows[2]["actor/kl"] > 0  # the reference (adapters off) differs from the trained policy

    # killed after step 1, resumed: step 2 is the uninterrupted run's step 2
    part = run_spec(QUICKSTART, *SMALL, "backend.total_steps=1", f"run.output_dir={tmp_path / 'part'}")
    run_spec(QUICKSTART, *SMALL, "backend.total_steps=2", f"run.output_dir={tmp_path / 'part'}", resume=True)
    resumed = metrics(part.run_dir)
    for key in COMPARED:
        assert resumed[2][key] == pytest.approx(rows[2][key], rel=1e-5, abs=1e-7), key

    # eval merges the adapters once (into step_000002/merged) and reproduces the run's greedy validation
    env = {**os.environ, "BEYONDAGENT_PLUGINS": "gym,mixers,torch"}
    env.pop("BEYONDAGENT_DISABLE_PLUGIN_AUTOLOAD", None)
    out = tmp_path / "eval"
    proc = subprocess.run([sys.executable, "-m", "beyondagent_core.cli", "eval", str(QUICKSTART), *SMALL,
                           "backend.total_steps=2", f"run.output_dir={tmp_path / 'whole'}", "--checkpoint",
                           str(whole.run_dir), "--out", str(out), "--k", "1", "--temperature", "0"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "merging the LoRA adapters" in proc.stderr
    result = json.loads((out / "eval.json").read_text())
    assert result["model"].endswith("step_000002/merged")
    final = next(row for row in reversed([json.loads(x) for x in (whole.run_dir / "metrics.jsonl").read_text()
                                          .splitlines()]) if "val/pass@1" in row)
    assert result["summary"]["pass@1"] == pytest.approx(final["val/pass@1"])
    merged = load_file(step / "merged" / "model.safetensors")
    assert not any("lora_" in name for name in merged)
    base_q = next(name for name in merged if name.endswith("q_proj.weight"))
    from beyondagent_plugin_torch.models import load_policy

    base, _ = load_policy("tiny", dtype="float32")
    assert not torch.equal(merged[base_q], base.state_dict()[base_q])  # the adapters are in the merged weights
