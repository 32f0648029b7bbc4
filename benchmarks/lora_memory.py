"""Peak memory of LoRA (`model.lora`) against full fine-tuning, the same model and steps, one run each.

    python benchmarks/lora_memory.py                                  # smollm2-135m-instruct, 2 steps
    python benchmarks/lora_memory.py --model tiny --steps 3 --trials 2

Each side is `beyondagent run examples/quickstart.yaml` in a fresh child process (`pipeline.run`,
exactly what the CLI does) with only `model.path`, the step count and, for LoRA, `model.lora`
(rank 16, alpha 32, every linear layer) changed; the sides alternate. Peak memory is the child's
`ru_maxrss` (the whole process: weights, gradients, AdamW's two moments, activations, the KV
cache, the imports). Full fine-tuning keeps a gradient and two AdamW moments for every weight;
LoRA for the adapters only, and its KL reference is the same weights with the adapters off
(no copy). KL is on (`algorithm.kl_coef=0.001`, the default), as a user's run has it.

Both sides take the same memory settings: `--micro-batch` episodes per forward/backward (default 2;
the quickstart's 16 holds every episode's activations at once) and `--gradient-checkpointing` (on
by default: `model.gradient_checkpointing`, each layer's activations recomputed in the backward).
Activations are what the two sides share; the less of them, the more the weights' share (what LoRA
saves) shows.

`--mmap-threshold BYTES` runs both children with glibc's `MALLOC_MMAP_THRESHOLD_` (e.g. 1048576):
tensors above it are mapped and unmapped one by one, so freed memory goes back to the system at
once instead of staying in malloc's heap, and peak RSS follows the memory in use. Without it, RSS
also holds what glibc kept after the activations of a micro-batch were freed.

Last line: `lora_peak_rss_ratio_vs_full: X.XX` (LoRA / full; the target is <= 0.6).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
QUICKSTART = ROOT / "examples" / "quickstart.yaml"
LORA = ("model.lora.rank=16", "model.lora.alpha=32")

CHILD = """
import json, resource, sys, time
from beyondagent_core import pipeline
started = time.perf_counter()
session = pipeline.prepare(sys.argv[1], sys.argv[2:])
pipeline.run(session)
print(json.dumps({"peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "seconds": time.perf_counter() - started}))
"""


def one_run(args: argparse.Namespace, lora: bool, out: Path) -> dict[str, float]:
    overrides = [f"model.path={args.model}", f"backend.total_steps={args.steps}", "backend.batch_size=2",
                 "algorithm.group_size=4", "backend.eval_every=0", "backend.save_every=0", "backend.report=false",
                 "tasks.val.count=2", "backend.lr=1e-5", f"run.output_dir={out}", "algorithm.kl_coef=0.001",
                 f"backend.micro_batch_size={args.micro_batch}",
                 f"model.gradient_checkpointing={str(args.gradient_checkpointing).lower()}"]
    if lora:
        overrides += LORA
    env = dict(os.environ)
    if args.mmap_threshold:
        env["MALLOC_MMAP_THRESHOLD_"] = str(args.mmap_threshold)
    proc = subprocess.run([sys.executable, "-c", CHILD, str(QUICKSTART), *overrides], cwd=ROOT, env=env,
                          capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        sys.exit(f"the {'LoRA' if lora else 'full'} run failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m-instruct")
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--trials", type=int, default=1)
    parser.add_argument("--micro-batch", type=int, default=2, help="episodes per forward/backward, both sides")
    parser.add_argument("--gradient-checkpointing", action=argparse.BooleanOptionalAction, default=True,
                        help="model.gradient_checkpointing on both sides (default: on)")
    parser.add_argument("--mmap-threshold", type=int, default=0,
                        help="MALLOC_MMAP_THRESHOLD_ for both children, bytes (default: glibc's own)")
    args = parser.parse_args()
    results: dict[str, list[dict[str, float]]] = {"full": [], "lora": []}
    with tempfile.TemporaryDirectory() as tmp:
        for trial in range(args.trials):
            for side in ("full", "lora"):
                started = time.perf_counter()
                result = one_run(args, side == "lora", Path(tmp) / f"{side}-{trial}")
                results[side].append(result)
                print(f"trial {trial + 1} {side}: peak RSS {result['peak_rss_mib']:.0f} MiB, "
                      f"run {result['seconds']:.0f} s (wall {time.perf_counter() - started:.0f} s)", flush=True)
    peak = {side: min(r["peak_rss_mib"] for r in runs) for side, runs in results.items()}
    print(f"micro-batch {args.micro_batch}, gradient checkpointing {'on' if args.gradient_checkpointing else 'off'}, "
          f"MALLOC_MMAP_THRESHOLD_ {args.mmap_threshold or 'unset (glibc default)'}")
    print(f"model {args.model}, {args.steps} steps, {args.trials} trial(s); this process's own RSS "
          f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB")
    print(f"peak_rss_mib: full={peak['full']:.0f} lora={peak['lora']:.0f}")
    print(f"lora_peak_rss_ratio_vs_full: {peak['lora'] / peak['full']:.2f}")


if __name__ == "__main__":
    main()
