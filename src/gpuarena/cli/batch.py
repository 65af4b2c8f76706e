"""`gpuarena batch`: submit problems x solutions x device kinds, follow them, write a table.

Every submission carries an idempotency key (the batch id and its index), so a submission
retried after a lost answer, through the same or another API server, is made once. Results
are collected as they finish; the table goes to PREFIX.csv and PREFIX.json.
"""

from __future__ import annotations

import csv
import datetime as dt
import itertools
import json
import secrets
import time
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

import typer

from gpuarena.errors import GpuarenaError

DONE = {
    "PASSED",
    "COMPILE_ERROR",
    "RUNTIME_ERROR",
    "TIMEOUT",
    "WRONG_SHAPE",
    "WRONG_DTYPE",
    "WRONG_VALUES",
    "REJECTED",
    "ERROR",
}
COLUMNS = [
    "index",
    "problem",
    "solution",
    "device_kind",
    "mode",
    "submission_id",
    "status",
    "score",
    "reason",
    "runner",
    "runner_device",
    "attempts",
    "queued_s",
    "finished_at",
]


@dataclass
class BatchSpec:
    problems: list[str]
    solutions: list[Path]
    devices: list[str]
    mode: str = "test"
    repeat: int = 1

    def items(self) -> list[tuple[str, Path, str]]:
        combos = list(itertools.product(self.problems, self.solutions, self.devices))
        return [c for _ in range(self.repeat) for c in combos]


def load_spec(path: Path) -> dict[str, Any]:
    """A batch file: TOML or JSON with problems, solutions (paths relative to the file), devices,
    and optionally mode and repeat."""
    try:
        text = path.read_text()
        data = json.loads(text) if path.suffix == ".json" else tomllib.loads(text)
    except OSError as exc:
        raise GpuarenaError(f"{path}: {exc.strerror}") from None
    except (ValueError, tomllib.TOMLDecodeError) as exc:
        raise GpuarenaError(f"{path}: not valid {'JSON' if path.suffix == '.json' else 'TOML'}: {exc}") from None
    unknown = set(data) - {"problems", "solutions", "devices", "mode", "repeat"}
    if unknown:
        raise GpuarenaError(
            f"{path}: unknown field {sorted(unknown)[0]!r} (fields: problems, solutions, devices, mode, repeat)"
        )
    for key in ("problems", "solutions", "devices"):
        if key in data and not (isinstance(data[key], list) and all(isinstance(x, str) for x in data[key])):
            raise GpuarenaError(f"{path}: {key} must be a list of strings")
    if "solutions" in data:
        data["solutions"] = [(path.parent / s) for s in data["solutions"]]
    return data


@dataclass
class Row:
    index: int
    problem: str
    solution: str
    device_kind: str
    mode: str
    submission_id: int | None = None
    status: str = "UNSUBMITTED"
    score: float | None = None
    reason: str = ""
    runner: str | None = None
    runner_device: str | None = None
    attempts: int = 0
    queued_s: float | None = None
    finished_at: str | None = None
    evaluation: dict[str, Any] | None = field(default=None, repr=False)

    @property
    def done(self) -> bool:
        return self.status in DONE or self.status == "REFUSED"


def _retrying(call: Callable[[], Any], deadline: float, what: str) -> Any:
    """call() until it works: through unreachable servers (the client moves to the next one),
    5xx answers and rate limits (waiting as long as the server says)."""
    from gpuarena.client import ApiError

    delay = 0.5
    while True:
        try:
            return call()
        except ApiError as exc:
            if exc.status is not None and exc.status < 500 and exc.status != 429:
                raise
            if time.monotonic() > deadline:
                raise GpuarenaError(f"{what}: gave up at the deadline: {exc}") from None
            wait = exc.retry_after if exc.status == 429 and exc.retry_after else delay
            time.sleep(min(wait, max(0.0, deadline - time.monotonic())) + 0.05)
            delay = min(delay * 2, 5.0)


