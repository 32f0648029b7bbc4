#!/usr/bin/env bash
# The main job: install into .venv and run the quickstart spec (offline, CPU).
source "$(dirname "$0")/_env.sh"
beyondagent run examples/quickstart.yaml "$@"
