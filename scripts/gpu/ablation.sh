#!/usr/bin/env bash
# Issue 34, on the GPU machine after finish.sh: the self-evolve ablation on the real model, every arm on
# FrozenLake 3x3 and arithmetic level 2, 3 seeds, STEPS steps, PARALLEL runs at once (a 135M policy leaves
# the GPU mostly idle; 16 CPU cores there). Run it from the project copy (prepare.sh's second call):
#   r=$(pwd); source .device/b/finish.sh && RESUME_FROM=docs/ablation/2026-11-28-h200/runs.tar.gz bash $r/scripts/gpu/ablation.sh
#
# A device call is at most 10 minutes and the whole ablation may not fit in one, so it is built to be cut
# off and resumed: the table (ablation.json, one PNG per family) is rewritten into $OUT after every run,
# and the finished runs' records (no checkpoints) are packed into $OUT/ablation_runs.tar.gz every 20 s.
# RESUME_FROM names such a tarball in the project (docs/ablation/<date>-h200/runs.tar.gz holds an earlier
# session's runs; it travels with the working tree) or in a carried folder: it is unpacked and only what is missing runs
# (--resume), with the same STEPS. BUDGET (seconds, default 520) stops the ablation in time to write its
# last table.
#
# Memory: 16 runs at once on the H200 (139 GiB) ran out (2026-11-28): a few runs' processes held 30-87
# GiB (the caching allocator keeps a step's peak), and the others failed. Hence 10 at once, expandable
# segments, and each step's peaks in metrics.jsonl (perf/max_memory_{allocated,reserved}_gb) to find them.
set -uo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
out="${OUT:-/tmp/out}"; runs=/tmp/ablation; mkdir -p "$out" "$runs"
export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
if [ -n "${RESUME_FROM:-}" ]; then
  tar xzf "$here/$RESUME_FROM" -C "$runs" && echo "resuming beside $(ls "$runs" | grep -c -- '-[0-9]$') runs from $RESUME_FROM"
fi
pack() { tar czf "$out/runs.tmp" --exclude=checkpoints --exclude=tensorboard --exclude='*.sqlite*' -C "$runs" . \
         && mv "$out/runs.tmp" "$out/ablation_runs.tar.gz"; }
(while sleep 20; do pack; done) &
timeout "${BUDGET:-520}" python "$here/benchmarks/self_evolve_ablation.py" --model smollm2-135m-instruct \
  --steps "${STEPS:-15}" --seeds 3 --parallel "${PARALLEL:-10}" --set backend.device=cuda \
  --set backend.micro_batch_size=8 --out "$runs" --summary "$out" --resume --drop-checkpoints "$@" \
  2>&1 | tee "$out/ablation.txt"
pack
nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv | tee -a "$out/ablation.txt"
