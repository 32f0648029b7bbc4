"""Offline ablation of the self-evolving mechanisms on FrozenLake, with the tiny model or a real one.

Arms, each trained from the same policy with `examples/quickstart.yaml` (FrozenLake 2x2 maps,
torch backend) for `--steps` steps and `--seeds` seeds. With the tiny model (the default):

- `grpo`: the default advantage estimator;
- `gigpo`: GiGPO's step-level advantages from anchor states (`backend.advantage.name=gigpo`);
- `experience`: experience-guided rollouts with hindsight experiences (`experience.name=experience`,
  `summarizer: hindsight`, `mode: mixed`) — only when beyondagent-plugin-experience is installed;
  `experience_keep` and `experience_hybrid` train on the guided samples with `experience.training`
  `keep` and `hybrid` instead of the default `strip` (not in the default `--arms`).

With a real model (`--model smollm2-135m-instruct`, or any model path), AgentEvolver's table
shape, on the quickstart's `smollm2` profile (lr 1e-5, temperature 0.7, 16 tokens a turn); the
real model is the policy and, through `llm: policy`, every LLM role (explorer, summarizer, judge):

- `grpo`: plain GRPO on the seed tasks;
- `questioning`: + self-questioning: the model explores each seed map (`explore.mode: llm`), the
  `llm` summarizer writes tasks from what it reached, deduplicated, mixed 1:1 with the seed tasks
  (`mixture: ratio`) and graded by the model as `llm_judge` against their reference;
- `navigating`: + self-navigating: lessons the model writes from finished episodes (`experience`,
  `summarizer: llm`), retrieved into half of each group's prompts (`mode: mixed`, `strip`);
- `attributing`: + self-attributing: ADCA-GRPO, the model labels each step GOOD/BAD for the
  first `--prm-steps` steps;
- `all`: the three together.

Each run is `beyondagent run` in a child process (the same code path a user runs). Reported per
arm: the training success rate (mean over seeds of a moving average over `--window` steps) at
fixed steps, and the steps until that average first reaches `--threshold`, both as ratios to
`grpo` measured in the same invocation. A PNG of the curves is written next to the runs. The
last line is `success_ratio_vs_grpo: <arm>=X ...` (final success, arm / grpo).

    python benchmarks/self_evolve_ablation.py                    # 3 arms x 3 seeds x 40 steps
    python benchmarks/self_evolve_ablation.py --steps 10 --seeds 1 --arms grpo,gigpo   # a smoke run
    python benchmarks/self_evolve_ablation.py --arms grpo,gigpo --set tasks.train.size=3   # 3x3 maps
    python benchmarks/self_evolve_ablation.py --model smollm2-135m-instruct --steps 10 --seeds 1
    python benchmarks/self_evolve_ablation.py --model smollm2-135m-instruct --parallel 5 --set backend.device=cuda

`--parallel N` runs N arms (or seeds) at once, each its own child process: on a GPU a 135M model
leaves the device mostly idle, so five arms share it at little cost; on 2 CPU cores keep 1.
"""

from __future__ import annotations

import argparse
import concurrent.futures
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
REAL_MODEL_PROFILE = "smollm2"  # the quickstart's settings for a real instruct model
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

# AgentEvolver's three mechanisms, each a set of overrides on the real-model profile; `all` takes
# the three. The model is every LLM role (`llm: policy`): nothing outside this machine is asked.
QUESTIONING = [
    "llm=policy",
    "explore.name=random", "explore.mode=llm", "explore.n=1", "explore.workers=4", "explore.max_explore_step=6",
    "explore.temperature=0.7",
    "explore.summarizer={name: llm, max_tasks: 2, task_summary_history_length: 6, temperature: 0.7,"
    " entities: [player P, start S, frozen ice F, holes H, goal G, rows, columns],"
    " operations: [left, down, right, up], difficulty: one to three moves}",
    "explore.filters=[{name: dedup, threshold: 0.8}]",
    "synthetic_reward={name: llm_judge, mode: binary, k: 1}",
    "mixture={name: ratio, synthetic_ratio: 0.5}",
]
NAVIGATING = ["llm=policy", "experience={name: experience, mode: mixed, ratio: 0.5, k: 3, training: strip,"
              " summarizer: llm}"]


def attributing(prm_steps: int) -> list[str]:
    # a judgement labels a few steps: 160 tokens are plenty (the default 1024 lets a rambling judge run on)
    return ["llm=policy", f"backend.advantage={{name: adca, prm_steps: {prm_steps}, step_reward: 0.2, max_tokens: 160}}"]


def real_model_arms(prm_steps: int) -> dict[str, list[str]]:
    return {"grpo": [], "questioning": QUESTIONING, "navigating": NAVIGATING, "attributing": attributing(prm_steps),
            "all": [*QUESTIONING, *NAVIGATING, *attributing(prm_steps)]}


