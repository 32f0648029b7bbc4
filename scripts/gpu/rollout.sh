#!/usr/bin/env bash
# Issue 35, on the GPU machine after finish.sh (cwd /tmp/keep): our rollout modes vs HF generate eager,
# SmolLM2 in bf16, 64 episodes x 4 turns (under 5 minutes), then the rollout precision comparison.
set -euo pipefail
out="${OUT:-/tmp/out}"
python benchmarks/gpu_rollout.py --device cuda 2>&1 | tee "$out/gpu_rollout.txt"
python benchmarks/precision_rollout.py --device cuda 2>&1 | tee "$out/precision_rollout.txt"
