#!/usr/bin/env bash
# Pack the project and the real model for an offline GPU machine: ../shared/gpu/prepare.sh plus the
# first-party plugins that the ones it packs require (torch -> advantages, gateway, report; llm ->
# synthesis), which its fixed list lacks. Run from anywhere; it fills .device/a and .device/b.
# Then two device calls back to back (see each issue's script here for the second):
#   carry .device/a:  bash .device/a/install.sh
#   carry .device/b:  r=$(pwd); source .device/b/finish.sh && bash $r/scripts/gpu/<issue>.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
bash ../shared/gpu/prepare.sh plugins/gateway plugins/report plugins/synthesis "$@"
