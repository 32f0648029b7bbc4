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
shape on two task families (`--families`), each mechanism with an LLM playing its helper role (the
policy itself, `llm: policy`, unless `--helper` names a stronger endpoint) and without one:

| arm | questioning | navigating | attributing |
|---|---|---|---|
| `grpo` | - | - | - |
| `questioning` / `questioning_free` | LLM exploration + `llm` summarizer / random walks + `hindsight` tasks | | |
| `navigating` / `navigating_free` | | LLM lessons / successful trajectories as worked examples | |
| `attributing` / `attributing_free` | | | ADCA, the LLM as step judge / GiGPO |
| `all` / `all_free` | the three with an LLM / the three without | | |

Families: `frozenlake` (the quickstart's `smollm2` profile on 3x3 maps: 2x2 is learned in ~10 steps,
so 3x3 leaves room to see which arm gets there first) and `arithmetic` (the math example's `smollm2`
profile at level 2: level 1 is solved by step 5, level 2 starts low and moves). Arithmetic has no
environment to explore and one step an episode, so `questioning*` and `attributing_free` (GiGPO
needs repeated states) do not apply there and are left out; `all*` take the mechanisms that apply.

Per family and arm: the final training success (mean of the last `--window` steps) and the final
val pass@1, each as the mean over seeds with a 95% t-interval; the steps until the moving average
first reaches `--threshold` (per seed); what each LLM role produced (tasks written by exploration,
lessons stored, steps judged and judge failures); and the run directories (each has `reproduce.json`:
spec, commit, plugin versions, model hash, seed, device, precision). `ablation.json` and one PNG of
curves per family go to `--out`.

Each run is `beyondagent run` in a child process (the same code path a user runs). Reported per
arm: the training success rate (mean over seeds of a moving average over `--window` steps) at
fixed steps, and the steps until that average first reaches `--threshold`, both as ratios to
`grpo` measured in the same invocation. A PNG of the curves is written next to the runs. The
last line is `success_ratio_vs_grpo: <arm>=X ...` (final success, arm / grpo).

    python benchmarks/self_evolve_ablation.py                    # 3 arms x 3 seeds x 40 steps
    python benchmarks/self_evolve_ablation.py --steps 10 --seeds 1 --arms grpo,gigpo   # a smoke run
    python benchmarks/self_evolve_ablation.py --arms grpo,gigpo --set tasks.train.size=3   # 3x3 maps
    python benchmarks/self_evolve_ablation.py --model smollm2-135m-instruct --steps 15 --parallel 10 \
        --set backend.device=cuda                                   # the whole ablation on one GPU
    python benchmarks/self_evolve_ablation.py --model smollm2-135m-instruct --scale cpu   # 2 CPU cores
    python benchmarks/self_evolve_ablation.py --model smollm2-135m-instruct --steps 15 --out RUNS --report

`--parallel N` runs N arms (or seeds) at once, each its own child process: on a GPU a 135M model
leaves the device mostly idle, so ten runs share an H200 (sixteen ran out of its memory); on 2 CPU
cores keep 1. A failed run is reported and the others go on; the table (`ablation.json`, the PNGs)
is rewritten after every finished run, in `--summary` (default `--out`), so an ablation cut off by
a time limit leaves what it finished, and `--resume` (or `--report`, which runs nothing) picks up
the finished runs in `--out`.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import importlib.util
import json
import math
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
REAL_MODEL_PROFILE = "smollm2"  # the examples' settings for a real instruct model


@dataclass(frozen=True)
class Family:
    """A task family: the example spec it trains, its overrides, and whether it has an environment
    to explore whose states repeat across a group's episodes (questioning and GiGPO need that)."""

    name: str
    spec: Path
    overrides: tuple[str, ...]
    explores: bool
    title: str


TINY_FAMILY = Family("frozenlake2", ROOT / "examples" / "quickstart.yaml", (), True, "FrozenLake 2x2")
FAMILIES = {
    "frozenlake": Family("frozenlake", ROOT / "examples" / "quickstart.yaml", ("tasks.train.size=3", "tasks.val.size=3"),
                         True, "FrozenLake 3x3"),
    "arithmetic": Family("arithmetic", ROOT / "examples" / "math_arithmetic.yaml",
                         ("tasks.train.level=2", "tasks.val.level=2"), False, "arithmetic level 2"),
}
# `--scale cpu`: what 2 CPU cores run in about an hour (a FrozenLake step of the real model takes them
# 3-6 minutes; an arithmetic step ~10 s): arithmetic, 8 steps, 3 seeds
CPU_SCALE = {"families": "arithmetic", "steps": 8, "seeds": 3, "window": 3}

