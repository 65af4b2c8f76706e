#!/usr/bin/env bash
# Fill the gitignored folders that a device call carries (bench/gpu/README.md): .whl/ (the Python
# packages the lent GPU machine lacks, as wheels for its Python 3.12) and .gpu/ (Debian's
# bubblewrap, the worker's sandbox). A fresh checkout has neither; run this once before
# `run(carry=[".whl", ".gpu"], command="OUT=$OUT bash bench/gpu/validate.sh ...")`.
set -euo pipefail
cd "$(dirname "$0")/../.."
rm -rf .whl && mkdir -p .whl .gpu
pip download -q --only-binary=:all: --python-version 3.12 \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  -d .whl "typer>=0.12" "rich>=13" "pydantic>=2.6" psutil pyyaml "apache-tvm-ffi>=0.1.12" fastapi uvicorn \
  "sqlalchemy>=2.0.30" alembic httpx python-multipart jinja2 itsdangerous markdown-it-py transformers
# the machine's own numpy goes with its torch and jax; hf_xet only downloads from a hub (none there)
rm -f .whl/numpy-* .whl/hf_xet-*
ls .gpu/bubblewrap_*.deb >/dev/null 2>&1 || (cd .gpu && apt-get download bubblewrap)
# GPU MODE's reference-kernels for bench/peer_gpumode.py (their code is fetched, never committed):
# GPUMODE_REPO names a local clone or bare git directory of github.com/gpu-mode/reference-kernels
if [ -n "${GPUMODE_REPO:-}" ]; then
  rm -rf .gpu/reference-kernels && mkdir -p .gpu/reference-kernels
  git --git-dir="$(git -C "$GPUMODE_REPO" rev-parse --absolute-git-dir)" archive HEAD problems/pmpp | tar -x -C .gpu/reference-kernels
fi
du -sh .whl .gpu
