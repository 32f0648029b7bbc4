"""RL steps to reach the quickstart's 0.5 success, with an SFT warm-up on hindsight references vs without.

    python benchmarks/sft_warmup.py                        # 60 RL steps a side, val every 5 steps
    python benchmarks/sft_warmup.py --steps 40 --sft-epochs 3

The spec is examples/explore_frozenlake.yaml (the quickstart's FrozenLake 2x2 tasks and `tiny`
model, plus exploration: random moves, hindsight goals, feasibility replay) with `mixture:
original`, so both sides train RL on the quickstart's seed tasks alone. Exploration runs once
(`beyondagent explore`, into one cache both sides read). The warm-up side adds
`algorithm.sft: {data: synthetic_references}`: the hindsight tasks' reference moves, replayed in
the env, as supervised examples before RL. Each side is `pipeline.run` in a fresh child process.

Reported: the first validation step whose `val/pass@1` (sampled, temperature 1, 16 val tasks) is
at least 0.5 on each side; the last line is `sft_steps_ratio_vs_rl_only: X.XX` (warm-up / none;
the target is <= 0.6); a side that never gets there counts as its step budget (a lower bound).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
SPEC = ROOT / "examples" / "explore_frozenlake.yaml"

CHILD = """
import sys
from beyondagent_core import pipeline
session = pipeline.prepare(sys.argv[2], sys.argv[3:])
if sys.argv[1] == "explore":
    pipeline.explore_only(session)
else:
    pipeline.run(session)
"""


def child(action: str, spec: Path, overrides: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", CHILD, action, str(spec), *overrides], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - started


def first_step_at(run_dir: Path, target: float) -> tuple[int | None, list[tuple[int, float]]]:
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines() if line.strip()]
    curve = [(r["step"], r["val/pass@1"]) for r in records if "val/pass@1" in r]
    return next((step for step, value in curve if value >= target), None), curve


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=60, help="RL steps a side")
    parser.add_argument("--eval-every", type=int, default=5)
    parser.add_argument("--sft-epochs", type=int, default=3)
    parser.add_argument("--target", type=float, default=0.5, help="val/pass@1 to reach")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        data = yaml.safe_load(SPEC.read_text())
        data["mixture"] = {"name": "original"}  # RL on the seed tasks alone, as the quickstart
        spec = out / "spec.yaml"
        spec.write_text(yaml.safe_dump(data))
        common = [f"run.output_dir={out}", f"run.seed={args.seed}", f"explore.cache={out / 'synthetic.jsonl'}",
                  f"backend.total_steps={args.steps}",
                  f"backend.eval_every={args.eval_every}", "backend.save_every=0", "backend.report=false"]
        seconds = child("explore", spec, [*common, "run.name=explore"])
        cached = sum(1 for line in (out / "synthetic.jsonl").read_text().splitlines() if '"task_id"' in line)
        print(f"exploration: {cached} cache lines in {seconds:.0f} s")
        found = {}
        for side, extra in (("rl_only", []),
                            ("sft_warmup", ["algorithm.sft.data=synthetic_references",
                                            f"algorithm.sft.epochs={args.sft_epochs}"])):
            seconds = child("run", spec, [*common, f"run.name={side}", *extra])
            step, curve = first_step_at(out / side, args.target)
            found[side] = step
            warm = next((json.loads(line) for line in (out / side / "metrics.jsonl").read_text().splitlines()
                         if '"sft/loss"' in line), None)
            sft = (f"; warm-up: {warm['sft/examples']:.0f} examples, loss {warm['sft/loss_first_epoch']:.2f} -> "
                   f"{warm['sft/loss']:.2f}" if warm else "")
            print(f"{side}: val/pass@1 by step {curve}; first >= {args.target}: {step} ({seconds:.0f} s){sft}")
        rl_only = found["rl_only"] if found["rl_only"] is not None else args.steps
        warm = found["sft_warmup"] if found["sft_warmup"] is not None else args.steps
        print(f"sft_steps_ratio_vs_rl_only: {warm / max(rl_only, 1):.2f}"
              + ("" if found["rl_only"] is not None else f"  (RL alone did not reach {args.target} in {args.steps} steps: "
                                                          "a lower bound)"))


if __name__ == "__main__":
    main()
