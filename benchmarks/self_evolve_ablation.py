"""Offline ablation of the self-evolving mechanisms on FrozenLake with the tiny model.

Arms, each trained from the same random tiny policy with `examples/quickstart.yaml` (FrozenLake
2x2 maps, torch backend, CPU) for `--steps` steps and `--seeds` seeds:

- `grpo`: the default advantage estimator;
- `gigpo`: GiGPO's step-level advantages from anchor states (`backend.advantage.name=gigpo`);
- `experience`: experience-guided rollouts with hindsight experiences (`experience.name=experience`,
  `summarizer: hindsight`, `mode: mixed`) — only when beyondagent-plugin-experience is installed;
  `experience_keep` and `experience_hybrid` train on the guided samples with `experience.training`
  `keep` and `hybrid` instead of the default `strip` (not in the default `--arms`).

Each run is `beyondagent run` in a child process (the same code path a user runs). Reported per
arm: the training success rate (mean over seeds of a moving average over `--window` steps) at
fixed steps, and the steps until that average first reaches `--threshold`, both as ratios to
`grpo` measured in the same invocation. A PNG of the curves is written next to the runs. The
last line is `success_ratio_vs_grpo: <arm>=X ...` (final success, arm / grpo).

    python benchmarks/self_evolve_ablation.py                    # 3 arms x 3 seeds x 40 steps
    python benchmarks/self_evolve_ablation.py --steps 10 --seeds 1 --arms grpo,gigpo   # a smoke run
    python benchmarks/self_evolve_ablation.py --arms grpo,gigpo --set tasks.train.size=3   # 3x3 maps
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SPEC = ROOT / "examples" / "quickstart.yaml"
ARMS = {
    "grpo": [],
    "gigpo": ["backend.advantage.name=gigpo"],
    "experience": ["experience.name=experience", "experience.summarizer=hindsight", "experience.mode=mixed"],
    # the same guided rollouts, trained on with the lessons kept in the context, or stripped only from
    # the successful ones (the default above, `strip`, removes them from every guided sample)
    "experience_keep": ["experience.name=experience", "experience.summarizer=hindsight", "experience.mode=mixed",
                        "experience.training=keep"],
    "experience_hybrid": ["experience.name=experience", "experience.summarizer=hindsight", "experience.mode=mixed",
                          "experience.training=hybrid"],
}


def run_arm(arm: str, seed: int, steps: int, out: Path, extra: list[str]) -> list[dict]:
    overrides = [*extra, *ARMS[arm], f"run.seed={seed}", f"run.name={arm}-{seed}", f"run.output_dir={out}",
                 f"backend.total_steps={steps}", "backend.eval_every=0", "backend.save_every=0", "backend.report=false"]
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "beyondagent_core.cli", "run", str(SPEC), *overrides],
                          cwd=ROOT, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"{arm} seed {seed} failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
    rows = [json.loads(line) for line in (out / f"{arm}-{seed}" / "metrics.jsonl").read_text().splitlines()]
    print(f"  {arm:<10} seed {seed}: {time.perf_counter() - started:6.1f} s", flush=True)
    return [row for row in rows if "train/success_rate" in row]


def moving_average(values: list[float], window: int) -> list[float]:
    return [statistics.fmean(values[max(0, i - window + 1):i + 1]) for i in range(len(values))]


def first_reaching(curve: list[float], threshold: float) -> int | None:
    return next((step + 1 for step, value in enumerate(curve) if value >= threshold), None)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--arms", default="grpo,gigpo,experience")
    parser.add_argument("--window", type=int, default=5)
    parser.add_argument("--threshold", type=float, default=0.5)
    parser.add_argument("--out", type=Path, default=None, help="where the runs go (default: a temporary folder)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="a spec override for every arm, e.g. --set tasks.train.size=3 (repeatable)")
    args = parser.parse_args()
    arms = [arm.strip() for arm in args.arms.split(",") if arm.strip()]
    if importlib.util.find_spec("beyondagent_plugin_experience") is None:
        left_out = [arm for arm in arms if arm.startswith("experience")]
        if left_out:
            print(f"beyondagent-plugin-experience is not installed: {', '.join(left_out)} left out")
        arms = [arm for arm in arms if arm not in left_out]
    if arms[0] != "grpo":
        raise SystemExit("--arms must start with grpo: every ratio is against it")
    out = args.out or Path(tempfile.mkdtemp(prefix="ablation-"))
    print(f"{len(arms)} arms x {args.seeds} seeds x {args.steps} steps; runs in {out}")

    curves: dict[str, list[float]] = {}
    for seed in range(args.seeds):  # arms interleaved per seed: a drifting machine hits each alike
        for arm in arms:
            rows = run_arm(arm, seed, args.steps, out, args.set)
            curves.setdefault(arm, [0.0] * args.steps)
            smooth = moving_average([row["train/success_rate"] for row in rows], args.window)
            curves[arm] = [a + b / args.seeds for a, b in zip(curves[arm], smooth)]

    marks = sorted({max(1, args.steps * k // 4) for k in range(1, 5)})
    print(f"\ntraining success (moving average over {args.window} steps, mean of {args.seeds} seeds)")
    print(f"{'arm':<12}" + "".join(f"{'step ' + str(m):>10}" for m in marks) + f"{'to ' + str(args.threshold):>10}")
    reach = {arm: first_reaching(curve, args.threshold) for arm, curve in curves.items()}
    for arm, curve in curves.items():
        print(f"{arm:<12}" + "".join(f"{curve[m - 1]:>10.3f}" for m in marks) + f"{str(reach[arm] or '-'):>10}")
    base = curves["grpo"]
    print("\nratios to grpo (success at each mark; steps to threshold: grpo / arm, > 1 is faster)")
    for arm in arms[1:]:
        ratios = [curves[arm][m - 1] / base[m - 1] if base[m - 1] else float("nan") for m in marks]
        speed = reach["grpo"] / reach[arm] if reach["grpo"] and reach[arm] else float("nan")
        print(f"{arm:<12}" + "".join(f"{r:>10.2f}" for r in ratios) + f"{speed:>10.2f}")
    plot(curves, out / "self_evolve_ablation.png", args)
    final = " ".join(f"{arm}={curves[arm][-1] / base[-1] if base[-1] else float('nan'):.2f}" for arm in arms[1:])
    print(f"success_ratio_vs_grpo: {final}")


def plot(curves: dict[str, list[float]], path: Path, args: argparse.Namespace) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(7, 4))
    for arm, curve in curves.items():
        axes.plot(range(1, len(curve) + 1), curve, label=arm)
    axes.axhline(args.threshold, color="grey", linestyle=":", linewidth=1)
    axes.set(xlabel="training step", ylabel=f"success (moving avg {args.window}, {args.seeds} seeds)",
             title="FrozenLake 2x2, tiny model", ylim=(0, 1))
    axes.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    print(f"plot: {path}")


if __name__ == "__main__":
    main()
