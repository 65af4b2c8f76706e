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
# GPU MODE's reference-kernels for bench/peer_gpumode.py and bench/peer_material.py (their code is fetched, never committed):
# GPUMODE_REPO names a local clone or bare git directory of github.com/gpu-mode/reference-kernels
if [ -n "${GPUMODE_REPO:-}" ]; then
  rm -rf .gpu/reference-kernels && mkdir -p .gpu/reference-kernels
  gm_git=$(git -C "$GPUMODE_REPO" rev-parse --absolute-git-dir)
  git --git-dir="$gm_git" archive HEAD problems | tar -x -C .gpu/reference-kernels
  git --git-dir="$gm_git" rev-parse HEAD > .gpu/reference-kernels/REVISION
fi
# KernelBench for bench/peer_kernelbench.py (its code is fetched, never committed): KERNELBENCH_REPO
# names a local clone or bare git directory of github.com/ScalingIntelligence/KernelBench. Its eval's
# package (src/kernelbench) and the problem files of every level, with the revision in REVISION; and
# the light pure-Python packages that package imports at its top and the machine lacks (requests,
# python-dotenv; tqdm comes with transformers above; openai and litellm, which its eval never calls,
# are stood in for by the bench)
if [ -n "${KERNELBENCH_REPO:-}" ]; then
  kb_git=$(git -C "$KERNELBENCH_REPO" rev-parse --absolute-git-dir)
  rm -rf .gpu/kernelbench && mkdir -p .gpu/kernelbench
  git --git-dir="$kb_git" archive HEAD src/kernelbench KernelBench | tar -x -C .gpu/kernelbench
  git --git-dir="$kb_git" rev-parse HEAD > .gpu/kernelbench/REVISION
  pip download -q --only-binary=:all: --python-version 3.12 \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    -d .whl requests python-dotenv
fi
# FlashInfer-Bench for bench/peer_flashinfer.py (its code is fetched, never committed): its package from
# PyPI with --no-deps, so its declared dependency flashinfer-python (FlashInfer's kernels, which its
# Benchmark never imports for a plain solution) is not pulled, and docstring-parser, which it imports at
# its top (agents/schema.py); its other imports (torch, triton, pydantic, safetensors, filelock,
# typing_extensions; apache-tvm-ffi for tvm-ffi solutions only) are the machine's or come above
pip download -q --no-deps --only-binary=:all: --python-version 3.12 -d .whl "flashinfer-bench==0.1.2" docstring-parser
# KerasHub on Keras 3 for the JAX harvests at published sizes (validate.sh harvest-jax): the packages
# alone (--no-deps: keras-hub's tensorflow-text and kagglehub serve tokenizers and presets, which a
# backbone built from its config never imports), and keras's own that the machine lacks (namex, optree)
pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
  -d .whl "keras>=3.5" "keras-hub>=0.20" namex optree
# Helion for GPU MODE's helion tasks (their reference.py and submissions import it): --no-deps, as its
# declared scikit-learn serves only two autotuner searches that import it optionally (a submission
# with fixed configs never autotunes), with filecheck, which it imports at its top. 1.4.0: 1.5.1 imports
# what the H200's torch 2.11 lacks (torch._inductor's IntelGPUError); 1.4.0 runs the tasks' submissions
pip download -q --no-deps --only-binary=:all: --python-version 3.12 -d .whl "helion==1.4.0" filecheck
# py-spy (a static binary in a wheel) for bench/research/sampled_stacks.py (the `stacks` step)
pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
  --platform manylinux_2_17_x86_64 --platform manylinux1_x86_64 -d .whl py-spy
du -sh .whl .gpu
