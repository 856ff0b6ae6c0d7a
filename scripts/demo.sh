#!/usr/bin/env bash
# Sets up a fresh machine and runs the demo: lambdasegment demo [OUTPUT_DIR] [--overwrite]
# With no arguments it writes demo-output/, replacing an earlier demo run there.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
if [[ $# -eq 0 ]]; then
    set -- demo-output --overwrite
fi
exec .venv/bin/lambdasegment demo "$@"
