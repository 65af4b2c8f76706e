#!/usr/bin/env bash
# Everything GPU-specific, in one go on an NVIDIA machine: the GPU tests (their Evaluation
# records kept), the examples through the CLI, and the timing-fidelity benchmark against ncu.
# Usage: OUT=some/folder bash bench/gpu_run.sh [--quick]
set -u
OUT=${OUT:-gpu-out}; mkdir -p "$OUT/records"
export PYTHONPATH=$PWD/src${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
quick=${1:-}
{
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv
  python3 -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__, torch.cuda.get_device_name())'
} 2>&1 | tee "$OUT/machine.txt"
python3 bench/kineto_probe.py > "$OUT/kineto_probe.txt" 2>&1; tail -4 "$OUT/kineto_probe.txt"
GPUARENA_GPU_OUT=$OUT/records timeout 420 python3 -m pytest -m gpu tests/gpu -q -p no:cacheprovider -x 2>&1 | tee "$OUT/gpu-tests.log" | tail -25
for lang in pytorch triton cuda; do
  src=examples/softmax/$lang.py; [ $lang = cuda ] && src=examples/softmax/cuda
  COLUMNS=150 python3 -m gpuarena run level1/softmax $src --device cuda 2>&1 | tee "$OUT/records/cli-softmax-$lang.txt" | tail -16
done
if [ "$quick" != "--quick" ]; then
  timeout 400 python3 bench/fidelity.py --out "$OUT" 2>&1 | tee "$OUT/fidelity.log" | tail -30
fi
tar czf "$OUT/records.tgz" -C "$OUT" records && rm -rf "$OUT/records"
