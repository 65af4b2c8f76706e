#!/usr/bin/env bash
# Creates .venv (if missing) and installs gpuarena into it:
#   bash scripts/setup.sh          gpuarena with its test extras (.[test]: the server, JAX, Triton,
#                                  Transformers, Playwright, the linters): what scripts/test.sh runs
#   bash scripts/setup.sh serve    gpuarena and its service (.[server]): what scripts/serve.sh runs
# On a machine without an NVIDIA GPU it installs the CPU build of PyTorch first, from PyTorch's
# own CPU-only index where that can be reached: on PyPI `torch` on Linux is the CUDA build,
# with about 20 nvidia-* packages and gigabytes. Each step says what it does.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
TORCH_CPU_INDEX=${TORCH_CPU_INDEX:-https://download.pytorch.org/whl/cpu}
say() { echo "setup: $*" >&2; }
target=${1:-test}
case "$target" in
  test|serve) ;;
  *) say "usage: bash scripts/setup.sh [serve]  (no argument: the test extras; serve: the service only)"; exit 2 ;;
esac
[ -x .venv/bin/python ] || { say "creating .venv"; "$PYTHON" -m venv .venv; }
. .venv/bin/activate
python -m pip install -q --upgrade pip >/dev/null
if ! python -c "import torch" 2>/dev/null; then
  if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
    say "installing PyTorch with CUDA (an NVIDIA GPU is present; a few GB)"
    python -m pip install --progress-bar on torch
  elif python -c "import urllib.request as u; u.urlopen('$TORCH_CPU_INDEX/torch/', timeout=5)" 2>/dev/null; then
    say "installing PyTorch 2.13.0, CPU build, from $TORCH_CPU_INDEX (no NVIDIA GPU here)"
    python -m pip install --progress-bar on --index-url "$TORCH_CPU_INDEX" torch==2.13.0
  else
    say "installing PyTorch 2.13.0 from the default index ($TORCH_CPU_INDEX cannot be reached; no NVIDIA GPU here)"
    python -m pip install --progress-bar on torch==2.13.0
  fi
fi
# pip is asked again only when pyproject.toml or this script changed since the last install of
# that target (a stamp per target in .venv); the test extras hold the server's, so a current test
# install serves as it is
hash=$(cat pyproject.toml "$0" | sha256sum | cut -c1-16)
stamp=".venv/.gpuarena-installed-$target-$hash"
if [ ! -f "$stamp" ] && ! { [ "$target" = serve ] && [ -f ".venv/.gpuarena-installed-test-$hash" ]; }; then
  if [ "$target" = serve ]; then
    say "installing gpuarena and its service into .venv"
    python -m pip install -q -e ".[server]"
  else
    say "installing gpuarena and its test tools into .venv"
    python -m pip install -q -e ".[test]"
    # FlashInfer-Bench's own schema loaders, to prove that what gpuarena writes in their format is
    # read by them (tests/interop); without its runtime dependencies (flashinfer, tvm-ffi: CUDA)
    python -m pip install -q --no-deps "flashinfer-bench==0.1.2" || say "flashinfer-bench not installed: tests/interop's loader checks skip"
  fi
  rm -f .venv/.gpuarena-installed-"$target"-* .venv/.gpuarena-installed-[0-9a-f]*  # (and the old, untargeted stamp)
  touch "$stamp"
fi
# the worker's sandbox (harness/launch/containment.py): Debian's bubblewrap; without it workers run
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
