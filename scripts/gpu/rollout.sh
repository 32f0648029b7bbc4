#!/usr/bin/env bash
# Issue 35, on the GPU machine after finish.sh (cwd /tmp/keep): our rollout modes vs HF generate eager,
# SmolLM2 in bf16, 64 episodes x 4 turns (under 5 minutes), then the rollout precision comparison.
# First: kv_layout slots (eager and CUDA-graph compiled) samples what a full prefill samples (float32).
set -euo pipefail
out="${OUT:-/tmp/out}"
python scripts/gpu/slots_exactness.py --device cuda 2>&1 | tee "$out/slots_exactness.txt" || true
python benchmarks/gpu_rollout.py --device cuda 2>&1 | tee "$out/gpu_rollout.txt"
python benchmarks/precision_rollout.py --device cuda 2>&1 | tee "$out/precision_rollout.txt"