def finished_rows(metrics: Path, steps: int) -> list[dict] | None:
    """The training rows of a run in `metrics` that reached `steps`, else None."""
    if not metrics.is_file():
        return None
    rows = [row for row in read_rows(metrics) if "train/success_rate" in row]
    return rows if rows and rows[-1].get("step") == steps else None


def run_arm(arm: str, seed: int, steps: int, out: Path, extra: list[str], arms: dict[str, list[str]],
            profile: list[str], resume: bool = False) -> list[dict]:
    if resume and (rows := finished_rows(out / f"{arm}-{seed}" / "metrics.jsonl", steps)):
        print(f"  {arm:<10} seed {seed}: finished before, read from {out / f'{arm}-{seed}'}", flush=True)
        return read_rows(out / f"{arm}-{seed}" / "metrics.jsonl")
    overrides = [*extra, *arms[arm], f"run.seed={seed}", f"run.name={arm}-{seed}", f"run.output_dir={out}",
                 f"backend.total_steps={steps}", "backend.eval_every=0", "backend.save_every=0", "backend.report=false"]
    if any(override.startswith("experience") for override in arms[arm]):
        overrides.append(f"experience.path={out / f'{arm}-{seed}-lessons.sqlite'}")  # each run its own lessons
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "beyondagent_core.cli", "run", str(SPEC), *profile, *overrides],
                          cwd=ROOT, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"{arm} seed {seed} failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
    print(f"  {arm:<10} seed {seed}: {time.perf_counter() - started:6.1f} s", flush=True)
    return read_rows(out / f"{arm}-{seed}" / "metrics.jsonl")


def read_rows(metrics: Path) -> list[dict]:
    return [json.loads(line) for line in metrics.read_text().splitlines()]


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
    parser.add_argument("--resume", action="store_true",
                        help="reuse the runs in --out that finished all their steps (an ablation run in parts)")
    parser.add_argument("--model", default="tiny",
                        help="tiny (the default arms) or a real model: a known name such as smollm2-135m-instruct or "
                             "a checkpoint path (AgentEvolver's arms on the quickstart's smollm2 profile)")
    parser.add_argument("--parallel", type=int, default=1,
                        help="runs at once, each in its own child process (default 1: one after another)")
    parser.add_argument("--prm-steps", type=int, default=None,
                        help="real model: steps the attributing arm asks the judge (default: all of them)")
    args = parser.parse_args()
    real = args.model != "tiny"
    arm_table = real_model_arms(args.prm_steps or args.steps) if real else ARMS
    profile = ["--profile", REAL_MODEL_PROFILE, f"model.path={args.model}"] if real else []
    if args.arms == parser.get_default("arms") and real:
        args.arms = ",".join(arm_table)
    arms = [arm.strip() for arm in args.arms.split(",") if arm.strip()]
    unknown = [arm for arm in arms if arm not in arm_table]
    if unknown:
        raise SystemExit(f"unknown arm(s) {', '.join(unknown)} for {'a real model' if real else 'tiny'}: "
                         f"pick from {', '.join(arm_table)}")
    if importlib.util.find_spec("beyondagent_plugin_experience") is None:
        left_out = [arm for arm in arms if any(override.startswith("experience") for override in arm_table[arm])]
        if left_out:
            print(f"beyondagent-plugin-experience is not installed: {', '.join(left_out)} left out")
        arms = [arm for arm in arms if arm not in left_out]
    if arms[0] != "grpo":
        raise SystemExit("--arms must start with grpo: every ratio is against it")
    out = args.out or Path(tempfile.mkdtemp(prefix="ablation-"))
    print(f"{len(arms)} arms x {args.seeds} seeds x {args.steps} steps, model {args.model}; runs in {out}")

    curves: dict[str, list[float]] = {}
    validations: dict[str, list[list[float]]] = {}  # per arm and seed: val pass@1 before training .. after
    # arms interleaved per seed: a drifting machine hits each alike
    runs = [(arm, seed) for seed in range(args.seeds) for arm in arms]
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.parallel)) as pool:
        futures = [pool.submit(run_arm, arm, seed, args.steps, out, args.set, arm_table, profile, args.resume)
                   for arm, seed in runs]
        results = [future.result() for future in futures]
    for (arm, seed), all_rows in zip(runs, results):
        rows = [row for row in all_rows if "train/success_rate" in row]
        validations.setdefault(arm, []).append([row["val/pass@1"] for row in all_rows if "val/pass@1" in row])
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
    print("\nvalidation pass@1 (the spec's val split and val_temperature), before -> after training, per seed")
    for arm, per_seed in validations.items():
        print(f"{arm:<12}" + "  ".join(f"{v[0]:.3f} -> {v[-1]:.3f}" if v else "-" for v in per_seed))
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
             title=f"FrozenLake 2x2, {args.model}", ylim=(0, 1))
    axes.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    print(f"plot: {path}")


if __name__ == "__main__":
    main()
