#!/usr/bin/env bash
# Sets up gpuarena and judges the bundled softmax examples end to end on this machine's
# best device (the first CUDA GPU if there is one, else the CPU), then shows a failure.
set -uo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh || exit 1
. .venv/bin/activate
if python -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)"; then
  device=cuda
else
  device=cpu
  export TRITON_INTERPRET=1  # Triton kernels run on the CPU through Triton's interpreter
fi
echo; echo "== PyTorch softmax on $device"
gpuarena run level1/softmax examples/softmax/pytorch.py --device $device
echo; echo "== Triton softmax on $device"
gpuarena run level1/softmax examples/softmax/triton.py --device $device
if [ $device = cuda ]; then
  echo; echo "== CUDA softmax on $device"
  gpuarena run level1/softmax examples/softmax/cuda --device $device
fi
echo; echo "== A broken softmax (softmax over the wrong dimension): a failure, explained"
gpuarena run level1/softmax examples/softmax/broken.py --device $device --mode test
echo; echo "(exit status 1 above is expected: the broken solution is rejected)"
exit 0
