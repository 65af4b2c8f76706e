"""Nsight Compute's report, read: what profile mode asks ncu to collect, and the per-kernel
summary it gives back (duration, throughput as a share of peak, occupancy, launch resources,
top stall reasons, and the kernel's point on the device's roofline).

ncu writes a binary report (`.ncu-rep`); `ncu --import REPORT --page raw --csv --print-units
base` prints one row per profiled kernel with every collected metric, in base units (ns,
bytes), which is what `parse_raw_csv` reads. The sections asked for are ncu's own (what its
UI shows); the floating-point instruction counters are asked for by name, since the roofline
needs their sums. A metric that a GPU or ncu version does not give is left out (None)."""

from __future__ import annotations

import csv
import io
import re

from gpuarena.contracts.profile_record import KernelProfile, Stall

RANGE = "gpuarena_profile"
"""The NVTX range around the profiled call (ncu --nvtx --nvtx-include RANGE/)."""
SECTIONS = ("SpeedOfLight", "Occupancy", "LaunchStats", "WarpStateStats")
DURATION = "gpu__time_duration.sum"
SM_THROUGHPUT = "sm__throughput.avg.pct_of_peak_sustained_elapsed"
MEMORY_THROUGHPUT = "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed"
OCCUPANCY = "sm__warps_active.avg.pct_of_peak_sustained_active"
REGISTERS = "launch__registers_per_thread"
SHARED_STATIC = "launch__shared_mem_per_block_static"
SHARED_DYNAMIC = "launch__shared_mem_per_block_dynamic"
BLOCK_SIZE = "launch__block_size"
GRID_SIZE = "launch__grid_size"
DRAM_BYTES = "dram__bytes.sum"
FLOP_COUNTERS = {
    f"smsp__sass_thread_inst_executed_op_{p}{op}_pred_on.sum": (2 if op == "fma" else 1)
    for p in "hfd"
    for op in ("add", "mul", "fma")
}
"""Thread-level FP16/FP32/FP64 instructions of the FMA pipes, with the FLOPs each is worth.
Tensor-core work is not among them: a matrix kernel's point sits below its real rate."""
METRICS = (DRAM_BYTES, *FLOP_COUNTERS)
_STALL = re.compile(r"^smsp__average_warps?_(?:latency_)?issue_stalled_([a-z0-9_]+?)(?:_per_issue_active)?\.ratio$")
TOP_STALLS = 3


class NcuError(RuntimeError):
    """ncu's output could not be read as a raw CSV page."""


def _number(text: str) -> float | None:
    text = text.strip().replace(",", "")
    if not text or text.lower() in ("n/a", "nan"):
        return None
    try:
        return float(text)
    except ValueError:
        return None


_TIME_UNITS = {"nsecond": 1e-3, "ns": 1e-3, "usecond": 1.0, "us": 1.0, "msecond": 1e3, "ms": 1e3, "second": 1e6}
_BYTE_UNITS = {"byte": 1.0, "kbyte": 1e3, "mbyte": 1e6, "gbyte": 1e9, "kib": 1024.0, "mib": 1024.0**2, "gib": 1024.0**3}


def _scaled(value: float | None, unit: str, table: dict[str, float]) -> float | None:
    if value is None:
        return None
    return value * table.get(unit.strip().lower(), 1.0)


def parse_raw_csv(text: str) -> list[KernelProfile]:
    """Kernels, in launch order, from `ncu --import ... --page raw --csv` (ncu's `==PROF==`
    and `==WARNING==` lines and a units row are allowed around the table)."""
    lines = [line for line in text.splitlines() if line.startswith('"')]
    if not lines:
        raise NcuError("ncu printed no CSV rows: " + (text.strip().splitlines() or ["(nothing)"])[-1][:300])
    rows = list(csv.reader(io.StringIO("\n".join(lines))))
    header, body = rows[0], rows[1:]
    if "Kernel Name" not in header:
        raise NcuError(f"no 'Kernel Name' column in ncu's CSV header: {header[:8]}")
    units: dict[str, str] = {}
    if body and not body[0][header.index("ID")].strip().isdigit():  # the units row
        units = dict(zip(header, body[0]))
        body = body[1:]
    return [_kernel(dict(zip(header, row)), units) for row in body if len(row) == len(header)]


def _kernel(row: dict[str, str], units: dict[str, str]) -> KernelProfile:
    def metric(name: str) -> float | None:
        return _number(row[name]) if name in row else None

    flops = None
    counted = [(metric(name), worth) for name, worth in FLOP_COUNTERS.items() if name in row]
    if counted:
        flops = sum((value or 0.0) * worth for value, worth in counted)
    static, dynamic = metric(SHARED_STATIC), metric(SHARED_DYNAMIC)
    stalls = []
    for name, value in row.items():
        found = _STALL.match(name)
        number = _number(value)
        if found and number:
            stalls.append(Stall(reason=found.group(1), cycles_per_issue=number))
    stalls.sort(key=lambda s: -s.cycles_per_issue)
    return KernelProfile(
        name=row["Kernel Name"],
        grid=row.get("Grid Size", "") or _text(metric(GRID_SIZE)),
        block=row.get("Block Size", "") or _text(metric(BLOCK_SIZE)),
        duration_us=_scaled(metric(DURATION), units.get(DURATION, "nsecond"), _TIME_UNITS),
        compute_throughput_pct=metric(SM_THROUGHPUT),
        memory_throughput_pct=metric(MEMORY_THROUGHPUT),
        achieved_occupancy_pct=metric(OCCUPANCY),
        registers_per_thread=metric(REGISTERS),
        shared_memory_per_block_bytes=None if static is None and dynamic is None else (static or 0) + (dynamic or 0),
        dram_bytes=_scaled(metric(DRAM_BYTES), units.get(DRAM_BYTES, "byte"), _BYTE_UNITS),
        flops=flops,
        stalls=stalls[:TOP_STALLS],
    )


def _text(value: float | None) -> str:
    return "" if value is None else f"{value:g}"


def profile_command(ncu: str, report_base: str, target: list[str]) -> list[str]:
    """ncu's command line for the call inside RANGE of `target`: ncu's own sections, the FLOP
    counters, a report file (REPORT_BASE.ncu-rep)."""
    command = [
        ncu,
        "--target-processes",
        "all",
        "--nvtx",
        "--nvtx-include",
        f"{RANGE}/",
        "--export",
        report_base,
        "--force-overwrite",
    ]
    for section in SECTIONS:
        command += ["--section", section]
    command += ["--metrics", ",".join(METRICS)]
    return command + target


def import_command(ncu: str, report: str) -> list[str]:
    return [ncu, "--import", report, "--page", "raw", "--csv", "--print-units", "base"]
