#!/usr/bin/env bash
# GPU smoke run on the lent machine: the examples in all three languages, with timing.
# Writes Evaluation records to $OUT (or ./gpu-out). Usage: bash bench/gpu_smoke.sh
set -u
OUT=${OUT:-gpu-out}; mkdir -p "$OUT"
export PYTHONPATH=$PWD/src${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv
python3 -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__, torch.cuda.get_device_name())'
python3 bench/kineto_probe.py 2>&1 | tail -60
for lang in pytorch triton cuda; do
  src=examples/softmax/$lang.py; [ $lang = cuda ] && src=examples/softmax/cuda
  python3 -m gpuarena run level1/softmax $src --device cuda --json > "$OUT/softmax-$lang.json" 2> "$OUT/softmax-$lang.err"
  echo "== $lang: exit $?"; python3 - "$OUT/softmax-$lang.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
print(r["status"], r["reason"][:300], "score", r["score"])
for w in r["workloads"]:
    t, rt = w.get("time") or {}, w.get("reference_time") or {}
    print(f'  {w["name"]:28s} {w["status"]:8s} sol {t.get("median_us")} us (e2e {t.get("e2e_median_us")}) ref {rt.get("median_us")} speedup {w.get("speedup")} n={t.get("samples")} {t.get("method")}')
PY
  tail -5 "$OUT/softmax-$lang.err"
done
