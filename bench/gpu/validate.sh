#!/usr/bin/env bash
# Validation on an NVIDIA machine (the lent GPU machine, through the device tool): the GPU
# tests, the red-team corpus, the examples and the service, with and without worker
# isolation, and the timing-fidelity benchmark. Every step has its own time limit, so one
# hang does not eat the call.
#
# Usage: OUT=folder bash bench/gpu/validate.sh [STEP ...]
#   steps (default: all, in this order):
#     info        nvidia-smi, torch/triton versions
#     probe       one small CUDA run with every worker guard on (the defaults), then with each
#                 off (memory cap, network namespace, own user): a guard that breaks CUDA
#                 here is switched off (exported) for the steps that follow, and noted
#     tests       pytest -m gpu tests/gpu (default settings; TESTS_K: only the tests pytest -k selects)
#     tests-iso   the same with GPUARENA_WORKER_ISOLATION=1
#     interop     pytest -m gpu tests/interop (KernelBench and GPU MODE solutions with inline CUDA)
#     redteam     the red-team corpus on CUDA, streamed (bench/redteam_stream.py)
#     redteam-cases  only the cases named in REDTEAM_CASES (comma-separated)
#     stacks      bench/research/sampled_stacks.py: py-spy's stacks of GPU MODE's vectoradd, cold and warm
#     cmd         CMD: one shell command in this script's environment (research one-offs; T_CMD its limit)
#     peer-gpumode  bench/peer_gpumode.py: GPU MODE's own eval.py (test, leaderboard, benchmark) beside
#                 gpuarena's test and ranked verdicts on the same task and submission (PEER_REPEAT, PEER_ARGS)
#     peer-kernelbench  bench/peer_kernelbench.py: KernelBench's own eval_kernel_against_ref beside gpuarena's
#                 ranked verdict on a few KernelBench problems, the same ModelNew files, each read against ncu
#                 (bench/gpu/carry.sh with KERNELBENCH_REPO first; PEER_KB_REPEAT, PEER_KB_ARGS, T_PEER_KB)
#     peer-flashinfer  bench/peer_flashinfer.py: FlashInfer-Bench's own Benchmark (flashinfer-bench from .whl/,
#                 without flashinfer-python) beside gpuarena's ranked verdict on a few FlashInfer-Trace definitions
#                 written by the bench, the same solutions, each read against ncu (PEER_FI_REPEAT, PEER_FI_ARGS, T_PEER_FI)
#     peer-material  bench/peer_material.py --device cuda on the peers' whole material carried in .gpu/
#                 (bench/gpu/carry.sh with KERNELBENCH_REPO and GPUMODE_REPO first): PM_WHAT (kernelbench
#                 gpumode), PM_GPUS (every GPU of the machine), PM_JOBS (2 a GPU), PM_TIMEOUT (180 s an import),
#                 PM_ARGS (--groups level3,level4, say); T_PM; $OUT/peer-material-*
#     kb-sizes    bench/kernelbench_sizes.py: KernelBench problems at their published sizes, peak GPU memory
#     audit-windows  one cold ranked verdict of GPU MODE's vectoradd (.gpu/reference-kernels), imported
#                 fresh: its phases, and per workload how the audit read its segments (DeviceAudit.windows:
#                 by instants or by marks, and why), its seconds and requests; the record in $OUT/audit-windows.json
#     redteam-part   one part of the corpus, REDTEAM_PART=K/N (every Nth case from the Kth, K from 0:
#                 0/2 and 1/2 are the whole corpus; 2/2 skips case 0), run
#                 alone on the GPU, so with the device audit on: the whole corpus in N calls
#     redteam-iso the GPU-only cases and a few families with GPUARENA_WORKER_ISOLATION=1
#                 (REDTEAM_ISO_ALL=1: the whole corpus)
#     examples    gpuarena run level1/softmax on the softmax examples (EXAMPLES: which, default
#                 pytorch triton cuda jax tvm_ffi)
#     profile     profile mode: its GPU tests, then `gpuarena run --mode profile` on the Triton and CUDA
#                 softmax examples (tables in the log; reports, rooflines and records kept in logs/profile)
#     service     gpuarena serve + users add + submit + leaderboard on this GPU
#     fidelity    bench/fidelity.py (timing vs ncu; FIDELITY_ARGS are passed on)
#     overhead    bench/research/kernel_overhead.py (CUPTI vs ncu per kernel, back-to-back period)
#     gpm         bench/research/gpm_probe.py (does NVML GPM see a worker's GPU time from outside?)
#     pm-cross    bench/research/pm_sampling_cross.py (does CUPTI PM sampling in another process see it?)
#     audit-cost  bench/research/audit_cost.py (the sampler's costs; the softmax examples with the audit off and on)
#     suite       gpuarena suite run on every bundled problem (SUITE_FRAMEWORK: pytorch or torch-compile;
#                 SUITE_BUDGET s a workload; SUITE_BASELINE: a result to score it against; SUITE_TIME_LIMIT: s a
#                 problem at most, then TIMEOUT; SUITE_ARGS: more, e.g. --root dataset/problems --level 2 --gpus 0):
#                 $OUT/suite-*.json
#     suite-warm  torch.compile's caches filled before a timed suite run: WARM_SLOTS (12) suite processes at once on
#                 this one GPU over SUITE_ARGS' problems, their times thrown away (they share the GPU); the
#                 autotuner's picks are removed after, so a timed run makes its own alone. The timed run reads the
#                 caches with SUITE_SHARED_CACHE=1 (a dedicated worker user's caches, docs/environment.md)
#     recheck     gpuarena dataset recheck RECHECK_ROOT (default dataset/problems) --device cuda; the dataset
#                 as it leaves it: $OUT/dataset-rechecked.tgz
#     check       gpuarena check --device cuda (CHECK_ARGS; default: the dataset's levels 2-4) 
#     harvest     the harvester's GPU tests, then gpuarena harvest of real-size models (HARVEST_RUNS: ';'-separated
#                 "MODEL OPTIONS"), bf16, kernel times from the profiler: \$OUT/harvest-K.json, top groups in the summary
#     harvest-jax its GPU test, then gpuarena harvest of JAX models on the GPU (HARVEST_JAX_RUNS: ';'-separated
#                 "MODEL OPTIONS"; default: KerasHub's Llama 2 7B, Mistral 7B and Gemma 2B at their published sizes,
#                 bf16; keras and keras-hub from .whl/; HARVEST_JAX_ONLY=K: the Kth alone, one a call): each
#                 harvest's folder as \$OUT/harvest-jax-K.tgz
#     app-jobs    bench/app_jobs.py: migration checks as a runner's job process runs them (ranked, sandboxed),
#                 the golden of examples/apps/mlp_reference recorded on this GPU
#     latency     bench/eval_latency.py (issue 18's targets: whole `gpuarena run`s timed, with their phases)
#     profile-run every thread of one CUDA run's supervisor, stacks sampled each millisecond
#                 (bench/research/run_stacks.py; PROFILE_ARGS: the run's arguments; default one
#                 workload of the Triton softmax), and the CLI's import times
#     warm        bench/warm_path.py: 100 distinct solutions through one `gpuarena run-many`
#                 (benchmark, one workload), then 30 in test mode (WARM_N, WARM_ARGS)
#     breakdown   bench/research/warm_breakdown.py: a warm-path job's seconds step by step (BREAKDOWN_N, BREAKDOWN_ARGS)
#     timeline    bench/research/cli_timeline.py: a one-shot `gpuarena run`'s wall time outside its record
#                 (TIMELINE_N, TIMELINE_ARGS: the run's arguments)
#     audit-sweep bench/research/audit_sweep_noise.py (the L2 sweep's share of the GPU's counters, and its spread)
#     audit-metrics  the cases in REDTEAM_CASES once per PM metric in AUDIT_METRICS (space-separated;
#                 default sm__cycles_active.max gr__cycles_active.avg), each record's device audit kept
#                 in \$OUT/audit-metric-<metric>.json: which counter bounds claimed device time best
#                 (AUDIT_TAG: a suffix for those names, for a second pass with other settings)
#     round-costs bench/research/round_costs.py: the timed rounds' pieces (marks, twins, requests, checks),
#                 counted and timed in one run (ROUND_ARGS: the run's arguments; default all softmax
#                 workloads of the Triton example with --ncu): \$OUT/round-costs.json
#     small-sets-ab  bench/research/small_sets_ab.py: patched_reply_function and an honest small softmax,
#                 judged with 16 and with 64 sets of the small workload, SMALL_AB_N times each (default 6):
#                 \$OUT/small-sets-ab.json (docs/harness.md: whether 64 sets may be kept)
#     round-costs-va  the same, ranked, on GPU MODE's vectoradd imported (all its tests and benchmarks; ROUND_PREFIX: a
#                 command it runs under, e.g. "taskset -c 0"), each
#                 audit piece also by workload and by what its sampled block holds: \$OUT/round-costs-va.json
#     probes      the profiler and audit probes of stop 40, each result in \$OUT: the range profiler's
#                 first window by its room (profiler_ahead.py), its silent drops beyond the room
#                 (range_room_probe.py), one audit mark by counter-image size (audit_mark_cost.py), a
#                 cache sweep from another process's context (sweep_from_another_context.py)
# Missing Python packages: wheels in .whl/ (carried), installed into /tmp/site first; EXTRA_SITE
# (colon-separated folders) goes before it on PYTHONPATH.
# $OUT receives summary.txt and logs.tgz (all logs; fidelity md/json also at the top).
# Step time limits: T_TESTS, T_REDTEAM, ... (seconds), see below.
set -u
OUT=${OUT:-gpu-out}
mkdir -p "$OUT" && OUT=$(cd "$OUT" && pwd)
# the paths below are the repository's (src, bench/..., .whl/, .gpu/): run from its root, wherever called from
cd "$(dirname "$0")/../.." || exit 1
W=$OUT/logs; mkdir -p "$W"
SUMMARY=$OUT/summary.txt
export PYTHONUNBUFFERED=1 COLUMNS=160
if ls .whl/*.whl >/dev/null 2>&1 && [ ! -e /tmp/site/.gpuarena-installed ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    > "$W/pip.log" 2>&1 && touch /tmp/site/.gpuarena-installed || echo "pip install of .whl failed (see pip.log)" | tee -a "$SUMMARY"
fi
[ -d /tmp/site ] && export PYTHONPATH=/tmp/site:$PWD/src || export PYTHONPATH=$PWD/src
# EXTRA_SITE: folders of packages installed by hand (TileLang, CuTe DSL: see bench/gpu/README.md), searched first
[ -n "${EXTRA_SITE:-}" ] && export PYTHONPATH=$EXTRA_SITE:$PYTHONPATH
# the worker's sandbox: bubblewrap, carried as Debian's package in .gpu/ where the machine lacks it
if ! command -v bwrap >/dev/null 2>&1 && ls .gpu/bubblewrap_*.deb >/dev/null 2>&1; then
  mkdir -p /tmp/bwrap-root && dpkg -x .gpu/bubblewrap_*.deb /tmp/bwrap-root && export PATH=$PATH:/tmp/bwrap-root/usr/bin
fi
chmod -R a+rX /tmp/site 2>/dev/null
# Python's bytecode: packages installed without it (pip --no-compile, PYTHONDONTWRITEBYTECODE in
# an image) are compiled from source in every process, the supervisor's and each worker's: 8 s
# of a run on the lent H100 (docs/harness.md). Compiled once here, as a normal pip install does;
# GPUARENA_COMPILE_BYTECODE=0 leaves the machine as it came.
SITE=$(python3 -c 'import os, torch; print(os.path.dirname(os.path.dirname(torch.__file__)))' 2>/dev/null)
TORCH_PYC=$(python3 -c 'import importlib.util, os, torch; print(os.path.exists(importlib.util.cache_from_source(torch.__file__)))' 2>/dev/null)
echo "bytecode: torch's __init__ compiled: $TORCH_PYC; PYTHON* variables: $(env | grep ^PYTHON | tr '\n' ' ')" | tee -a "$SUMMARY"
if [ "$TORCH_PYC" = False ] && [ "${GPUARENA_COMPILE_BYTECODE:-1}" = 1 ] && [ -n "$SITE" ]; then
  t0=$SECONDS
  python3 -m compileall -q -j 0 "$SITE" /tmp/site "$PWD/src" > "$W/compileall.log" 2>&1
  echo "bytecode: compiled $SITE in $((SECONDS - t0)) s (exit $?)" | tee -a "$SUMMARY"
fi

note() { echo "$*" | tee -a "$SUMMARY"; }
# step NAME LIMIT_S CMD...: run CMD with a time limit, log to $W/NAME.log, note the exit status and time
step() {
  local name=$1 limit=$2; shift 2
  local t0=$SECONDS
  echo "=== $name (limit ${limit}s): $*" | tee -a "$W/$name.log"
  timeout -k 10 "$limit" "$@" >> "$W/$name.log" 2>&1
  local rc=$?
  local verdict=$([ $rc = 0 ] && echo ok || { [ $rc = 124 ] || [ $rc = 137 ] && echo TIMED-OUT || echo FAILED; })
  note "[$name] rc=$rc ($verdict) $((SECONDS - t0))s"
  return $rc
}
last() { grep -E "$2" "$W/$1.log" | tail -${3:-1} | sed "s/^/[$1]   /" | tee -a "$SUMMARY"; }

do_info() {
  {
    date -u +%FT%TZ; uname -r; nproc; free -g | head -2
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv
    python3 -c 'import sys, torch, triton; print(sys.version.split()[0], "torch", torch.__version__, "triton", triton.__version__, torch.cuda.get_device_name(), torch.cuda.get_device_properties(0).multi_processor_count, "SMs")'
    nvcc --version | tail -2; ncu --version | tail -1
    python3 -c 'import fastapi, sqlalchemy, uvicorn, typer, pydantic; print("fastapi", fastapi.__version__, "sqlalchemy", sqlalchemy.__version__, "uvicorn", uvicorn.__version__, "typer", typer.__version__, "pydantic", pydantic.__version__)'
    python3 -m gpuarena.cli version
    echo "repo rev: ${GIT_REV:-unknown}"
    echo "bubblewrap: $(command -v bwrap) $(bwrap --version 2>&1)"; cat /proc/self/cgroup; grep cgroup /proc/self/mountinfo
  } > "$W/info.log" 2>&1
  cat "$W/info.log" | tee -a "$SUMMARY"
}

probe_run() {  # probe_run NAME [VAR=VALUE]: a small CUDA run; ok when it PASSED
  step "probe-$1" "${T_PROBE:-120}" env ${2:-} sh -c 'python3 -m gpuarena.cli run level1/softmax \
    examples/softmax/triton.py --device cuda --workload small-128x4096 --json > "$0"' "$W/probe-$1.json"
  python3 -c 'import json, sys; r = json.load(open(sys.argv[1])); print(r["status"], r["reason"][:200], "network:", r["environment"].get("worker_network"), "rights:", r["environment"].get("worker_rights"))' "$W/probe-$1.json" 2>&1 | sed "s/^/[probe-$1]   /" | tee -a "$SUMMARY"
  grep -q '"status": "PASSED"' "$W/probe-$1.json" 2>/dev/null
}

do_probe() {
  probe_run defaults && return 0
  for knob in GPUARENA_WORKER_MEMORY_LIMIT GPUARENA_WORKER_NETNS GPUARENA_WORKER_ISOLATION; do
    if probe_run "no-$knob" "$knob=0"; then
      export "$knob=0"; note "[probe] $knob=0 from here on: the default broke CUDA on this machine"; return 0
    fi
  done
  note "[probe] no single guard explains the failure"
}

do_tests() {
  local name=$1; shift
  mkdir -p "$W/records-$name"
  GPUARENA_GPU_OUT=$W/records-$name step "$name" "${T_TESTS:-420}" env "$@" \
    python3 -m pytest -m gpu tests/gpu -q -p no:cacheprovider -rfE --timeout 280 --durations=12 ${TESTS_K:+-k "$TESTS_K"}
  last "$name" '(passed|failed|error)' 1
  last "$name" '^(FAILED|ERROR) ' 20
}

do_redteam() {
  local name=$1 limit=$2; shift 2
  step "$name" "$limit" "$@"
  last "$name" 'cases (on|as expected)' 2
  grep -E '^\[ *[0-9]+/[0-9]+\] BAD|UNEXPECTED' "$W/$name.log" | sed "s/^/[$name]   /" | tee -a "$SUMMARY"
}

do_examples() {
  for lang in ${EXAMPLES:-pytorch triton cuda jax tvm_ffi}; do
    local src=examples/softmax/$lang.py; [ -d examples/softmax/$lang ] && src=examples/softmax/$lang
    step "example-$lang" "${T_EXAMPLE:-240}" python3 -m gpuarena.cli run level1/softmax "$src" --device cuda
    last "example-$lang" '(PASSED|FAILED|WRONG|ERROR|REJECTED|TIMEOUT|score|speedup)' 3
  done
}

http_get() { python3 -c 'import sys, urllib.request; print(urllib.request.urlopen(sys.argv[1], timeout=10).read().decode())' "$1"; }

do_service() {
  local L=$W/service.log home=/tmp/gpuarena-home url=http://127.0.0.1:8765
  rm -rf "$home"; mkdir -p "$home"
  export GPUARENA_HOME=$home
  local t0=$SECONDS
  python3 -m gpuarena.cli serve --port 8765 > "$W/service-server.log" 2>&1 &
  local spid=$!
  local up=0
  for _ in $(seq 90); do
    if http_get $url/api/health > "$W/service-health.json" 2>/dev/null; then up=1; break; fi
    kill -0 $spid 2>/dev/null || break
    sleep 1
  done
  if [ $up = 0 ]; then
    note "[service] server did not come up in $((SECONDS - t0))s"; tail -30 "$W/service-server.log" | tee -a "$SUMMARY"
    kill -TERM $spid 2>/dev/null; return 1
  fi
  note "[service] up after $((SECONDS - t0))s: $(cat "$W/service-health.json")"
  local T
  T=$(timeout 60 python3 -m gpuarena.cli users add alice 2>>"$L" | tail -1)
  note "[service] users add alice: token ${#T} characters"
  local KIND
  KIND=${SERVICE_KIND:-}
  [ -n "$KIND" ] || KIND=$(python3 -c 'from gpuarena.host_devices import detect; print([s.kind for s in detect() if s.device != "cpu"][0])' 2>>"$L")
  sleep 3  # the embedded runner registers its device kinds
  note "[service] device kind from nvidia-smi: $KIND; /api/device-kinds: $(http_get $url/api/device-kinds 2>&1 | tr -d '\n')"
  step service-submit "${T_SUBMIT:-300}" python3 -m gpuarena.cli submit level1/softmax examples/softmax/triton.py \
    --device "$KIND" --server $url --token "$T"
  last service-submit '(PASSED|FAILED|WRONG|ERROR|REJECTED|TIMEOUT|score|submission)' 4
  step service-submit-pytorch "${T_SUBMIT:-300}" python3 -m gpuarena.cli submit level1/softmax examples/softmax/pytorch.py \
    --device "$KIND" --server $url --token "$T" --mode benchmark
  last service-submit-pytorch '(PASSED|FAILED|WRONG|ERROR|REJECTED|TIMEOUT|score|submission)' 3
  step service-leaderboard 60 python3 -m gpuarena.cli leaderboard level1/softmax --device "$KIND" --server $url
  cat "$W/service-leaderboard.log" | tail -12 | sed 's/^/[service-leaderboard]   /' | tee -a "$SUMMARY"
  http_get $url/api/health >> "$L" 2>&1
  kill -TERM $spid
  for _ in $(seq 20); do kill -0 $spid 2>/dev/null || break; sleep 1; done
  if kill -0 $spid 2>/dev/null; then note "[service] server still running 20 s after SIGTERM: killed"; kill -KILL $spid
  else wait $spid; note "[service] server stopped on SIGTERM, exit status $?"; fi
  grep -iE 'error|traceback|exception' "$W/service-server.log" | head -10 | sed 's/^/[service-server]   /' | tee -a "$SUMMARY"
  unset GPUARENA_HOME
}

# KerasHub's backbones at their published configs (its presets' config.json: Llama 2 7B, Mistral 7B v0.1, Gemma 2B,
# whose intermediate_dim is twice Hugging Face's intermediate_size), whole depth, prefill of 1 x 2048 tokens
JAX_PUBLISHED="jax:keras:LlamaBackbone,vocabulary_size=32000,num_layers=32,num_query_heads=32,num_key_value_heads=32,hidden_dim=4096,intermediate_dim=11008 --seq 2048"
JAX_PUBLISHED+=";jax:keras:MistralBackbone,vocabulary_size=32000,num_layers=32,num_query_heads=32,num_key_value_heads=8,hidden_dim=4096,intermediate_dim=14336,sliding_window=4096 --seq 2048"
JAX_PUBLISHED+=";jax:keras:GemmaBackbone,vocabulary_size=256000,num_layers=18,num_query_heads=8,num_key_value_heads=1,hidden_dim=2048,intermediate_dim=32768,head_dim=256 --seq 2048"

shared_cache() {  # one compile cache for the suite's workers: a dedicated worker user whose caches the sandbox shares
  SUITE_CACHE=${SUITE_CACHE:-/tmp/gpuarena-suite-cache}
  mkdir -p "$SUITE_CACHE/inductor" "$SUITE_CACHE/triton" && chown -R 61000:61000 "$SUITE_CACHE"
  export GPUARENA_WORKER_UID=61000 TORCHINDUCTOR_CACHE_DIR=$SUITE_CACHE/inductor TRITON_CACHE_DIR=$SUITE_CACHE/triton
  note "suite: compile caches shared in $SUITE_CACHE ($(du -sh "$SUITE_CACHE" | cut -f1)), worker user 61000"
}

do_fidelity() {
  step fidelity "${T_FIDELITY:-420}" python3 bench/fidelity.py --out "$W" ${FIDELITY_ARGS:-}
  tail -12 "$W/fidelity.log" | sed 's/^/[fidelity]   /' | tee -a "$SUMMARY"
  cp "$W"/fidelity-*.md "$W"/fidelity-*.json "$OUT"/ 2>/dev/null
}

steps=("$@"); [ ${#steps[@]} = 0 ] && steps=(info tests tests-iso redteam redteam-iso examples service fidelity)
for s in "${steps[@]}"; do
  case $s in
    info) do_info ;;
    probe) do_probe ;;
    tests) do_tests tests ;;
    tests-iso) do_tests tests-iso GPUARENA_WORKER_ISOLATION=1 ;;
    redteam)
      # REDTEAM_SHARDS runs in parallel, each with its own TMPDIR (the leaked-process records);
      # sticky and world-writable like /tmp: workers run as their own users, and where TMPDIR is
      # not writable to them, their tempfile falls back to the shared /tmp
      n=${REDTEAM_SHARDS:-1}
      # the device audit reads the whole GPU's counters: shards sharing it would see each
      # other's work (and only one can hold the sampler), so parallel shards run without it
      if [ "$n" -gt 1 ]; then export GPUARENA_DEVICE_AUDIT=0; note "redteam: $n shards, device audit off"; fi
      for ((k = 0; k < n; k++)); do
        mkdir -p /tmp/redteam-shard-$k && chmod 1777 /tmp/redteam-shard-$k
        TMPDIR=/tmp/redteam-shard-$k do_redteam redteam-$k "${T_REDTEAM:-560}" python3 bench/redteam_stream.py \
          --device cuda --shard $k/$n --json "$W/redteam-$k.json" > "$W/redteam-$k.summary" 2>&1 &
      done
      wait; cat "$W"/redteam-*.summary ;;
    redteam-iso)
      if [ "${REDTEAM_ISO_ALL:-0}" = 1 ]; then
        do_redteam redteam-iso "${T_REDTEAM:-560}" env GPUARENA_WORKER_ISOLATION=1 python3 bench/redteam_stream.py --device cuda --json "$W/redteam-iso.json"
      else
        do_redteam redteam-iso-gpu "${T_REDTEAM_ISO:-200}" env GPUARENA_WORKER_ISOLATION=1 python3 bench/redteam_stream.py --device cuda --gpu-only --json "$W/redteam-iso-gpu.json"
        for fam in ${REDTEAM_ISO_FAMILIES:-reading tampering processes}; do
          do_redteam "redteam-iso-$fam" "${T_REDTEAM_ISO:-200}" env GPUARENA_WORKER_ISOLATION=1 python3 bench/redteam_stream.py --device cuda --family "$fam"
        done
      fi ;;
    cmd)  # CMD: any shell command, in this script's environment (its packages, PYTHONPATH, bubblewrap)
      step cmd "${T_CMD:-500}" bash -c "$CMD"; tail -60 "$W/cmd.log" | tee -a "$SUMMARY" > /dev/null ;;
    peer-gpumode)  # GPU MODE's eval.py beside gpuarena on one task (bench/gpu/carry.sh with GPUMODE_REPO first)
      step peer-gpumode "${T_PEER:-560}" python3 bench/peer_gpumode.py --reference-kernels .gpu/reference-kernels \
        --repeat "${PEER_REPEAT:-3}" ${PEER_ARGS:-} --out "$OUT"
      tail -30 "$W/peer-gpumode.log" | tee -a "$SUMMARY" > /dev/null ;;
    peer-kernelbench)  # KernelBench's eval beside gpuarena on a few problems (bench/gpu/carry.sh with KERNELBENCH_REPO first)
      step peer-kernelbench "${T_PEER_KB:-540}" python3 bench/peer_kernelbench.py --kernelbench .gpu/kernelbench \
        --repeat "${PEER_KB_REPEAT:-2}" ${PEER_KB_ARGS:-} --out "$OUT"
      tail -30 "$W/peer-kernelbench.log" | tee -a "$SUMMARY" > /dev/null ;;
    peer-flashinfer)  # FlashInfer-Bench's Benchmark beside gpuarena on a few definitions (flashinfer-bench in .whl/: bench/gpu/carry.sh)
      step peer-flashinfer "${T_PEER_FI:-540}" python3 bench/peer_flashinfer.py \
        --repeat "${PEER_FI_REPEAT:-2}" ${PEER_FI_ARGS:-} --out "$OUT"
      tail -30 "$W/peer-flashinfer.log" | tee -a "$SUMMARY" > /dev/null ;;
    peer-material)  # the peers' whole material imported here, shared out among the GPUs
      gpus=${PM_GPUS:-$(nvidia-smi -L | wc -l)}; pm_from=()
      for what in ${PM_WHAT:-kernelbench gpumode}; do
        case $what in
          kernelbench) pm_from+=(--kernelbench .gpu/kernelbench) ;;
          gpumode) pm_from+=(--gpumode .gpu/reference-kernels) ;;
        esac
      done
      pm_limit=${T_PM:-560}; pm_timeout=${PM_TIMEOUT:-180}  # none started past the budget: the report is written in time
      step peer-material "$pm_limit" python3 bench/peer_material.py "${pm_from[@]}" --device cuda \
        --gpus "$gpus" --jobs "${PM_JOBS:-$((2 * gpus))}" --timeout "$pm_timeout" \
        --budget "$((pm_limit - pm_timeout - 40))" ${PM_ARGS:-} \
        --note "$(cat .gpu/kernelbench/REVISION 2>/dev/null | cut -c1-8) (KernelBench), reference-kernels as carried" --out "$OUT"
      tail -12 "$W/peer-material.log" | sed 's/^/[peer-material]   /' | tee -a "$SUMMARY" ;;
    kb-sizes)  # KernelBench problems at their published sizes (6.4 GB tensors), peak GPU memory
      step kb-sizes "${T_KB_SIZES:-500}" python3 bench/kernelbench_sizes.py --out "$OUT"
      tail -5 "$W/kb-sizes.log" | sed 's/^/[kb-sizes]   /' | tee -a "$SUMMARY" ;;
    audit-windows)  # a cold ranked verdict, and how its audit read each workload's segments
      step audit-windows "${T_AUDIT_WINDOWS:-200}" bash -c '
        rm -rf /tmp/audit-windows && python3 -m gpuarena import gpumode .gpu/reference-kernels/problems/pmpp/vectoradd_py \
          -o /tmp/audit-windows --check-device cuda > /dev/null &&
        python3 -m gpuarena run /tmp/audit-windows/level1/vectoradd_py \
          .gpu/reference-kernels/problems/pmpp/vectoradd_py/solutions/correct/submission_triton.py \
          --device cuda --mode ranked --json > "$OUT/audit-windows.json"
        python3 -c "
import json, sys
record = json.load(open(sys.argv[1]))
print(record[\"status\"], record[\"duration_s\"], record[\"phases\"])
for w in record[\"workloads\"]:
    a = w.get(\"device_audit\") or {}
    if a: print(w[\"name\"], w[\"status\"], a.get(\"windows\"), a.get(\"seconds\"), len(a.get(\"observed_us_per_request\") or []))
" "$OUT/audit-windows.json"'
      tail -8 "$W/audit-windows.log" | sed 's/^/[audit-windows]   /' | tee -a "$SUMMARY" ;;
    redteam-cases)  # REDTEAM_CASES=name,name: only these cases, default settings
      do_redteam redteam-cases "${T_REDTEAM:-560}" python3 bench/redteam_stream.py --device cuda --cases "${REDTEAM_CASES:-}" --json "$W/redteam-cases.json" ;;
    redteam-part)
      part=${REDTEAM_PART:-0/1}; tag=redteam-part-${part/\//-of-}
      do_redteam "$tag" "${T_REDTEAM:-560}" python3 bench/redteam_stream.py --device cuda --shard "$part" \
        --json "$OUT/$tag.json" ;;
    audit-metrics)
      AUDIT_TAG=${AUDIT_TAG:-}
      for metric in ${AUDIT_METRICS:-sm__cycles_active.max gr__cycles_active.avg}; do
        do_redteam "audit-metric-$metric$AUDIT_TAG" "${T_REDTEAM:-280}" env GPUARENA_AUDIT_METRIC=$metric python3 bench/redteam_stream.py \
          --device cuda --cases "${REDTEAM_CASES:-}" --json "$OUT/audit-metric-$metric$AUDIT_TAG.json"
      done ;;
    examples) do_examples ;;
    interop)
      step interop "${T_TESTS:-420}" python3 -m pytest -m gpu tests/interop -q -p no:cacheprovider -rfEs --timeout 400
      last interop '(passed|failed|error|skipped)' 1; last interop '^(FAILED|ERROR) ' 10 ;;
    profile)
      mkdir -p "$W/profile"
      GPUARENA_GPU_OUT=$W/profile step profile-tests "${T_TESTS:-420}" python3 -m pytest -m gpu tests/gpu -q -p no:cacheprovider \
        -rfEs -k profile --timeout 400
      last profile-tests '(passed|failed|error|skipped)' 1
      for lang in triton cuda; do
        local_src=examples/softmax/$lang.py; [ $lang = cuda ] && local_src=examples/softmax/cuda
        step "profile-$lang" "${T_EXAMPLE:-300}" python3 -m gpuarena.cli run level1/softmax "$local_src" --device cuda \
          --mode profile --workload llama3-vocab-256 --profile-out "$W/profile/$lang"
        last "profile-$lang" '(PASSED|WRONG|ERROR|TIMEOUT|kernels)' 3
      done ;;
    service) do_service ;;
    fidelity) do_fidelity ;;
    overhead) step overhead "${T_OVERHEAD:-240}" python3 bench/research/kernel_overhead.py --out "$OUT/kernel-overhead.json" ;;
    gpm) step gpm "${T_GPM:-240}" python3 bench/research/gpm_probe.py --out "$OUT/gpm-probe.json"; last gpm 'median' 20 ;;
    pm-cross) step pm-cross "${T_PM:-240}" python3 bench/research/pm_sampling_cross.py --cuda "${CUDA_HOME:-/usr/local/cuda}" \
                --out "$OUT/pm-cross.json"; last pm-cross 'pm_over_cupti' 12 ;;
    audit-cost) step audit-cost "${T_AUDIT_COST:-500}" python3 bench/research/audit_cost.py ${AUDIT_COST_ARGS:-} --out "$OUT/audit-cost.json" ;;
    suite)  # SUITE_FRAMEWORK: pytorch (default) or torch-compile; SUITE_BASELINE: a result to score it against
      fw=${SUITE_FRAMEWORK:-pytorch}
      [ "${SUITE_SHARED_CACHE:-0}" = 1 ] && shared_cache
      step "suite-$fw" "${T_SUITE:-540}" python3 -m gpuarena.cli suite run --device cuda --framework "$fw" \
           --budget "${SUITE_BUDGET:-0.2}" -o "$OUT/suite-$fw.json" ${SUITE_BASELINE:+--baseline "$SUITE_BASELINE"} ${SUITE_TIME_LIMIT:+--time-limit "$SUITE_TIME_LIMIT"} ${SUITE_ARGS:-} ;;
    suite-warm)  # WARM_SLOTS processes on this GPU compile SUITE_ARGS' problems into the shared caches
      shared_cache
      slots=$(python3 -c "print(','.join(['${CUDA_VISIBLE_DEVICES:-0}'] * ${WARM_SLOTS:-12}))")
      step suite-warm "${T_WARM:-400}" env CUDA_VISIBLE_DEVICES="$slots" python3 -m gpuarena.cli suite run --device cuda \
           --framework torch-compile --gpus 0 --budget 0.01 -o "$W/suite-warm.json" ${SUITE_ARGS:-}
      python3 -c "import json, collections, sys; r = json.load(open(sys.argv[1])); print('[suite-warm]  ', dict(collections.Counter(p['status'] for p in r['problems'])))" "$W/suite-warm.json" 2>&1 | tee -a "$SUMMARY"
      note "[suite-warm]   autotuner picks removed: $(find "$SUITE_CACHE/inductor" -name '*.best_config' -print -delete | wc -l); caches $(du -sh "$SUITE_CACHE" | cut -f1)" ;;
    recheck)  # RECHECK_ROOT: the dataset's folder; what it keeps and leaves out comes back in one archive
      step recheck "${T_RECHECK:-400}" python3 -m gpuarena.cli dataset recheck "${RECHECK_ROOT:-dataset/problems}" --device cuda
      last recheck 'kept|left out' 60
      tar czf "$OUT/dataset-rechecked.tgz" "${RECHECK_ROOT:-dataset/problems}" ;;
    check)  # CHECK_ARGS: the problems and filters (default: the dataset's fusions)
      step check "${T_CHECK:-500}" python3 -m gpuarena.cli check --device cuda ${CHECK_ARGS:-dataset/problems --level 2 --level 3 --level 4}
      last check 'passed|failed|problems' 5 ;;
    harvest)  # HARVEST_RUNS: ';'-separated "MODEL OPTIONS" (default: Mistral-7B and Qwen1.5-MoE-A2.7B at full size, prefill)
      [ "${HARVEST_TESTS:-1}" = 1 ] && step harvest-tests "${T_TESTS:-420}" python3 -m pytest -m gpu tests/gpu/test_harvest_gpu.py -q -p no:cacheprovider -rfE
      IFS=';' read -ra runs <<< "${HARVEST_RUNS:-hf:MistralForCausalLM:size=full --seq 2048;hf:Qwen2MoeForCausalLM:size=full --seq 2048}"
      i=0
      for run in "${runs[@]}"; do
        i=$((i + 1))
        step harvest-$i "${T_HARVEST:-400}" python3 -m gpuarena.cli harvest $run --device cuda --dtype bfloat16 -o "$W/harvest-$i"
        [ -f "$W/harvest-$i/harvest.json" ] && cp "$W/harvest-$i/harvest.json" "$OUT/harvest-$i.json" \
          && python3 bench/harvest_top.py "$W/harvest-$i" --n 15 | tee -a "$SUMMARY"
      done ;;
    harvest-jax)  # HARVEST_JAX_RUNS: ';'-separated "MODEL OPTIONS" (default: three KerasHub backbones at published sizes)
      [ "${HARVEST_TESTS:-1}" = 1 ] && step harvest-jax-tests "${T_TESTS:-300}" python3 -m pytest -m gpu tests/gpu/test_jax_harvest_gpu.py -q -p no:cacheprovider -rfE
      IFS=';' read -ra runs <<< "${HARVEST_JAX_RUNS:-$JAX_PUBLISHED}"
      [ -n "${HARVEST_JAX_ONLY:-}" ] && runs=("${runs[$((HARVEST_JAX_ONLY - 1))]}")  # one model a device call
      i=0
      for run in "${runs[@]}"; do
        i=$((i + 1))
        step harvest-jax-$i "${T_HARVEST:-400}" env KERAS_BACKEND=jax python3 -m gpuarena.cli harvest $run --device cuda --dtype bfloat16 -o "$W/harvest-jax-$i"
        [ -f "$W/harvest-jax-$i/harvest.json" ] && tar czf "$OUT/harvest-jax-$i.tgz" -C "$W" "harvest-jax-$i" \
          && python3 bench/harvest_top.py "$W/harvest-jax-$i" --n 15 | tee -a "$SUMMARY"
      done ;;
    app-jobs) step app-jobs "${T_APP_JOBS:-600}" python3 bench/app_jobs.py --device cuda --out "$OUT/app-jobs-cuda.json" ;;
    latency) step latency "${T_LATENCY:-500}" python3 bench/eval_latency.py --device cuda ${LATENCY_ARGS:-} --out "$OUT/eval-latency-cuda.json" ;;
    profile-run)
      args=${PROFILE_ARGS:-level1/softmax examples/softmax/triton.py --device cuda --workload square-8192}
      python3 -m gpuarena.cli run $args --json > /dev/null 2>&1  # builds and caches first, as a contestant's second run
      # every thread's stacks, sampled (cProfile sees one thread, and the CLI leaves through os._exit)
      step profile-run "${T_PROFILE:-300}" python3 bench/research/run_stacks.py --out "$OUT/run-stacks.json" -- $args
      python3 -X importtime -m gpuarena.cli run $args --json > /dev/null 2> "$W/importtime.txt"
      sort -t'|' -k2 -n -r "$W/importtime.txt" | head -40 > "$W/importtime-top.txt"
      last profile-run 'phases' 2 ;;
    warm)
      step warm "${T_WARM:-420}" python3 bench/warm_path.py --device cuda --n "${WARM_N:-100}" --workload square-8192 \
        --mode benchmark ${WARM_ARGS:-} --out "$OUT/warm-path-cuda.json"
      step warm-test "${T_WARM_TEST:-150}" python3 bench/warm_path.py --device cuda --n 30 --workload square-8192 \
        --mode test ${WARM_ARGS:-} --out "$OUT/warm-path-cuda-test.json"
      last warm 'verdicts_per_minute|median_job' 3; last warm-test 'verdicts_per_minute|median_job' 3 ;;
    breakdown)
      step breakdown "${T_BREAKDOWN:-300}" python3 bench/research/warm_breakdown.py --device cuda --n "${BREAKDOWN_N:-12}" \
        --workload square-8192 ${BREAKDOWN_ARGS:-} --out "$OUT/warm-breakdown-cuda.json"
      tail -40 "$W/breakdown.log" | tee -a "$SUMMARY" > /dev/null ;;
    timeline)
      args=${TIMELINE_ARGS:-level1/softmax examples/softmax/triton.py --device cuda --workload square-8192}
      python3 -m gpuarena.cli run $args --json > /dev/null 2>&1  # builds and caches first
      step timeline "${T_TIMELINE:-200}" python3 bench/research/cli_timeline.py --n "${TIMELINE_N:-4}" \
        --out "$OUT/cli-timeline-cuda.json" -- $args
      tail -22 "$W/timeline.log" | tee -a "$SUMMARY" > /dev/null ;;
    audit-sweep) step audit-sweep "${T_AUDIT:-180}" python3 bench/research/audit_sweep_noise.py --out "$OUT/audit-sweep.json" ;;
    small-sets-ab)
      step small-sets-ab "${T_PROBE_LONG:-560}" python3 bench/research/small_sets_ab.py --n "${SMALL_AB_N:-6}" \
        --out "$OUT/small-sets-ab.json"
      tail -30 "$W/small-sets-ab.log" | tee -a "$SUMMARY" > /dev/null ;;
    stacks)  # sampled stacks (py-spy, from .whl/) of a cold ranked run and a warm run-many on GPU MODE's vectoradd
      va=/tmp/stacks-va && rm -rf $va && python3 -m gpuarena import gpumode .gpu/reference-kernels/problems/pmpp/vectoradd_py -o $va > /dev/null
      sub=.gpu/reference-kernels/problems/pmpp/vectoradd_py/solutions/correct/submission_triton.py
      for i in 0 1 2 3; do { echo "# copy $i"; cat $sub; } > /tmp/stacks-warm-$i.py; done
      step stacks-cold "${T_STACKS:-150}" python3 bench/research/sampled_stacks.py --out "$W/stacks/cold" -- \
        python3 -m gpuarena run $va/level1/vectoradd_py $sub --device cuda --mode ranked --json
      step stacks-warm "${T_STACKS:-150}" python3 bench/research/sampled_stacks.py --out "$W/stacks/warm" -- \
        python3 -m gpuarena run-many $va/level1/vectoradd_py /tmp/stacks-warm-{0,1,2,3}.py --device cuda --mode ranked --jsonl
      tar czf "$OUT/stacks.tgz" -C "$W" stacks; tail -45 "$W/stacks-warm.log" | tee -a "$SUMMARY" > /dev/null ;;
    round-costs)
      step round-costs "${T_PROBE:-150}" python3 bench/research/round_costs.py --out "$OUT/round-costs.json" -- \
        ${ROUND_ARGS:-level1/softmax examples/softmax/triton.py --device cuda --ncu}
      tail -32 "$W/round-costs.log" | tee -a "$SUMMARY" > /dev/null ;;
    round-costs-va)  # the same pieces of a ranked verdict on GPU MODE's vectoradd (issue 47's problem), by workload
      va=/tmp/costs-va && rm -rf $va && python3 -m gpuarena import gpumode .gpu/reference-kernels/problems/pmpp/vectoradd_py -o $va > /dev/null
      step round-costs-va "${T_PROBE:-150}" ${ROUND_PREFIX:-} python3 bench/research/round_costs.py ${ROUND_OPTS:-} --mode ranked --out "$OUT/round-costs-va.json" -- \
        $va/level1/vectoradd_py .gpu/reference-kernels/problems/pmpp/vectoradd_py/solutions/correct/submission_triton.py --device cuda
      grep -v " @ " "$W/round-costs-va.log" | tail -60 | tee -a "$SUMMARY" > /dev/null ;;
    probes)
      step profiler-ahead "${T_PROBE:-150}" python3 bench/research/profiler_ahead.py --out "$OUT/profiler-ahead.json"
      step range-room "${T_PROBE:-150}" python3 bench/research/range_room_probe.py --out "$OUT/range-room.json"
      step mark-cost "${T_PROBE:-150}" python3 bench/research/audit_mark_cost.py --out "$OUT/audit-mark-cost.json"
      step sweep-remote "${T_PROBE:-150}" python3 bench/research/sweep_from_another_context.py --out "$OUT/sweep-remote.json"
      tail -20 "$W/sweep-remote.log" | tee -a "$SUMMARY" > /dev/null ;;
    *) note "unknown step $s" ;;
  esac
done
tar czf "$OUT/logs.tgz" -C "$OUT" logs && rm -rf "$W"
echo "=================== summary"; cat "$SUMMARY"
