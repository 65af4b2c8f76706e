"""Does CUPTI PM sampling in one process see the GPU work of another? (issue 6, the forged
timing reply on CUDA: the supervisor needs a view of the device that the worker cannot edit.)

cupti-python 13.4 could not configure PM sampling on the lent H100 (driver 580, CUDA 13.0:
every profiler-host call failed with ERROR_INVALID_PARAMETER; the probe is in commit 2839583), but
the CUDA toolkit's own CUPTI sample (extras/CUPTI/samples/pm_sampling) works there. This
script builds that sample with its own workload replaced by "wait for a line on stdin", so it
samples gr__cycles_active while a separate torch process (bench/research/gpm_probe.py's child) runs
a block of calls and reports the block's CUPTI busy time. The sampling interval is long
enough that a block fits in the 50 samples the sample prints; busy time = the sum over samples
of active / elapsed cycles x the sample's span.

    python3 bench/research/pm_sampling_cross.py --out pm-cross.json     # on an NVIDIA GPU with the CUDA toolkit
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
BLOCKS = [
    ("add-16M", 200, 50),
    ("matmul-4096", 20, 50),
    ("matmul-4096", 60, 50),
    ("add-64K", 500, 20),
    ("softmax-64x1000", 500, 20),
    ("tiny-x10", 100, 20),
    ("idle", 1, 20000),
]
METRICS = ["gr__cycles_elapsed.max", "gr__cycles_active.avg", "sm__cycles_active.max", "sm__cycles_active.avg"]
"""Elapsed cycles first; each of the others gives a busy time. gr__cycles_active counts the
front end's work too (about 2 µs more per kernel than CUPTI on an H100); sm__cycles_active.max,
the busiest SM's cycles with a warp resident, should stay at or under the kernels' own time."""
WAIT = """    printf("sampling\\n"); fflush(stdout);
    { std::string line; std::getline(std::cin, line); }
"""


def build(cuda: Path, work: Path) -> Path:
    """The toolkit's PM sampling sample, its workload loop replaced by a wait on stdin."""
    shutil.copytree(cuda / "extras/CUPTI/samples", work / "samples")
    source = work / "samples/pm_sampling/pm_sampling.cu"
    text = source.read_text()
    start = text.index("    const size_t NUM_OF_ITERATIONS")
    end = text.index("    // 5. Stop the PM sampling")
    source.write_text("#include <iostream>\n#include <string>\n" + text[:start] + WAIT + text[end:])
    subprocess.run(["make", f"CUDA_INSTALL_PATH={cuda}", "-j8"], cwd=source.parent, check=True, capture_output=True)
    return source.parent / "pm_sampling"


def parse(output: str) -> dict:
    """Busy time (ms) per activity metric from the printed samples, skipping sample 0 (it
    spans the set-up)."""
    samples = []
    for block in re.split(r"Sample Index: \d+", output)[1:]:
        stamps = re.search(r"Start: \[(\d+)\]\s*End: \[(\d+)\]", block)
        values = dict(re.findall(r"^(\w+\.\w+)\s+([\d.]+)\s*$", block, re.M))
        if stamps and METRICS[0] in values:
            samples.append((int(stamps.group(1)), int(stamps.group(2)), values))
    busy = {m: 0.0 for m in METRICS[1:]}
    span = 0.0
    for start, end, values in samples[1:]:
        width = (end - start) / 1e6
        span += width
        elapsed = float(values[METRICS[0]])
        for m in busy:
            if elapsed > 0 and m in values:
                busy[m] += min(float(values[m]) / elapsed, 1.0) * width
    total = re.search(r"Total num of Samples: (\d+)", output)
    return {
        "busy_ms": {m: round(v, 4) for m, v in busy.items()},
        "printed_samples": len(samples),
        "sampled_ms": round(span, 3),
        "total_samples": int(total.group(1)) if total else None,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cuda", type=Path, default=Path(os.environ.get("CUDA_HOME", "/usr/local/cuda")))
    parser.add_argument("--interval", type=int, default=2_000_000, help="sampling interval (the sample's -i)")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--work", type=Path, default=Path("/tmp/pm-cross"))
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    shutil.rmtree(args.work, ignore_errors=True)
    sampler = build(args.cuda, args.work)
    env = dict(
        os.environ,
        LD_LIBRARY_PATH=f"{args.cuda}/extras/CUPTI/lib64:{args.cuda}/lib64:" + os.environ.get("LD_LIBRARY_PATH", ""),
        PYTHONUNBUFFERED="1",
    )
    child = subprocess.Popen(
        [sys.executable, str(HERE / "gpm_probe.py"), "--child"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert child.stdin and child.stdout
    rows = []
    try:
        for op, _, pause_us in BLOCKS:  # warm-up: the profiler's and each op's first start take seconds
            child.stdin.write(f"{op} 2 {pause_us}\ngo\n")
            child.stdin.flush()
            assert child.stdout.readline().strip() == "ready"
            child.stdout.readline()
        for _ in range(args.repeats):
            for op, calls, pause_us in BLOCKS:
                child.stdin.write(f"{op} {calls} {pause_us}\n")
                child.stdin.flush()
                assert child.stdout.readline().strip() == "ready"
                pm = subprocess.Popen(
                    [str(sampler), "-d", "0", "-i", str(args.interval), "-s", "5000", "-m", ",".join(METRICS)],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT,
                    text=True,
                    env=env,
                )
                assert pm.stdin and pm.stdout
                lines = []
                for line in pm.stdout:
                    lines.append(line)
                    if line.strip() == "sampling":
                        break
                else:
                    raise SystemExit("the sampler did not start:\n" + "".join(lines))
                child.stdin.write("go\n")
                child.stdin.flush()
                report = json.loads(child.stdout.readline())
                output, _ = pm.communicate("\n", timeout=120)
                seen = parse(output)
                cupti = report["cupti_busy_ms"]
                row = {
                    "op": op,
                    "calls": calls,
                    "pause_us": pause_us,
                    "cupti_busy_ms": round(cupti, 4),
                    **seen,
                    "over_cupti": {m: round(v / cupti, 4) for m, v in seen["busy_ms"].items()} if cupti else None,
                }
                print(json.dumps(row), flush=True)
                rows.append(row)
    finally:
        child.stdin.close()
        child.wait(timeout=60)
    if args.out:
        args.out.write_text(
            json.dumps({"interval": args.interval, "rows": rows, "sampler_tail": output[-3000:]}, indent=1) + "\n"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
