#!/usr/bin/env bash
# Issue 40, on the GPU machine after finish.sh: PPO with a critic (gae, 32 tasks x 1) against GRPO (4 x 8) on
# the quickstart's smollm2 profile, 20 steps, 3 seeds, six runs at once (~5 minutes on an H100). Results in $OUT.
set -euo pipefail
python benchmarks/ppo_vs_grpo.py --profile smollm2 --device cuda --steps 20 --critic-lr 1e-5 --parallel 6 \
  --out "${OUT:-/tmp/out}/ppo_vs_grpo" 2>&1 | tee "${OUT:-/tmp/out}/ppo_vs_grpo.txt"
