#!/usr/bin/env bash
# The whole test suite: install the core and every plugin into .venv, build the venvs plugins
# need (verl, AppWorld: cached, so only the first run builds them; each build's time is printed)
# while every test suite runs. Each phase's time is printed ("phase: ... s"), and pytest ends with the
# seconds each suite took (scripts/suite_times.py).
started=$SECONDS
source "$(dirname "$0")/_env.sh"
echo "phase: install into .venv: $((SECONDS - started)) s"
mark=$SECONDS
# The plugin venvs build in the background while the tests run: a fresh build spends much of its
# time downloading and unpacking, and a test that needs a venv waits on that venv's build lock
# (`ensure_venv`), then finds it built. Its output is printed after the tests. A venv that cannot
# be built here (offline) is not fatal here: the tests needing it say why.
venv_log="$(mktemp)"
(
  beyondagent venv build --all --jobs 4 >"$venv_log" 2>&1 \
    || echo "warning: a plugin venv could not be built; the tests that need it report why" >>"$venv_log"
  echo "phase: plugin venvs (built beside the tests): $((SECONDS - mark)) s" >>"$venv_log"
) &
venv_build=$!
suites=(tests)
for dir in plugins/*/tests; do
  [ -d "$dir" ] && suites+=("$dir")
done
# Test files run in parallel worker processes (pytest-xdist), each file whole on one worker, the
# longest first, verl's all on one worker (scripts/xdist_plan.py says why).
# BEYONDAGENT_TEST_WORKERS sets how many workers (default 2, one a core here; 0 runs in this process).
workers="${BEYONDAGENT_TEST_WORKERS:-2}"
status=0
PYTHONPATH="$ROOT/scripts${PYTHONPATH:+:$PYTHONPATH}" python -m pytest -p no:cacheprovider -p suite_times -p skip_audit -p xdist_plan \
  -n "$workers" --dist loadfile --no-loadscope-reorder --durations=30 \
  "${suites[@]}" "$@" || status=$?
wait "$venv_build"
cat "$venv_log" && rm -f "$venv_log"
echo "phase: tests (venv builds included): $((SECONDS - mark)) s"
exit $status
