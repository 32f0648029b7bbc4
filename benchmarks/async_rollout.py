"""Wall time per training step with asynchronous rollout vs synchronous, envs whose steps are slow.

    python benchmarks/async_rollout.py                        # 8 steps a side, 50 ms per env step
    python benchmarks/async_rollout.py --steps 12 --step-latency-ms 100 --trials 2

The spec is examples/quickstart.yaml (FrozenLake 2x2, the `tiny` model, 4 tasks x 8 rollouts a
step, up to 6 turns) with `env.step_latency_ms` (every env step sleeps that long first) and no
validation, checkpoints or report. Each side is `pipeline.run` in a fresh child process, the
sides alternate within a trial: `sync`, `one_step_off` (the next step's rollouts run while a step
updates, `backend.rollout_mode`) and `async` (`max_staleness` 2). On the torch backend generation
and update take turns on the device; what overlaps is the rollout's env waiting with the update.

Reported per side: the mean of `perf/step_time_s` over steps 2..N (the first step has nothing to
overlap), its rollout and update halves, and the time the update waited for its batch; the last
line is `one_step_off_step_time_ratio_vs_sync: X.XX` (target <= 0.7; the median of the trials'
ratios), after the async one. Each child's CPU seconds (all its threads) are printed too: on a
shared machine a side that gets more of the cores shows it there.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SPEC = ROOT / "examples" / "quickstart.yaml"
SIDES = {"sync": ["backend.rollout_mode=sync"],
         "one_step_off": ["backend.rollout_mode=one_step_off"],
         "async": ["backend.rollout_mode=async", "backend.max_staleness=2"]}

CHILD = """
import sys
from beyondagent_core import pipeline
pipeline.run(pipeline.prepare(sys.argv[1], sys.argv[2:]))
"""


def run_side(spec: Path, overrides: list[str]) -> tuple[float, float]:
    """The child's wall seconds and CPU seconds (user + system, all its threads)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", CHILD, str(spec), *overrides], stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True)
    if done.returncode:
        sys.exit(f"a side failed:\n{done.stderr[-3000:]}")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.perf_counter() - started, (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)


def step_records(run_dir: Path) -> list[dict]:
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines() if line.strip()]
    return [r for r in records if r["step"] >= 2 and "perf/step_time_s" in r]


def mean(records: list[dict], key: str) -> float:
    return statistics.fmean(r.get(key, 0.0) for r in records)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=8, help="training steps a side")
    parser.add_argument("--step-latency-ms", type=float, default=50.0, help="each env step sleeps this long")
    parser.add_argument("--trials", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    step_times: dict[str, list[float]] = {side: [] for side in SIDES}
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        common = [f"run.output_dir={out}", f"run.seed={args.seed}", f"backend.total_steps={args.steps}",
                  f"env.step_latency_ms={args.step_latency_ms:g}", "tasks.val=null", "backend.eval_every=0",
                  "backend.save_every=0", "backend.report=false"]
        for trial in range(args.trials):
            for side, extra in SIDES.items():
                name = f"{side}_{trial}"
                seconds, cpu = run_side(SPEC, [*common, f"run.name={name}", *extra])
                records = step_records(out / name)
                step_times[side].append(mean(records, "perf/step_time_s"))
                print(f"trial {trial} {side:>12}: {step_times[side][-1]:.2f} s/step over steps 2..{args.steps} "
                      f"(rollout {mean(records, 'perf/rollout_s'):.2f} s, update {mean(records, 'perf/update_s'):.2f}"
                      f" s, waited for the batch {mean(records, 'perf/rollout_wait_s'):.2f} s, weights waited "
                      f"{mean(records, 'perf/weights_wait_s'):.2f} s; staleness "
                      f"{mean(records, 'rollout/staleness'):.2f}; reward {mean(records, 'train/reward_mean'):.3f}); "
                      f"child {seconds:.0f} s, {cpu:.0f} CPU s", flush=True)
    # Each trial's sides ran back to back: a ratio per trial, then the median (a shared machine's load
    # moves whole trials).
    print(f"env steps sleep {args.step_latency_ms:g} ms; mean s/step: "
          + ", ".join(f"{side} {statistics.fmean(times):.2f}" for side, times in step_times.items()))
    for side in ("async", "one_step_off"):
        ratios = [mode / sync for mode, sync in zip(step_times[side], step_times["sync"])]
        print(f"{side} per trial: {', '.join(f'{r:.2f}' for r in ratios)}")
        print(f"{side}_step_time_ratio_vs_sync: {statistics.median(ratios):.2f}")


if __name__ == "__main__":
    main()
