"""Showing an Evaluation record to a person: a table per workload, then the verdict."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from gpuarena.contracts.records import Evaluation, Status, Timing

STYLE = {Status.PASSED: "bold green", Status.SKIPPED: "dim"}


def _fmt_us(us: float) -> str:
    if us >= 1e6:
        return f"{us / 1e6:.3g} s"
    if us >= 1e3:
        return f"{us / 1e3:.3g} ms"
    return f"{us:.3g} µs"


def _fmt_time(t: Timing | None) -> str:
    """Median and the 95% interval's half-width in percent: "38.6 µs ±0.4%"."""
    if t is None:
        return "-"
    half = (t.ci95_high_us - t.ci95_low_us) / 2 / t.median_us * 100 if t.median_us else 0.0
    return f"{_fmt_us(t.median_us)} ±{half:.1f}%"


def _fmt_err(value: float | None) -> str:
    return "-" if value is None else f"{value:.2e}"


def _render_migration(record: Evaluation, console: Console) -> None:
    """A checked port: each golden output's comparison, the verdict and the points."""
    assert record.migration is not None  # render calls this only for a record with a migration
    table = Table("output", "result", "closeness", "summary", header_style="bold")
    for o in record.migration.get("outputs") or []:
        table.add_row(
            o["file"],
            Text("matched", style="green") if o["matched"] else Text("differs", style="bold red"),
            f"{o.get('closeness', 0):.4f}",
            o.get("summary", ""),
        )
    console.print(table)
    style = STYLE.get(record.status, "bold red")
    console.print(Text.assemble("verdict: ", (record.status.value, style), f" — {record.reason}"))
    for note in (record.migration.get("score") or {}).get("notes", []):
        console.print(f"  {note}", highlight=False, soft_wrap=True)


def render(record: Evaluation, console: Console, verbose: bool = False) -> None:
    env = record.environment
    where = f"{env.device_name} ({record.device})" if env else record.device
    console.print(
        f"[bold]{escape(record.problem)}[/] · {escape(record.solution_name)} ({record.language}, "
        f"{record.solution_hash[:12]}) · {escape(where)} · mode {record.mode}",
        markup=True,
    )
    if record.migration is not None:
        _render_migration(record, console)
        return
    columns = ("workload", "status", "abs err", "rel err", "time", "reference", "speedup", "ncu Duration", "SOL")
    rows: list[list[str | Text]] = []
    for w in record.workloads:
        speedup = "-"
        if w.speedup is not None:
            speedup = f"{w.speedup:.2f}x"
            if w.speedup_ci95:
                speedup += f" ({w.speedup_ci95[0]:.2f}-{w.speedup_ci95[1]:.2f})"
            if w.noisy:
                speedup += " noisy"
        sol = "-"
        if w.speed_of_light and (w.speed_of_light.bandwidth_fraction or w.speed_of_light.compute_fraction):
            parts = []
            if w.speed_of_light.bandwidth_fraction:
                parts.append(f"{100 * w.speed_of_light.bandwidth_fraction:.0f}% BW")
            if w.speed_of_light.compute_fraction:
                parts.append(f"{100 * w.speed_of_light.compute_fraction:.0f}% FLOP")
            sol = ", ".join(parts)
        ncu = "-"
        if w.time and w.time.kernel_duration_us is not None:
            ncu = f"{w.time.kernel_duration_us:.2f} µs"
            if w.reference_time and w.reference_time.kernel_duration_us:
                ncu += f" (ref {w.reference_time.kernel_duration_us:.2f})"
        rows.append(
            [
                w.name,
                Text(w.status.value, style=STYLE.get(w.status, "bold red")),
                _fmt_err(w.max_abs_error),
                _fmt_err(w.max_rel_error),
                _fmt_time(w.time),
                _fmt_time(w.reference_time),
                speedup,
                ncu,
                sol,
            ]
        )
    # columns with nothing to say (no timing in test mode, no SOL without peaks) are left out
    keep = [i for i in range(len(columns)) if i < 2 or any(row[i] != "-" for row in rows)]
    table = Table(show_lines=False, header_style="bold")
    for i in keep:  # workload names are what --workload takes: folded, never cut
        table.add_column(
            columns[i],
            justify="left" if i < 2 else "right",
            overflow="fold",
            min_width=max(len(w.name) for w in record.workloads) if i == 0 and record.workloads else None,
        )
    for row in rows:
        table.add_row(*(row[i] for i in keep))
    console.print(table)
    timed = next((w.time for w in record.workloads if w.time), None)
    if timed:
        console.print(
            f"time: median ±half-width of its 95% interval; speedup (95% interval); "
            f"method {timed.method}, reference timed alike, interleaved",
            style="dim",
        )
    if timed and record.environment and record.environment.triton_interpret:
        console.print(
            "TRITON_INTERPRET=1: Triton kernels ran in the interpreter on the CPU; these times check "
            "nothing about a GPU's speed (use it for correctness)",
            style="yellow",
        )
    noisy = [w for w in record.workloads if w.noisy]
    if noisy:
        worst = max(w.round_spread or 0.0 for w in noisy)
        console.print(
            f"noisy: the speed-up varied up to {100 * worst:.0f}% between rounds on {len(noisy)} workload(s) "
            "(a busy machine); the intervals are wide, and a run on a quiet machine is worth more",
            style="yellow",
        )
    ncu_line = _kernel_duration_summary(record)
    if ncu_line:
        console.print(ncu_line, style="dim")
    audit_line = _audit_summary(record)
    if audit_line:
        console.print(audit_line, style="dim")
    verdict = Text(record.status.value, style=STYLE.get(record.status, "bold red"))
    line = Text("verdict: ") + verdict
    if record.reason:
        line += Text(f" — {record.reason}")
    console.print(line)
    if record.score is not None:
        console.print(
            f"score: [bold]{record.score:.3f}[/] (weighted geometric mean of speedups over the reference)", markup=True
        )
    if verbose and record.phases:
        from gpuarena.harness.phases import summary

        console.print(f"phases: {summary(record.duration_s, record.phases)}", style="dim", highlight=False)
    if record.status not in (Status.PASSED,) and record.log.strip():
        tail = "\n".join(record.log.strip().splitlines()[-25:])
        console.print('[dim]log (last lines; the whole log is in --json\'s "log"):[/]', markup=True)
        console.print(tail, markup=False, highlight=False)


