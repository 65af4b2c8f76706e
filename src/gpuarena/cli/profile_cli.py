"""`gpuarena run ... --mode profile`: the run and its table (the harness does the work in
harness/profile/run.py; this module only starts it and shows what it gave)."""

from __future__ import annotations

import sys
from pathlib import Path

import typer
from rich.markup import escape
from rich.table import Table

from gpuarena.cli.console import err, fail, out
from gpuarena.errors import GpuarenaError


def run_profile_command(
    problem: str,
    solution: Path,
    device: str | None,
    workload: list[str] | None,
    timeout: float | None,
    json_out: bool,
    profile_out: Path,
) -> None:
    import gpuarena.solution_readers  # noqa: F401  (registers every format's reader)
    from gpuarena.cli.devices import default_device
    from gpuarena.harness.profile.run import preflight, run_profile
    from gpuarena.problems import resolve_problem
    from gpuarena.solutions import load_solution

    try:
        if workload and len(workload) > 1:
            raise GpuarenaError("profile mode profiles one workload: give --workload once")
        loaded_problem = resolve_problem(problem)
        loaded_solution = load_solution(solution)
        device = device or default_device()
        ncu = preflight(device)
    except GpuarenaError as exc:
        fail(exc)
    limit = timeout or loaded_problem.spec.time_limit_for("benchmark")
    with err.status("starting") as status:
        try:
            record = run_profile(
                loaded_problem,
                loaded_solution,
                device,
                profile_out,
                workload=workload[0] if workload else None,
                timeout_s=limit,
                progress=lambda text: status.update(text),
                ncu=ncu,
            )
        except GpuarenaError as exc:
            fail(exc)
    if json_out:
        sys.stdout.write(record.model_dump_json(indent=2) + "\n")
    else:
        render_profile(record)
    raise typer.Exit(0 if record.status == "PASSED" else 1)


def _num(value: float | None, fmt: str = "{:.1f}") -> str:
    return "-" if value is None else fmt.format(value)


def render_profile(record) -> None:
    """Both sides' kernels in one table, the verdict on the profiled call, and the files."""
    colour = "green" if record.status == "PASSED" else "red"
    out.print(
        f"[bold]{record.problem}[/] {record.workload} on {record.device}: [{colour}]{record.status}[/] "
        f"{escape(record.reason)}",
        highlight=False,
        markup=True,
    )
    table = Table(title=f"Nsight Compute, per kernel ({record.ncu_version})", show_lines=False)
    for column in ("side", "kernel", "µs", "SM %", "mem %", "occ. %", "regs", "smem B", "top stalls", "FLOP/B"):
        table.add_column(column, overflow="fold")
    for side, profile in (("solution", record.solution_profile), ("reference", record.reference_profile)):
        for k in profile.kernels:
            stalls = ", ".join(f"{s.reason} {s.cycles_per_issue:.1f}" for s in k.stalls)
            table.add_row(
                side,
                k.name[:60],
                _num(k.duration_us, "{:.2f}"),
                _num(k.compute_throughput_pct),
                _num(k.memory_throughput_pct),
                _num(k.achieved_occupancy_pct),
                _num(k.registers_per_thread, "{:.0f}"),
                _num(k.shared_memory_per_block_bytes, "{:.0f}"),
                stalls or "-",
                _num(k.arithmetic_intensity, "{:.3g}"),
            )
    out.print(table)
    sol, ref = record.solution_profile.duration_us, record.reference_profile.duration_us
    if sol and ref:
        out.print(f"kernels' time under ncu: solution {sol:.2f} µs, reference {ref:.2f} µs ({ref / sol:.2f}x)")
    for path in (record.solution_profile.report, record.reference_profile.report, record.roofline):
        if path:
            out.print(f"  {path}", highlight=False)