# The tiny model's arms (FrozenLake 2x2): a random model cannot play an LLM role, so no LLM arms.
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

# AgentEvolver's three mechanisms on a real model, each with an LLM in its helper role (`llm: policy`:
# the policy itself; `--helper` points every role at another endpoint) and without one.
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
# random walks; the goals the env says were reached become tasks, replayed to check them (hindsight)
QUESTIONING_FREE = [
    "explore={name: random, mode: random_actions, max_explore_step: 6, n: 4, workers: 4,"
    " summarizer: {name: hindsight, max_tasks: 3},"
    " filters: [{name: dedup, scope: seed}, {name: feasibility, solver: replay}]}",
    "synthetic_reward={name: env}",
    "mixture={name: ratio, synthetic_ratio: 0.5}",
]
NAVIGATING = ["llm=policy", "experience={name: experience, mode: mixed, ratio: 0.5, k: 3, training: strip,"
              " summarizer: llm}"]
# successful episodes kept whole and retrieved as worked examples
NAVIGATING_FREE = ["experience={name: experience, mode: mixed, ratio: 0.5, k: 2, training: strip,"
                   " summarizer: trajectory}"]
ATTRIBUTING_FREE = ["backend.advantage.name=gigpo"]


def attributing(prm_steps: int) -> list[str]:
    # a judgement labels a few steps: 160 tokens are plenty (the default 1024 lets a rambling judge run on);
    # a step's 32 episodes judged at once: the policy batches the calls in flight, and the default 8 at a
    # time made a step ~4x longer (a FrozenLake 3x3 step never finished in 500 s on the H200, 2026-11-28)
    return ["llm=policy", f"backend.advantage={{name: adca, prm_steps: {prm_steps}, step_reward: 0.2, max_tokens: 160,"
                          " concurrency: 32}"]


def real_model_arms(family: Family, prm_steps: int) -> dict[str, list[str]]:
    """The arms that apply to `family` (see the module's docstring for those left out, and why)."""
    explores = family.explores
    llm = {"questioning": QUESTIONING if explores else None, "navigating": NAVIGATING,
           "attributing": attributing(prm_steps)}
    free = {"questioning": QUESTIONING_FREE if explores else None, "navigating": NAVIGATING_FREE,
            "attributing": ATTRIBUTING_FREE if explores else None}
    arms: dict[str, list[str]] = {"grpo": []}
    for mechanism in ("questioning", "navigating", "attributing"):
        if llm[mechanism] is not None:
            arms[mechanism] = llm[mechanism]
        if free[mechanism] is not None:
            arms[f"{mechanism}_free"] = free[mechanism]
    arms["all"] = [override for overrides in llm.values() if overrides for override in overrides]
    all_free = [override for overrides in free.values() if overrides for override in overrides]
    if all_free not in arms.values():  # arithmetic: only navigating applies without an LLM
        arms["all_free"] = all_free
    return arms


def finished_rows(metrics: Path, steps: int) -> list[dict] | None:
    """The training rows of a run in `metrics` that reached `steps`, else None."""
    if not metrics.is_file():
        return None
    rows = [row for row in read_rows(metrics) if "train/success_rate" in row]
    return rows if rows and rows[-1].get("step") == steps else None


def run_dir_of(out: Path, family: Family, arm: str, seed: int) -> Path:
    return out / f"{family.name}-{arm}-{seed}"


def run_arm(family: Family, arm: str, seed: int, steps: int, out: Path, extra: list[str],
            arms: dict[str, list[str]], profile: list[str], resume: bool = False,
            drop_checkpoints: bool = False) -> Path | None:
    """One run of `arm` on `family` with `seed`, in a child process; its run directory (None: it failed)."""
    run_dir = run_dir_of(out, family, arm, seed)
    name = run_dir.name
    if resume and finished_rows(run_dir / "metrics.jsonl", steps):
        print(f"  {name:<32} finished before, read from {run_dir}", flush=True)
        return run_dir
    overrides = [*family.overrides, *extra, *arms[arm], f"run.seed={seed}", f"run.name={name}",
                 f"run.output_dir={out}", f"backend.total_steps={steps}", "backend.eval_every=0",
                 "backend.save_every=0", "backend.report=false"]
    if any(override.startswith("experience") for override in arms[arm]):
        overrides.append(f"experience.path={out / f'{name}-lessons.sqlite'}")  # each run its own lessons
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "beyondagent_core.cli", "run", str(family.spec), *profile,
                           *overrides], cwd=ROOT, capture_output=True, text=True)
    if proc.returncode != 0:  # one failed run (an OOM beside other runs, say) leaves the others going
        print(f"  {name} failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}", flush=True)
        return None
    print(f"  {name:<32} {time.perf_counter() - started:6.1f} s", flush=True)
    if drop_checkpoints:  # a 135M model's final checkpoint is 1.6 GB; 42 of them fill a 64 GB disk
        shutil.rmtree(run_dir / "checkpoints", ignore_errors=True)
    return run_dir


