#!/usr/bin/env bash
# Sets up a fresh machine and runs the demo: lambdasegment demo [OUTPUT_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/lambdasegment demo "$@"