def run_batch(
    client,
    spec: BatchSpec,
    timeout_s: float = 3600.0,
    poll_s: float = 1.0,
    progress: Callable[[list[Row]], None] | None = None,
    batch_id: str | None = None,
) -> tuple[str, list[Row]]:
    """Submit every item, then follow them until all are done or timeout_s passes."""
    import gpuarena.solution_readers  # noqa: F401  (registers every format's reader)
    from gpuarena.client import ApiError
    from gpuarena.solutions import load_solution

    batch_id = batch_id or secrets.token_hex(6)
    deadline = time.monotonic() + timeout_s
    loaded = {path: load_solution(path) for path in dict.fromkeys(spec.solutions)}
    rows = [
        Row(index=i, problem=p, solution=str(s), device_kind=d, mode=spec.mode)
        for i, (p, s, d) in enumerate(spec.items())
    ]
    for row, (_, path, _) in zip(rows, spec.items()):
        try:
            made = _retrying(
                lambda: client.submit(
                    row.problem, loaded[path], row.device_kind, row.mode, client_key=f"batch-{batch_id}-{row.index}"
                ),
                deadline,
                f"submitting item {row.index}",
            )
        except ApiError as exc:  # refused (unknown problem or device kind, ...): record it, go on
            row.status, row.reason = "REFUSED", str(exc)
            continue
        row.submission_id, row.status = made["id"], made["status"]
        if progress:
            progress(rows)
    waiting = {row.submission_id: row for row in rows if row.submission_id is not None and not row.done}
    while waiting and time.monotonic() < deadline:
        try:
            current = _retrying(lambda: client.submissions(sorted(waiting)), deadline, "following the batch")
        except GpuarenaError:
            break
        for item in current:
            found = waiting.get(item["id"])
            if found is None:
                continue
            row = found
            row.status = item["status"]
            if item["done"]:
                try:
                    detail = _retrying(lambda: client.submission(row.submission_id), deadline, "reading a result")
                except GpuarenaError:
                    break
                row.score, row.reason = detail["score"], detail["reason"]
                row.runner, row.runner_device, row.attempts = (
                    detail.get("runner"),
                    detail.get("runner_device"),
                    detail.get("attempts", 0),
                )
                row.evaluation, row.finished_at = detail.get("evaluation"), detail["finished_at"]
                created = dt.datetime.fromisoformat(detail["created_at"])
                if detail["finished_at"]:
                    row.queued_s = round(
                        (dt.datetime.fromisoformat(detail["finished_at"]) - created).total_seconds(), 3
                    )
                assert row.submission_id is not None  # waiting holds only submitted rows
                del waiting[row.submission_id]
        if progress:
            progress(rows)
        if waiting:
            time.sleep(poll_s)
    return batch_id, rows


def write_results(rows: list[Row], prefix: Path, meta: dict[str, Any]) -> tuple[Path, Path]:
    prefix.parent.mkdir(parents=True, exist_ok=True)
    csv_path, json_path = prefix.with_name(prefix.name + ".csv"), prefix.with_name(prefix.name + ".json")
    with open(csv_path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=COLUMNS)
        writer.writeheader()
        for row in rows:
            writer.writerow({c: getattr(row, c) for c in COLUMNS})
    counts: dict[str, int] = {}
    for row in rows:
        counts[row.status] = counts.get(row.status, 0) + 1
    json_path.write_text(
        json.dumps(
            {
                **meta,
                "summary": counts,
                "rows": [{**{c: getattr(row, c) for c in COLUMNS}, "evaluation": row.evaluation} for row in rows],
            },
            indent=1,
        )
    )
    return csv_path, json_path


