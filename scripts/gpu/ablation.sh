#!/usr/bin/env bash
# Issue 34, on the GPU machine after finish.sh (cwd /tmp/keep): the self-evolve ablation on the real model,
# every arm on FrozenLake 3x3 and arithmetic level 2, 3 seeds, 20 steps, nine runs at once (a 135M policy
# leaves the GPU mostly idle). The table, ablation.json, one PNG per family and every run's
# reproduce.json land in $OUT/ablation. Sized for one 10-minute call; `--resume` with the same --out
# finishes an interrupted one.
set -euo pipefail
out="${OUT:-/tmp/out}/ablation"
python benchmarks/self_evolve_ablation.py --model smollm2-135m-instruct --steps 20 --seeds 3 --parallel 9 \
  --set backend.device=cuda --out "$out" --resume "$@" 2>&1 | tee "${OUT:-/tmp/out}/ablation.txt"
