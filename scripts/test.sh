#!/usr/bin/env bash
# The whole test suite: install the core and every plugin into .venv, run every test suite.
source "$(dirname "$0")/_env.sh"
suites=(tests)
for dir in plugins/*/tests; do
  [ -d "$dir" ] && suites+=("$dir")
done
python -m pytest -p no:cacheprovider "${suites[@]}" "$@"
