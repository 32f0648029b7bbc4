#!/usr/bin/env bash
# Install each plugin alone (with the core) into a fresh virtualenv from its folder - not
# editable - and check that `beyondagent plugins --json` lists it with status ok: the entry
# point really ships in the built wheel. The plugins are checked a few at a time
# (BEYONDAGENT_SHIP_JOBS, default 3): each check is mostly pip unpacking wheels, so they overlap
# well even on 2 cores; each one's output is printed whole when it ends.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
PY="${BEYONDAGENT_PYTHON:-python3}"
JOBS="${BEYONDAGENT_SHIP_JOBS:-3}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

check_one() {  # check_one PLUGIN_DIR: exit status 0 when the plugin is listed ok
  local dir="$1" name venv
  name="$(basename "$dir")"
  "$PY" -m venv "$work/$name"
  venv="$work/$name/bin"
  "$venv/python" -m pip install --quiet "$ROOT"
  # A plugin needing torch gets the CPU build first (a plain `torch` requirement pulls CUDA wheels).
  if grep -q '"torch' "$dir/pyproject.toml"; then "$venv/python" -m pip install --quiet torch==2.13.0; fi
  # First-party plugins it depends on (e.g. torch -> advantages) come from this checkout, not PyPI.
  for sibling in $("$venv/python" "$ROOT/scripts/plugin_siblings.py" "$dir"); do
    "$venv/python" -m pip install --quiet "$ROOT/plugins/$sibling"
  done
  "$venv/python" -m pip install --quiet "$dir"
  "$venv/beyondagent" plugins --json | "$venv/python" "$ROOT/scripts/check_plugin_listed.py" "$name"
}

pids=() names=()
wait_for() {  # wait_for INDEX: print that check's log, record a failure
  local index="$1"
  if ! wait "${pids[$index]}"; then failed=1; echo "plugin ${names[$index]}: FAILED" >>"$work/${names[$index]}.log"; fi
  cat "$work/${names[$index]}.log"
}
failed=0
next_to_wait=0
for dir in "$ROOT"/plugins/*/; do
  [ -f "$dir/pyproject.toml" ] || continue
  name="$(basename "$dir")"
  ( set -e; check_one "$dir" ) >"$work/$name.log" 2>&1 &
  pids+=("$!") names+=("$name")
  if (( ${#pids[@]} - next_to_wait >= JOBS )); then
    wait_for "$next_to_wait"; next_to_wait=$((next_to_wait + 1))
  fi
done
while (( next_to_wait < ${#pids[@]} )); do
  wait_for "$next_to_wait"; next_to_wait=$((next_to_wait + 1))
done
exit "$failed"
