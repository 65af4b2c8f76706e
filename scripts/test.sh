#!/usr/bin/env bash
# Sets up gpuarena and runs the test suite (CPU paths; GPU tests run with `pytest -m gpu`).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
. .venv/bin/activate
mkdir -p tests/artifacts
python -m pytest -q -p no:cacheprovider "$@"
