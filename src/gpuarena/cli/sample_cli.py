"""Samples through a service (docs/dataset.md, "Samples through the service"): `gpuarena sample
submit` (checked on a runner), `sample list`, `sample show`, `sample review` (organizers), and
`gpuarena dataset pull` (the accepted samples' problems as a problem root). All over the API."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from gpuarena.cli.console import err, fail, out
from gpuarena.cli.server import ServerOpt, TokenOpt, server_client
from gpuarena.errors import GpuarenaError

JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON")]


def _print_json(value: object) -> None:
    sys.stdout.write(json.dumps(value, indent=2) + "\n")


def _line(s: dict) -> str:
    score = f", score {s['score']:.2f}x over the canonical reference" if s.get("score") else ""
    review = s["review"] + (f" by {s['reviewer']}" if s.get("reviewer") else "")
    comment = f": {s['review_comment']}" if s.get("review_comment") else ""
    where = f" in {s['contest']}" if s.get("contest") else ""
    return f"sample {s['id']} ({s['problem']}{where}): {s['status']}{score}; review {review}{comment}"


def submit_cmd(
    folder: Annotated[
        Path,
        typer.Argument(
            help="The sample's folder (sample.toml, problem/, prompt.md, first and optimised kernels, report.md)"
        ),
    ],
    contest: Annotated[str | None, typer.Option("--contest", help="Enter it into this ccf-dataset contest")] = None,
    device: Annotated[str, typer.Option("--device", help="Device kind its check runs on, e.g. cpu or H100")] = "cpu",
    wait: Annotated[bool, typer.Option(help="Follow the check until a runner has made it")] = True,
    server: ServerOpt = None,
    token: TokenOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Submit a sample: a runner checks it as `gpuarena sample check` does, then organizers
    review it. Exit 0 when its check is ok (or, with --no-wait, once it is queued)."""
    from gpuarena.dataset.sample_pack import SAMPLES_SLUG, sample_solution

    try:
        solution = sample_solution(folder)  # refused here, naming every fault, before anything is sent
        client = server_client(server, token)
        sample_id = client.submit(SAMPLES_SLUG, solution, device, "ranked", contest=contest)["id"]
        err.print(f"sample {sample_id} queued on {client.server}", highlight=False)
        if wait:
            with err.status(f"sample {sample_id}: checking"):
                for _ in client.watch(sample_id):
                    pass
        shown = client.get(f"/api/samples/{sample_id}")
    except GpuarenaError as exc:
        fail(exc)
        return
    if json_out:
        _print_json(shown)
    else:
        out.print(_line(shown), highlight=False, markup=False)
        for error in (shown.get("report") or {}).get("errors", []):
            out.print(f"  - {error}", highlight=False, markup=False)
    raise typer.Exit(0 if shown["status"] in ("ok", "queued", "checking") else 1)


def list_cmd(
    review: Annotated[str | None, typer.Option(help="pending, accepted or rejected")] = None,
    user: Annotated[str | None, typer.Option(help="Only this user's samples")] = None,
    status: Annotated[str | None, typer.Option(help="queued, checking, ok, duplicate, broken, error")] = None,
    server: ServerOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Samples, newest first, with their check's verdict and review (the review queue:
    --status ok --review pending)."""
    params = {k: v for k, v in (("review", review), ("user", user), ("status", status)) if v}
    try:
        found = server_client(server, None, need_token=False).get("/api/samples", **params)
    except GpuarenaError as exc:
        fail(exc)
        return
    if json_out:
        return _print_json(found)
    table = Table("id", "contributor", "problem", "contest", "check", "score", "review", "comment", header_style="bold")
    for s in found:
        table.add_row(
            str(s["id"]),
            s["contributor"],
            s["problem"],
            s["contest"] or "",
            s["status"],
            f"{s['score']:.2f}" if s["score"] else "",
            s["review"],
            s["review_comment"],
        )
    out.print(table)


def show_cmd(
    sample_id: Annotated[int, typer.Argument(help="The sample's id")],
    server: ServerOpt = None,
    token: TokenOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """One sample: its check's report and review (its files for its contributor and organizers)."""
    try:
        shown = server_client(server, token, need_token=False).get(f"/api/samples/{sample_id}")
    except GpuarenaError as exc:
        fail(exc)
        return
    if json_out:
        return _print_json(shown)
    out.print(_line(shown), highlight=False, markup=False)
    report = shown.get("report") or {}
    for part in ("first", "optimised"):
        if report.get(part):
            result = report[part]
            speed = f", {result['score']:.2f}x over the reference" if result.get("score") else ""
            out.print(f"  {part}: {result['status']}{speed}", highlight=False, markup=False)
    if report.get("score_basis"):
        out.print(f"  score over {report['score_basis']}", highlight=False, markup=False)
    for note in report.get("notes", []):
        out.print(f"  note: {note}", highlight=False, markup=False)
    for dup in report.get("duplicates", []):
        out.print(f"  {'repeats' if dup['whole'] else 'overlaps'} {dup['problem']}", highlight=False, markup=False)
    for error in report.get("errors", []):
        out.print(f"  - {error}", highlight=False, markup=False)


def review_cmd(
    sample_id: Annotated[int, typer.Argument(help="The sample's id")],
    accept: Annotated[bool, typer.Option("--accept", help="Accept it (only a sample whose check was ok)")] = False,
    reject: Annotated[bool, typer.Option("--reject", help="Reject it")] = False,
    comment: Annotated[str, typer.Option(help="Shown to the contributor")] = "",
    server: ServerOpt = None,
    token: TokenOpt = None,
) -> None:
    """Organizers: accept or reject a checked sample, with a comment. Accepted, it joins the
    dataset and counts for the ccf-dataset contest it was entered in."""
    if accept == reject:
        fail(GpuarenaError("give one of --accept or --reject"))
    try:
        shown = (
            server_client(server, token)
            .post(
                f"/api/samples/{sample_id}/review",
                {"decision": "accepted" if accept else "rejected", "comment": comment},
            )
            .json()
        )
    except GpuarenaError as exc:
        fail(exc)
        return
    out.print(_line(shown), highlight=False, markup=False)


def pull_cmd(
    output: Annotated[Path, typer.Option("-o", "--output", help="The folder to write (new, or an earlier pull)")],
    server: ServerOpt = None,
) -> None:
    """Download the samples a service accepted as a folder of problems (level<N>/<name>), for
    `--root` of list, check and suite run; samples.json says where each came from."""
    from gpuarena.dataset.pull import DatasetSample, write_pulled

    try:
        client = server_client(server, None, need_token=False)
        found = [DatasetSample.model_validate(s) for s in client.get("/api/samples/dataset")]
        written = write_pulled(found, output, client.server)
    except GpuarenaError as exc:
        fail(exc)
        return
    out.print(
        f"{len(written)} accepted samples from {client.server} in {output}: `gpuarena check {output}`", highlight=False
    )