def read_rows(metrics: Path) -> list[dict]:
    return [json.loads(line) for line in metrics.read_text().splitlines() if line.strip()]


def moving_average(values: list[float], window: int) -> list[float]:
    return [statistics.fmean(values[max(0, i - window + 1):i + 1]) for i in range(len(values))]


def first_reaching(curve: list[float], threshold: float) -> int | None:
    return next((step + 1 for step, value in enumerate(curve) if value >= threshold), None)


# two-sided 95% t quantiles by degrees of freedom (3 seeds: 4.30, so an interval is wide: honest)
T_975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262, 10: 2.228}


def interval(values: list[float]) -> tuple[float, float | None]:
    """The mean and the half-width of its 95% t-interval (None for one value)."""
    mean = statistics.fmean(values)
    if len(values) < 2:
        return mean, None
    return mean, T_975.get(len(values) - 1, 1.96) * statistics.stdev(values) / math.sqrt(len(values))


def shown(mean_width: tuple[float, float | None]) -> str:
    mean, width = mean_width
    return f"{mean:.3f}" if width is None else f"{mean:.3f} ± {width:.3f}"


def roles(run_dir: Path, rows: list[dict]) -> dict[str, float]:
    """What the run's helper roles produced: tasks written by exploration, lessons (or kept
    trajectories) stored, steps judged and judge failures, groups the judge left to GRPO."""
    out: dict[str, float] = {}
    events = run_dir / "events.jsonl"
    if events.is_file():
        for line in events.read_text().splitlines():
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if event.get("event") == "explore.finished":
                out["tasks_written"] = out.get("tasks_written", 0) + float(event.get("tasks") or 0)
                out["explorations"] = out.get("explorations", 0) + float(event.get("explorations") or 0)
    for metric, name in (("experience/added", "lessons_stored"), ("advantage/judged", "steps_judged"),
                         ("advantage/judge_failures", "judge_failures"),
                         ("advantage/fallback_groups", "groups_left_to_grpo")):
        values = [row[metric] for row in rows if isinstance(row.get(metric), int | float)]
        if values:
            out[name] = float(sum(values))
    return out


def summarize(family: Family, arm: str, run_dirs: list[Path], args: argparse.Namespace) -> dict:
    """One table row: the arm's seeds, their curves and what reproduces them."""
    train, val, reach, produced = [], [], [], []
    curves = []
    for run_dir in run_dirs:
        rows = read_rows(run_dir / "metrics.jsonl")
        success = [row["train/success_rate"] for row in rows if "train/success_rate" in row]
        curve = moving_average(success, args.window)
        curves.append(curve)
        train.append(statistics.fmean(success[-args.window:]))
        vals = [row["val/pass@1"] for row in rows if "val/pass@1" in row]
        val.append(vals)
        reach.append(first_reaching(curve, args.threshold))
        produced.append(roles(run_dir, rows))
    keys = sorted({key for counts in produced for key in counts})
    return {"family": family.name, "arm": arm, "seeds": len(run_dirs),
            "train_success": interval(train), "train_success_per_seed": train,
            "val_before": interval([v[0] for v in val if v]) if all(val) else None,
            "val_after": interval([v[-1] for v in val if v]) if all(val) else None,
            "steps_to_threshold": reach,
            "roles": {key: sum(counts.get(key, 0.0) for counts in produced) for key in keys},
            "curve": [statistics.fmean(step) for step in zip(*curves)],
            "runs": [str(run_dir) for run_dir in run_dirs]}