def _kernel_duration_summary(record: Evaluation) -> str:
    """One line on the ncu-comparable figure (CUDA): what it is, or why it is missing."""
    if any(w.time and w.time.kernel_duration_us is not None for w in record.workloads):
        return (
            "ncu Duration: gpu__time_duration of each kernel launched alone, summed per call, read in-process "
            "(what ncu reports; ranked by time, the cost on a stream)"
        )
    reasons = sorted({w.kernel_duration_skipped for w in record.workloads if w.kernel_duration_skipped})
    return f"ncu Duration: not measured ({'; '.join(reasons)})" if reasons else ""


def _audit_summary(record: Evaluation) -> str:
    """One line on the device audit (CUDA): checked against the GPU's own counters, or why not."""
    audits = [w.device_audit for w in record.workloads if w.device_audit is not None]
    checked = [a for a in audits if a.observed_us_per_call is not None]
    if checked:
        ratios = [
            a.claimed_us / (a.observed_us_per_call - a.inflation_us)
            for a in checked
            if a.claimed_us and a.observed_us_per_call and a.observed_us_per_call > a.inflation_us
        ]
        lowest = f"; lowest claimed / observed {min(ratios):.2f}" if ratios else ""
        reads = [a.read_mb_per_call for a in checked if a.read_mb_per_call is not None]
        sweeps = (
            f"; cache sweeps read as in the harness alone, within {min(reads):+.1f} MB a call"
            if reads
            else f"; cache sweeps' reads not checked ({checked[0].traffic_skipped})"
            if checked[0].traffic_skipped
            else ""
        )
        return (
            f"device audit: {len(checked)} workload(s) checked against the GPU's own counters "
            f"(claims under {checked[0].margin} x observed are rejected, observed less what the audit adds "
            f"to the reference{lowest}{sweeps})"
        )
    reasons = sorted({a.skipped for a in audits if a.skipped})
    return f"device audit: skipped ({'; '.join(reasons)})" if reasons else ""
