#!/usr/bin/env bash
# Issue 34, on the GPU machine after finish.sh: the self-evolve ablation on the real model, every arm on
# FrozenLake 3x3 and arithmetic level 2, 3 seeds, STEPS steps, PARALLEL runs at once (a 135M policy leaves
# the GPU mostly idle; 16 CPU cores there). Run it from the project copy:  bash $r/scripts/gpu/ablation.sh
#
# A device call is at most 10 minutes and the whole ablation may not fit in one, so it is built to be cut
# off and resumed: the table (ablation.json, one PNG per family) is rewritten into $OUT after every run,
# and the finished runs' records (no checkpoints) are packed into $OUT/ablation_runs.tar.gz every 20 s.
# A later session copies that tarball to .device/b/ablation_runs.tar.gz before prepare's second call,
# and this script unpacks it and runs only what is missing (--resume), with the same STEPS.
# BUDGET (seconds, default 520) stops the ablation in time to write its last table; the kv_layout
# slots exactness check (issue 35, correctness only) runs beside it.
set -uo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
out="${OUT:-/tmp/out}"; runs=/tmp/ablation; mkdir -p "$out" "$runs"
carried="$here/.device/b/ablation_runs.tar.gz"
[ -f "$carried" ] && tar xzf "$carried" -C "$runs" && echo "resuming from $(ls "$runs" | grep -c -- '-[0-9]$') carried runs"
pack() { tar czf "$out/runs.tmp" --exclude=checkpoints --exclude=tensorboard --exclude='*.sqlite*' -C "$runs" . \
         && mv "$out/runs.tmp" "$out/ablation_runs.tar.gz"; }
(while sleep 20; do pack; done) &
python "$here/scripts/gpu/slots_exactness.py" --device cuda > "$out/slots_exactness.txt" 2>&1 &
timeout "${BUDGET:-520}" python "$here/benchmarks/self_evolve_ablation.py" --model smollm2-135m-instruct \
  --steps "${STEPS:-15}" --seeds 3 --parallel "${PARALLEL:-16}" --set backend.device=cuda \
  --set backend.micro_batch_size=8 --out "$runs" --summary "$out" --resume --drop-checkpoints "$@" \
  2>&1 | tee "$out/ablation.txt"
pack
nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv | tee -a "$out/ablation.txt"
