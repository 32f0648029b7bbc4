# Sourced by the other scripts: a virtualenv in .venv with the core and every plugin installed
# (editable). Set BEYONDAGENT_PYTHON to pick the interpreter (Python >= 3.11).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
PY="${BEYONDAGENT_PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
# shellcheck disable=SC1091
source .venv/bin/activate
python -m pip install --quiet --upgrade pip
plugins=()
for dir in plugins/*/; do
  # With its `test` extra, where a plugin has one (extras a plugin does not define are ignored).
  [ -f "$dir/pyproject.toml" ] && plugins+=(-e "${dir%/}[test]")
done
# --no-build-isolation: our source trees are built with the hatchling installed here, not in a fresh
# build environment each (~13 s apiece).
install=(python -m pip install --quiet)
# torch's CPU build first: a plugin's plain `torch` requirement would otherwise pull CUDA wheels.
python -c "import torch" 2>/dev/null || "${install[@]}" torch==2.13.0
"${install[@]}" "hatchling>=1.21" "editables>=0.5"
# The core first (so plugins' `beyondagent` requirement is this checkout), then every plugin.
"${install[@]}" --no-build-isolation -e ".[test]"
"${install[@]}" --no-build-isolation "${plugins[@]}"
