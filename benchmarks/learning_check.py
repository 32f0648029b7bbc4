"""Does the policy learn in each precision mode? The math and quickstart `smollm2` profiles, side by side.

Each run is `beyondagent run <spec> --profile smollm2` in a child process (what a user runs) for
`--steps` steps with greedy validation every `--eval-every` steps, in each precision mode:

- `mixed`: float32 weights and optimizer state, bfloat16 compute (`model.dtype=bfloat16`,
  `model.param_dtype=float32`) — the default on a GPU with bf16 (`model.dtype: auto`);
- `float32`: float32 throughout (`model.dtype=float32`) — the default on a CPU;
- `pure_bf16`: bfloat16 weights and optimizer state (`model.param_dtype=bfloat16`): what the
  default trained before issue 33, where AdamW's small updates are rounded away.

It prints the val pass@1 curves side by side (and the training success, the rollout's and the
update's seconds a step), writes `results.json` and a PNG of the curves into `--out`; the last line
is `final_val_ratio_vs_float32: <spec>-<mode>=X ...` (last val pass@1 over float32's). A run that
passes `--time-limit` is stopped and shows what it reached. The child processes run `--parallel`
at a time: on a GPU a 135M model leaves the device mostly idle; on 2 CPU cores keep 1.

    python benchmarks/learning_check.py --device cuda --parallel 6          # one GPU, ~5 minutes
    python benchmarks/learning_check.py --device cpu --specs math --modes mixed,float32   # CPU
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SPECS = {"math": ROOT / "examples" / "math_arithmetic.yaml", "quickstart": ROOT / "examples" / "quickstart.yaml"}
MODES = {
    "mixed": ["model.dtype=bfloat16", "model.param_dtype=float32"],
    "float32": ["model.dtype=float32", "model.param_dtype=float32"],
    "pure_bf16": ["model.dtype=bfloat16", "model.param_dtype=bfloat16"],
}
PROFILE = "smollm2"


def run_one(spec: str, mode: str, args: argparse.Namespace) -> dict:
    """One run in a child process; its metrics rows (those written before a timeout, if any)."""
    name = f"{spec}-{mode}"
    overrides = [*MODES[mode], f"backend.device={args.device}", f"backend.total_steps={args.steps}",
                 f"backend.eval_every={args.eval_every}", "backend.save_every=0", "backend.report=false",
                 f"run.name={name}", f"run.output_dir={args.out}", f"run.seed={args.seed}", *args.set]
    command = [sys.executable, "-m", "beyondagent_core.cli", "run", str(SPECS[spec]), "--profile", args.profile,
               *overrides]
    started = time.perf_counter()
    log = args.out / f"{name}.log"
    with log.open("w") as out:
        proc = subprocess.Popen(command, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT)
        try:
            code = proc.wait(timeout=args.time_limit)
            status = "done" if code == 0 else f"exit {code}"
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            status = "time limit"
    seconds = time.perf_counter() - started
    metrics = args.out / name / "metrics.jsonl"
    rows = [json.loads(line) for line in metrics.read_text().splitlines() if line.strip()] if metrics.is_file() else []
    print(f"  {name:<22} {status:<10} {seconds:6.1f} s", flush=True)
    if status.startswith("exit"):
        print("    " + "\n    ".join(log.read_text().splitlines()[-15:]), flush=True)
    return {"spec": spec, "mode": mode, "status": status, "seconds": seconds, "rows": rows}


def curves(result: dict) -> dict:
    """Validation pass@1 by step, training success by step, and mean seconds a step."""
    rows = result["rows"]
    val = {row["step"]: row["val/pass@1"] for row in rows if "val/pass@1" in row}
    train = {row["step"]: row["train/success_rate"] for row in rows if "train/success_rate" in row}

    def mean(key: str) -> float | None:
        values = [row[key] for row in rows if key in row]
        return statistics.fmean(values) if values else None

    return {"val": val, "train": train, "rollout_s": mean("perf/rollout_s"), "update_s": mean("perf/update_s"),
            "tokens_per_s": mean("perf/tokens_per_s"), "logprob_diff": mean("rollout/logprob_diff")}


def fmt(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def report(results: list[dict], args: argparse.Namespace) -> None:
    eval_steps = sorted({step for r in results for step in curves(r)["val"]})
    print(f"\nval pass@1 (greedy) by step, {args.device}, {args.steps} steps, seed {args.seed}:")
    print(f"{'run':<22} " + " ".join(f"{s:>5}" for s in eval_steps)
          + "  train@1-5 train@last5  rollout_s update_s  logprob_diff  status")
    for result in results:
        c = curves(result)
        train = [c["train"][s] for s in sorted(c["train"])]
        first, last = (statistics.fmean(train[:5]) if train else None), (statistics.fmean(train[-5:]) if train else None)
        print(f"{result['spec'] + '-' + result['mode']:<22} "
              + " ".join(f"{fmt(c['val'].get(s)):>5}" for s in eval_steps)
              + f"  {fmt(first):>9} {fmt(last):>11}  {fmt(c['rollout_s'], 1):>9} {fmt(c['update_s'], 1):>8}"
              + f"  {fmt(c['logprob_diff'], 4):>12}  {result['status']}")
    # the last line: each run's last val pass@1 over float32's on the same spec (the peer of the same run)
    final = {(r["spec"], r["mode"]): curves(r)["val"].get(max(curves(r)["val"], default=None)) for r in results}
    ratios = [f"{spec}-{mode}={fmt(value / final[spec, 'float32'])}" for (spec, mode), value in final.items()
              if mode != "float32" and value is not None and final.get((spec, "float32"))]
    print("final_val_ratio_vs_float32: " + (" ".join(ratios) or "- (no float32 run to compare with)"))
    (args.out / "results.json").write_text(json.dumps(
        [{**{k: v for k, v in r.items() if k != "rows"}, **curves(r)} for r in results], indent=1))
    plot(results, args)


def plot(results: list[dict], args: argparse.Namespace) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    specs = sorted({r["spec"] for r in results})
    figure, axes = plt.subplots(1, len(specs), figsize=(5 * len(specs), 3.6), squeeze=False)
    for axis, spec in zip(axes[0], specs):
        for result in (r for r in results if r["spec"] == spec):
            val = curves(result)["val"]
            axis.plot(sorted(val), [val[s] for s in sorted(val)], marker="o", label=result["mode"])
        axis.set(title=f"{spec} ({args.profile}), {args.device}", xlabel="step", ylabel="val pass@1", ylim=(-0.03, 1.03))
        axis.legend()
    figure.tight_layout()
    path = args.out / f"learning_check_{args.device.replace(':', '')}.png"
    figure.savefig(path, dpi=110)
    print(f"plot: {path}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda", help="backend.device of every run (cpu, cuda)")
    parser.add_argument("--specs", default="math,quickstart", help=f"comma-separated: {', '.join(SPECS)}")
    parser.add_argument("--modes", default="mixed,float32,pure_bf16", help=f"comma-separated: {', '.join(MODES)}")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--eval-every", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--profile", default=PROFILE)
    parser.add_argument("--parallel", type=int, default=1, help="runs at once")
    parser.add_argument("--time-limit", type=float, default=600.0, help="seconds a run may take before it is stopped")
    parser.add_argument("--out", type=Path, default=ROOT / "runs" / "learning_check")
    parser.add_argument("--set", action="append", default=[], help="an extra spec override for every run")
    args = parser.parse_args()
    specs, modes = args.specs.split(","), args.modes.split(",")
    unknown = [s for s in specs if s not in SPECS] + [m for m in modes if m not in MODES]
    if unknown:
        parser.error(f"unknown spec or mode: {', '.join(unknown)}")
    args.out.mkdir(parents=True, exist_ok=True)
    jobs = [(spec, mode) for spec in specs for mode in modes]
    print(f"{len(jobs)} runs, {args.parallel} at a time, on {args.device} (time limit {args.time_limit:.0f} s each):")
    with concurrent.futures.ThreadPoolExecutor(max_workers=args.parallel) as pool:
        results = list(pool.map(lambda job: run_one(*job, args), jobs))
    report(results, args)


if __name__ == "__main__":
    main()
