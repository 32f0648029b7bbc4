#!/usr/bin/env bash
# Install each plugin alone (with the core) into a fresh virtualenv from the wheel built from its
# folder - not editable - and check that `beyondagent plugins --json` lists it with status ok: the
# entry point really ships in the built wheel, and the plugin imports with only what it declares.
# Every wheel is built once, first (a plugin's first-party dependencies, e.g. torch -> advantages,
# are installed from theirs, not from PyPI). The plugins are checked a few at a time
# (BEYONDAGENT_SHIP_JOBS, default 3): each check is mostly pip unpacking wheels, so they overlap
# well even on 2 cores; each one's output is printed whole when it ends.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
PY="${BEYONDAGENT_PYTHON:-python3}"
JOBS="${BEYONDAGENT_SHIP_JOBS:-3}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# One venv with pip and hatchling builds the wheels and installs into the others (`pip --python`),
# which then need no pip of their own. --no-compile: each venv runs one command, then is deleted.
"$PY" -m venv "$work/pip"
pip=("$work/pip/bin/python" -m pip --disable-pip-version-check)
"${pip[@]}" install --quiet --upgrade --no-compile pip "hatchling>=1.21"
"${pip[@]}" wheel --quiet --no-deps --no-build-isolation --wheel-dir "$work/wheels" "$ROOT" "$ROOT"/plugins/*/

wheel_of() {  # wheel_of DISTRIBUTION: the wheel built above (its name with - as _)
  local found=("$work/wheels/${1//-/_}"-*.whl)
  echo "${found[0]}"
}

check_one() {  # check_one PLUGIN_DIR: exit status 0 when the plugin is listed ok
  local dir="$1" name venv sibling wheels=()
  name="$(basename "$dir")"
  "$PY" -m venv --without-pip "$work/$name"
  venv="$work/$name/bin"
  local install=("${pip[@]}" --python "$venv/python" install --quiet --no-compile)
  # A plugin needing torch gets the CPU build first (a plain `torch` requirement pulls CUDA wheels).
  if grep -q '"torch' "$dir/pyproject.toml"; then "${install[@]}" torch==2.13.0; fi
  wheels+=("$(wheel_of beyondagent)")
  for sibling in $("$PY" "$ROOT/scripts/plugin_siblings.py" "$dir"); do
    wheels+=("$(wheel_of "beyondagent-plugin-$sibling")")
  done
  "${install[@]}" "${wheels[@]}" "$(wheel_of "beyondagent-plugin-$name")"
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
