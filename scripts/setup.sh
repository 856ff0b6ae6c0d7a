#!/usr/bin/env bash
# Creates .venv and installs LambdaSegmentLib with its train and test extras.
# torch is pinned to 2.13.0 here (this machine's local CPU wheel); pyproject declares a range.
# scripts/constraints.txt pins every other library on Python 3.11 to the versions the model card's
# training runs used, so a recipe's command rebuilds its weights bit for bit.
# Idempotent: re-runs only when pyproject.toml, this script or the constraints changed since the
# last successful set-up.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
VENV=${VENV:-.venv}
stamp="$VENV/.lambdasegment-setup"
want="$(sha256sum pyproject.toml scripts/setup.sh scripts/constraints.txt | sha256sum | cut -d' ' -f1)"
if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
    exit 0
fi
echo "setting up $VENV (torch 2.13.0 CPU, LambdaSegmentLib[train,test]) ..." >&2
"$PYTHON" -m venv "$VENV"
"$VENV/bin/python" -m pip install --quiet --upgrade pip
"$VENV/bin/python" -m pip install --quiet "torch==2.13.0"
"$VENV/bin/python" -m pip install --quiet -c scripts/constraints.txt -e ".[train,test]" "torch==2.13.0"
echo "$want" > "$stamp"