def batch(
    problem: Annotated[
        list[str] | None, typer.Option("--problem", help="Problem id on the server (repeatable)")
    ] = None,
    solution: Annotated[
        list[Path] | None, typer.Option("--solution", help="A solution file, folder or pack (repeatable)")
    ] = None,
    device: Annotated[
        list[str] | None, typer.Option("--device", help="Device kind, e.g. cpu or H100 (repeatable)")
    ] = None,
    file: Annotated[
        Path | None, typer.Option("--file", help="A TOML or JSON file with problems, solutions, devices, mode, repeat")
    ] = None,
    mode: Annotated[str | None, typer.Option(help="test, benchmark or ranked [default: test]")] = None,
    repeat: Annotated[int | None, typer.Option(help="Submit every combination this many times [default: 1]")] = None,
    out_prefix: Annotated[
        Path | None, typer.Option("--out", help="Write PREFIX.csv and PREFIX.json [default: batch-<id>]")
    ] = None,
    timeout: Annotated[float, typer.Option(help="Give up following after this many seconds")] = 3600.0,
    server: Annotated[
        str | None,
        typer.Option(
            "--server", envvar="GPUARENA_SERVER", help="Server URL, or several API servers separated by commas"
        ),
    ] = None,
    token: Annotated[str | None, typer.Option("--token", envvar="GPUARENA_TOKEN", help="API token")] = None,
) -> None:
    """Submit every problem x solution x device kind, follow them with a progress bar, and write
    the results as a table (CSV and JSON); exit 0 only when every submission ended with a verdict."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from gpuarena.cli.console import err, fail, out
    from gpuarena.cli.server import server_client

    try:
        data = load_spec(file) if file else {}
        spec = BatchSpec(
            problems=list(problem or data.get("problems") or []),
            solutions=list(solution or data.get("solutions") or []),
            devices=list(device or data.get("devices") or []),
            mode=mode or data.get("mode", "test"),
            repeat=repeat or int(data.get("repeat", 1)),
        )
        for name, values in (("--problem", spec.problems), ("--solution", spec.solutions), ("--device", spec.devices)):
            if not values:
                raise GpuarenaError(f"no {name[2:]}s: give {name} (repeatable) or list them in --file")
        if spec.mode not in ("test", "benchmark", "ranked"):
            raise GpuarenaError(f"--mode must be test, benchmark or ranked, not {spec.mode!r}")
        if spec.repeat < 1:
            raise GpuarenaError("--repeat must be at least 1")
        client = server_client(server, token)
        started = dt.datetime.now(dt.UTC)
        t0 = time.monotonic()
        total = len(spec.items())
        with Progress(
            TextColumn("[bold]batch"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.description}"),
            TimeElapsedColumn(),
            console=err,
            transient=False,
        ) as bar:
            task = bar.add_task("submitting", total=total)

            def show(rows: list[Row]) -> None:
                submitted = sum(r.submission_id is not None for r in rows)
                finished = [r for r in rows if r.done]
                passed = sum(r.status == "PASSED" for r in finished)
                running = sum(r.status == "RUNNING" for r in rows)
                text = (
                    f"submitted {submitted}"
                    if submitted < total
                    else f"running {running}, passed {passed}, other {len(finished) - passed}"
                )
                bar.update(task, completed=len(finished), description=text)

            batch_id, rows = run_batch(client, spec, timeout_s=timeout, progress=show)
        elapsed = time.monotonic() - t0
        prefix = out_prefix or Path(f"batch-{batch_id}")
        meta = {
            "batch": batch_id,
            "servers": client.servers,
            "started_at": started.isoformat(),
            "elapsed_s": round(elapsed, 3),
            "jobs": total,
            "mode": spec.mode,
        }
        csv_path, json_path = write_results(rows, prefix, meta)
    except GpuarenaError as exc:
        fail(exc)
    counts: dict[str, int] = {}
    for row in rows:
        counts[row.status] = counts.get(row.status, 0) + 1
    out.print(
        f"batch {batch_id}: {total} submissions in {elapsed:.1f} s: "
        + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())),
        highlight=False,
    )
    out.print(f"results: {csv_path} and {json_path}", highlight=False)
    unfinished = [r for r in rows if not r.done or r.status in ("ERROR", "REFUSED")]
    raise typer.Exit(0 if not unfinished else 1)
