#!/usr/bin/env bash
# Creates .venv (if missing) and installs gpuarena into it, with the test extras.
# On a machine without an NVIDIA GPU it installs the CPU build of PyTorch first: a bare
# `torch` requirement would pull a multi-GB CUDA build.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
. .venv/bin/activate
python -m pip install -q --upgrade pip >/dev/null
if ! python -c "import torch" 2>/dev/null; then
  if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
    python -m pip install -q torch
  else
    python -m pip install -q torch==2.13.0
  fi
fi
python -m pip install -q -e ".[test]"
# the worker's sandbox (harness/containment.py): Debian's bubblewrap; without it workers run
# with in-process guards only, and every record says so
if ! command -v bwrap >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "installing bubblewrap from Debian's packages (the worker's sandbox)" >&2
    DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap >/dev/null
  else
    echo "warning: bubblewrap (bwrap) is not installed: workers will run without a sandbox (sudo apt-get install bubblewrap)" >&2
  fi
fi
echo "gpuarena installed in $(pwd)/.venv ($(python -c 'import torch; print("torch", torch.__version__, "cuda" if torch.cuda.is_available() else "cpu")'))"
