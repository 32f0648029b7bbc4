#!/usr/bin/env bash
# Install each plugin alone (with the core) into a fresh virtualenv from its folder - not
# editable - and check that `beyondagent plugins --json` lists it with status ok: the entry
# point really ships in the built wheel.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
PY="${BEYONDAGENT_PYTHON:-python3}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
failed=0
for dir in "$ROOT"/plugins/*/; do
  [ -f "$dir/pyproject.toml" ] || continue
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
  "$venv/beyondagent" plugins --json | "$venv/python" "$ROOT/scripts/check_plugin_listed.py" "$name" || failed=1
done
exit "$failed"
