#!/usr/bin/env bash
# Issue 33, on the GPU machine after finish.sh (cwd /tmp/keep): the math and quickstart smollm2 profiles,
# 20 steps in each precision mode, val pass@1 side by side (~4 minutes on an H100). Results in $OUT.
set -euo pipefail
python benchmarks/learning_check.py --device cuda --parallel 6 --out "${OUT:-/tmp/out}/learning_check" \
  2>&1 | tee "${OUT:-/tmp/out}/learning_check.txt"
