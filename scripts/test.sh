#!/usr/bin/env bash
# The whole test suite: install the core and every plugin into .venv, build the venvs plugins
# need (verl, AppWorld: cached, so only the first run builds them; each build's time is printed),
# then run every test suite.
source "$(dirname "$0")/_env.sh"
# A venv that cannot be built here (offline) is not fatal here: the tests needing it say why.
beyondagent venv build --all --jobs 4 || echo "warning: a plugin venv could not be built; the tests that need it report why" >&2
suites=(tests)
for dir in plugins/*/tests; do
  [ -d "$dir" ] && suites+=("$dir")
done
python -m pytest -p no:cacheprovider --durations=30 "${suites[@]}" "$@"
