"""PPO with a critic (`gae`, one rollout a task) against GRPO (a group of 8) at the same generated tokens.

    python benchmarks/ppo_vs_grpo.py                          # quickstart (tiny), 40 steps, seeds 0 1 2
    python benchmarks/ppo_vs_grpo.py --steps 20 --seeds 0
    python benchmarks/ppo_vs_grpo.py --profile smollm2 --device cuda --steps 20 --critic-lr 1e-5 --parallel 6

The spec is examples/quickstart.yaml (FrozenLake 2x2, the `tiny` model, or its `smollm2` profile).
GRPO plays `batch_size` tasks x `group_size` rollouts a step as the spec says (4 x 8); PPO plays
4 x 8 = 32 tasks once each (`algorithm.group_size: 1`, `backend.advantage: {name: gae}`), so both
sides generate one episode per slot and about the same tokens a step: the curves are drawn against
the generated tokens each side has spent (`train/response_length` x episodes, summed over steps).
Everything else is the spec's (lr, entropy bonus, max tokens); the critic starts from the policy's
weights with `--critic-lr` and `--lam`. Each run is `pipeline.run` in a fresh child process; the sides
alternate seed by seed, or `--parallel` runs share the machine (a GPU: wall times are then not a side's own).

Reported per side, as the mean over seeds with a 95% t-interval: the training success over the last
`--window` steps, the sampled val pass@1 at the end (16 val tasks), the generated tokens and the wall
time; a PNG of training success against generated tokens (`--out`, with the run directories). The last
line is `ppo_vs_grpo_val_ratio: X.XX` (PPO's final val pass@1 / GRPO's).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from self_evolve_ablation import interval

ROOT = Path(__file__).resolve().parents[1]
SPEC = ROOT / "examples" / "quickstart.yaml"
CHILD = """
import sys
from beyondagent_core import pipeline
pipeline.run(pipeline.prepare(sys.argv[1], sys.argv[2:]))
"""


def sides(args: argparse.Namespace) -> dict[str, list[str]]:
    episodes = args.batch_size * args.group_size
    return {
        "grpo": [f"backend.batch_size={args.batch_size}", f"algorithm.group_size={args.group_size}"],
        "ppo": [f"backend.batch_size={episodes}", "algorithm.group_size=1", "backend.advantage.name=gae",
                f"backend.advantage.lam={args.lam}", f"critic.lr={args.critic_lr}"],
    }


def run(side: str, seed: int, overrides: list[str], args: argparse.Namespace, out: Path) -> tuple[Path, float]:
    name = f"{side}-seed{seed}"
    common = [f"run.output_dir={out}", f"run.name={name}", f"run.seed={seed}", f"backend.total_steps={args.steps}",
              f"backend.eval_every={args.steps}", "backend.save_every=0", "backend.report=false",
              f"backend.device={args.device}"]
    if args.profile:
        common = ["--profile", args.profile, *common]
    started = time.perf_counter()
    result = subprocess.run([sys.executable, "-c", CHILD, str(SPEC), *common, *overrides], capture_output=True,
                            text=True, check=False)
    if result.returncode:
        sys.exit(f"{name} failed:\n{result.stderr[-3000:]}")
    return out / name, time.perf_counter() - started


def curve(run_dir: Path, episodes: int) -> dict[str, list[float]]:
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines() if line.strip()]
    train = [r for r in records if "train/success_rate" in r]
    tokens, spent = [], 0.0
    for record in train:
        spent += record["train/response_length"] * episodes
        tokens.append(spent)
    return {"tokens": tokens, "success": [r["train/success_rate"] for r in train],
            "val": [r["val/pass@1"] for r in records if "val/pass@1" in r]}


def plot(curves: dict[str, list[dict[str, list[float]]]], path: Path, window: int) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(7, 4))
    for side, runs in curves.items():
        steps = min(len(r["success"]) for r in runs)
        mean = [statistics.fmean(r["success"][i] for r in runs) for i in range(steps)]
        smooth = [statistics.fmean(mean[max(0, i - window + 1): i + 1]) for i in range(steps)]
        tokens = [statistics.fmean(r["tokens"][i] for r in runs) for i in range(steps)]
        axis.plot(tokens, smooth, label=f"{side} ({len(runs)} seeds, moving mean of {window} steps)")
    axis.set_xlabel("generated tokens")
    axis.set_ylabel("training success")
    axis.set_ylim(0, 1)
    axis.legend()
    axis.grid(alpha=0.3)
    figure.tight_layout()
    figure.savefig(path, dpi=120)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--batch-size", type=int, default=4, help="GRPO's tasks a step (PPO plays x group size)")
    parser.add_argument("--group-size", type=int, default=8)
    parser.add_argument("--critic-lr", type=float, default=1e-3, help="the critic's lr (tiny: 1e-3; a real model: 1e-5)")
    parser.add_argument("--lam", type=float, default=0.95, help="GAE's lambda")
    parser.add_argument("--window", type=int, default=5, help="steps averaged for the final training success")
    parser.add_argument("--profile", default=None, help="a profile of the quickstart spec (smollm2)")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--out", type=Path, default=None, help="keep the runs and the PNG here")
    parser.add_argument("--parallel", type=int, default=1, help="runs at once (a GPU has room for several)")
    args = parser.parse_args()
    episodes = args.batch_size * args.group_size
    with tempfile.TemporaryDirectory() as tmp:
        out = args.out or Path(tmp)
        out.mkdir(parents=True, exist_ok=True)
        curves: dict[str, list[dict[str, list[float]]]] = {side: [] for side in sides(args)}
        seconds: dict[str, list[float]] = {side: [] for side in curves}
        # the sides alternate seed by seed, so a slow spell of the machine hits both
        jobs = [(side, seed, overrides) for seed in args.seeds for side, overrides in sides(args).items()]
        with ThreadPoolExecutor(max_workers=args.parallel) as pool:
            done = pool.map(lambda job: (job, run(job[0], job[1], job[2], args, out)), jobs)
            for (side, seed, _), (run_dir, took) in done:
                curves[side].append(curve(run_dir, episodes))
                seconds[side].append(took)
                print(f"{side} seed {seed}: {took:.0f} s, final val pass@1 {curves[side][-1]['val'][-1]:.3f}",
                      flush=True)
        print(f"\n{args.steps} steps, {episodes} episodes a step, seeds {args.seeds}; ± a 95% t-interval over seeds")
        print("| side | train success (last {0} steps) | val pass@1 after | generated tokens | seconds |".format(
            args.window))
        print("|---|---|---|---|---|")
        final = {}
        for side, runs in curves.items():
            train = interval([statistics.fmean(r["success"][-args.window:]) for r in runs])
            val = interval([r["val"][-1] for r in runs])
            final[side] = val[0]
            tokens = statistics.fmean(r["tokens"][-1] for r in runs)

            def shown(value: tuple[float, float | None]) -> str:
                return f"{value[0]:.3f}" + ("" if value[1] is None else f" ± {value[1]:.3f}")

            print(f"| {side} | {shown(train)} | {shown(val)} | {tokens:,.0f} | {statistics.fmean(seconds[side]):.0f} |")
        picture = out / "ppo_vs_grpo.png"
        plot(curves, picture, args.window)
        print(f"figure: {picture}")
        ratio = final["ppo"] / final["grpo"] if final["grpo"] else float("nan")
        print(f"ppo_vs_grpo_val_ratio: {ratio:.2f}")


if __name__ == "__main__":
    main()