def print_table(family: Family, rows: list[dict], args: argparse.Namespace) -> None:
    print(f"\n{family.title}: {args.seeds} seed(s) x {args.steps} steps, model {args.model}; train success = mean of "
          f"the last {args.window} steps, val = pass@1 before -> after; ± a 95% t-interval over seeds")
    print(f"{'arm':<18}{'seeds':>6}{'train success':>18}{'val before':>18}{'val after':>18}  {'to ' + str(args.threshold):<12}roles")
    base = rows[0]["train_success"][0] if rows[0]["arm"] == "grpo" else None  # no grpo run finished: no ratios
    for row in rows:
        reach = "/".join(str(r) if r else "-" for r in row["steps_to_threshold"])
        val_before = shown(row["val_before"]) if row["val_before"] else "-"
        val_after = shown(row["val_after"]) if row["val_after"] else "-"
        made = ", ".join(f"{k} {v:g}" for k, v in row["roles"].items()) or "-"
        print(f"{row['arm']:<18}{row['seeds']:>6}{shown(row['train_success']):>18}{val_before:>18}{val_after:>18}  {reach:<12}{made}")
    print("runs: " + "; ".join(f"{row['arm']}: {', '.join(Path(r).name for r in row['runs'])}" for row in rows))
    if base is None:
        print(f"success_ratio_vs_grpo ({family.name}): no grpo run finished")
        return
    ratios = " ".join(f"{row['arm']}={row['train_success'][0] / base if base else float('nan'):.2f}" for row in rows[1:])
    print(f"success_ratio_vs_grpo ({family.name}): {ratios}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--arms", default=None, help="comma-separated (default: every arm that applies)")
    parser.add_argument("--families", default=None,
                        help=f"real model: comma-separated of {', '.join(FAMILIES)} (default: both)")
    parser.add_argument("--window", type=int, default=5)
    parser.add_argument("--threshold", type=float, default=0.5)
    parser.add_argument("--out", type=Path, default=None, help="where the runs go (default: a temporary folder)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="a spec override for every arm, e.g. --set backend.device=cuda (repeatable)")
    parser.add_argument("--summary", type=Path, default=None,
                        help="where ablation.json and the PNGs go (default: --out), rewritten after every run")
    parser.add_argument("--report", action="store_true",
                        help="only the table of the runs in --out that finished (an ablation cut off, or carried back)")
    parser.add_argument("--drop-checkpoints", action="store_true",
                        help="delete each run's final checkpoint once it finished (its records stay)")
    parser.add_argument("--resume", action="store_true",
                        help="reuse the runs in --out that finished all their steps (an ablation run in parts)")
    parser.add_argument("--model", default="tiny",
                        help="tiny (the default arms) or a real model: a known name such as smollm2-135m-instruct or "
                             "a checkpoint path (AgentEvolver's arms on the examples' smollm2 profiles)")
    parser.add_argument("--scale", choices=["cpu"], default=None,
                        help=f"cpu: the real-model ablation sized for 2 CPU cores ({CPU_SCALE})")
    parser.add_argument("--parallel", type=int, default=1,
                        help="runs at once, each in its own child process (default 1: one after another)")
    parser.add_argument("--helper", default=None, metavar="LLM",
                        help="the LLM roles' model instead of the policy: a spec `llm` block, e.g. '{model: "
                             "qwen2.5-7b-instruct, base_url: http://127.0.0.1:8000/v1}' (AgentEvolver's setup: a small "
                             "policy trained while a larger model explores, summarizes and judges)")
    parser.add_argument("--prm-steps", type=int, default=None,
                        help="real model: steps the attributing arms ask the judge (default: all of them)")
    args = parser.parse_args()
    real = args.model != "tiny"
    if args.scale == "cpu":
        for key, value in CPU_SCALE.items():
            if getattr(args, key) in (None, parser.get_default(key)):
                setattr(args, key, value)
    families = ([FAMILIES[name] for name in (args.families or ",".join(FAMILIES)).split(",") if name]
                if real else [TINY_FAMILY])
    profile = ["--profile", REAL_MODEL_PROFILE, f"model.path={args.model}"] if real else []
    plan: dict[str, tuple[Family, dict[str, list[str]], list[str]]] = {}
    for family in families:
        table = real_model_arms(family, args.prm_steps or args.steps) if real else ARMS
        if args.helper:  # every LLM role asks the helper
            table = {arm: [f"llm={args.helper}" if o == "llm=policy" else o for o in overrides]
                     for arm, overrides in table.items()}
        wanted = [arm.strip() for arm in (args.arms or ",".join(table if real else ["grpo", "gigpo", "experience"]))
                  .split(",") if arm.strip()]
        unknown = [arm for arm in wanted if arm not in table and not (real and arm in real_model_arms(FAMILIES["frozenlake"], 1))]
        if unknown:
            raise SystemExit(f"unknown arm(s) {', '.join(unknown)}: pick from {', '.join(table)}")
        left = [arm for arm in wanted if arm not in table]
        if left:
            print(f"{family.title}: {', '.join(left)} left out (no environment to explore, one step an episode)")
        arms = [arm for arm in wanted if arm in table]
        if importlib.util.find_spec("beyondagent_plugin_experience") is None:
            missing = [arm for arm in arms if any(o.startswith("experience") for o in table[arm])]
            if missing:
                print(f"beyondagent-plugin-experience is not installed: {', '.join(missing)} left out")
            arms = [arm for arm in arms if arm not in missing]
        if not arms or arms[0] != "grpo":
            raise SystemExit("--arms must start with grpo: every ratio is against it")
        plan[family.name] = (family, table, arms)
    out = args.out or Path(tempfile.mkdtemp(prefix="ablation-"))
    runs = [(family, table, arm, seed) for family, table, arms in plan.values() for seed in range(args.seeds)
            for arm in arms]  # arms interleaved per seed: a drifting machine hits each alike
    print(f"{len(runs)} runs ({', '.join(f'{f.title}: {len(a)} arms' for f, _, a in plan.values())}) x "
          f"{args.steps} steps, model {args.model}; runs in {out}")
    summary_dir = args.summary or out
    summary_dir.mkdir(parents=True, exist_ok=True)
    finished: dict[tuple[str, str, int], Path] = {}
    if args.report:  # the table of what --out holds, nothing run
        finished = {(family.name, arm, seed): run_dir_of(out, family, arm, seed) for family, _, arm, seed in runs
                    if finished_rows(run_dir_of(out, family, arm, seed) / "metrics.jsonl", args.steps)}
        write_summary(plan, finished, args, summary_dir)
        print(f"{len(finished)} of {len(runs)} runs finished in {out}")
        return
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.parallel)) as pool:
        futures = {pool.submit(run_arm, family, arm, seed, args.steps, out, args.set, table, profile, args.resume,
                               args.drop_checkpoints): (family.name, arm, seed) for family, table, arm, seed in runs}
        for future in concurrent.futures.as_completed(futures):
            if (run_dir := future.result()) is not None:
                finished[futures[future]] = run_dir
                # rewritten after every run: an ablation cut off by a time limit leaves what it finished
                write_summary(plan, finished, args, summary_dir, quiet=True)
    write_summary(plan, finished, args, summary_dir)
    failed = len(runs) - len(finished)
    if failed:
        raise SystemExit(f"{failed} of {len(runs)} runs failed (above); the table has the others")


