#!/usr/bin/env bash
# Sets up a fresh machine and runs the whole test suite (pytest, CPU only).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/python -m pytest "$@"