def write_summary(plan: dict, finished: dict[tuple[str, str, int], Path], args: argparse.Namespace,
                  summary_dir: Path, quiet: bool = False) -> None:
    """The table rows of the runs `finished` so far (an arm with fewer seeds says so), `ablation.json`
    and one PNG per family in `summary_dir`; printed unless `quiet`."""
    summary = []
    for family, _, arms in plan.values():
        rows = [summarize(family, arm, [finished[key] for key in sorted(finished) if key[:2] == (family.name, arm)],
                          args) for arm in arms if any(key[:2] == (family.name, arm) for key in finished)]
        if not rows:
            continue
        if not quiet:
            print_table(family, rows, args)
        plot(family, rows, summary_dir / f"self_evolve_ablation_{family.name}.png", args, quiet=quiet)
        summary += rows
    (summary_dir / "ablation.json").write_text(json.dumps({"args": {k: str(v) for k, v in vars(args).items()},
                                                           "runs_finished": len(finished), "rows": summary},
                                                          indent=2) + "\n")
    if not quiet:
        print(f"summary: {summary_dir / 'ablation.json'}")


def plot(family: Family, rows: list[dict], path: Path, args: argparse.Namespace, quiet: bool = False) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(7, 4))
    same: dict[tuple[float, ...], list[str]] = {}  # arms whose curves coincide share one line and label
    for row in rows:
        same.setdefault(tuple(round(v, 9) for v in row["curve"]), []).append(row["arm"])
    for curve, arms in same.items():
        style = "--" if all(arm.endswith("_free") for arm in arms) else "-"
        axes.plot(range(1, len(curve) + 1), curve, style, label=" = ".join(arms))
    axes.axhline(args.threshold, color="grey", linestyle=":", linewidth=1)
    axes.set(xlabel="training step", ylabel=f"train success (moving avg {args.window}, mean over seeds)",
             title=f"{family.title}, {args.model}", ylim=(0, 1))
    axes.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)
    if not quiet:
        print(f"plot: {path}")


if __name__ == "__main__":
    main()
