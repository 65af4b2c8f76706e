"""`gpuarena contest ...`: create contests from a file, list them, move their end, read
standings (table, JSON or CSV), the entries and review queue, reviews, and similarity pairs.
All over the API."""

from __future__ import annotations

import datetime as dt
import json
import re
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from gpuarena.cli.console import err, fail, out
from gpuarena.cli.server import ServerOpt, TokenOpt, server_client
from gpuarena.errors import GpuarenaError

contest_app = typer.Typer(no_args_is_help=True, help="Contests: create, list, standings, review (organizers).")

BONUS_HELP = "A bonus item (repeat): code_quality, performance_optimisation, write_up, llm_prompt"


def read_contest_file(path: Path) -> dict:
    """A contest file (TOML or JSON), checked here first so that mistakes are named before
    anything is sent."""
    from gpuarena.service.contest_schemas import parse_contest

    try:
        text = path.read_text()
    except OSError as exc:
        raise GpuarenaError(f"cannot read {path}: {exc.strerror}") from None
    return parse_contest(text, "json" if path.suffix == ".json" else "toml", str(path)).model_dump(mode="json")


def _print_json(value: object) -> None:
    sys.stdout.write(json.dumps(value, indent=2) + "\n")


@contest_app.command("create")
def create(
    file: Annotated[
        Path,
        typer.Argument(
            help="contest.toml (or .json): slug, title, start, end, problems, "
            "device_kinds, [rule] ... (docs/contests.md)"
        ),
    ],
    server: ServerOpt = None,
    token: TokenOpt = None,
) -> None:
    """Create a contest from its file (organisers and admins)."""
    try:
        made = server_client(server, token).post("/api/contests", read_contest_file(file)).json()
    except GpuarenaError as exc:
        fail(exc)
    spec = made["spec"]
    out.print(
        f"contest {spec['slug']} created: {spec['rule']['name']}, {spec['start']} to {spec['end']}, "
        f"{len(spec['problems'])} problem(s) on {', '.join(spec['device_kinds'])}; organizers: "
        f"{', '.join(made['organizers'])}",
        highlight=False,
    )
    for warning in made.get("warnings", []):
        err.print(f"warning: {warning}", highlight=False)


@contest_app.command("list")
def list_contests(
    server: ServerOpt = None, json_out: Annotated[bool, typer.Option("--json", help="Print JSON")] = False
) -> None:
    """Every contest, newest first."""
    try:
        found = server_client(server, None, need_token=False).get("/api/contests")
    except GpuarenaError as exc:
        fail(exc)
    if json_out:
        return _print_json(found)
    table = Table("slug", "title", "rule", "phase", "start", "end", "entries", header_style="bold")
    for c in found:
        s = c["spec"]
        table.add_row(
            s["slug"],
            s["title"],
            s["rule"]["name"],
            c["phase"],
            s["start"][:16],
            s["end"][:16],
            str(c["entries_count"]),
        )
    out.print(table)
    if not found:
        out.print("no contests yet (organisers: `gpuarena contest create contest.toml`)")


@contest_app.command("show")
def show(
    slug: Annotated[str, typer.Argument(help="The contest's slug")],
    server: ServerOpt = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print JSON")] = False,
) -> None:
    """A contest's configuration and where it stands."""
    try:
        found = server_client(server, None, need_token=False).get(f"/api/contests/{slug}")
    except GpuarenaError as exc:
        fail(exc)
    if json_out:
        return _print_json(found)
    s = found["spec"]
    rule = ", ".join(f"{k}={v}" for k, v in s["rule"].items() if k != "name")
    for line in (
        f"{s['slug']}: {s['title']} ({found['phase']})",
        f"window: {s['start']} to {s['end']}"
        + (f", public standings frozen {s['freeze_hours']:g} h before the end" if s["freeze_hours"] else ""),
        f"rule: {s['rule']['name']}" + (f" ({rule})" if rule else ""),
        f"problems: {', '.join(s['problems'])}",
        f"device kinds: {', '.join(s['device_kinds'])}",
        f"entries: {s['entries']}"
        + (f", at most {s['daily_submission_limit']} a day" if s["daily_submission_limit"] else ""),
        f"organizers: {', '.join(found['organizers'])}",
    ):
        out.print(line, highlight=False)


WHEN_HELP = 'An ISO 8601 time (UTC when naive), "now", or a time from now: +90s, +10m, +2h, +1d'


def when(text: str) -> str:
    """A time as the schedule API takes it: "now" stays the server's now; +10m is read here."""
    if text == "now":
        return text
    relative = re.fullmatch(r"\+(\d+(?:\.\d+)?)([smhd])", text)
    if relative:
        unit = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days"}[relative.group(2)]
        moment = dt.datetime.now(dt.UTC) + dt.timedelta(**{unit: float(relative.group(1))})
        return moment.isoformat()
    try:
        return dt.datetime.fromisoformat(text.replace("Z", "+00:00")).isoformat()
    except ValueError:
        raise typer.BadParameter(f"{text!r} is not a time: {WHEN_HELP}") from None


@contest_app.command("reschedule")
def reschedule(
    slug: Annotated[str, typer.Argument(help="The contest's slug")],
    end: Annotated[str, typer.Option("--end", help=f"The new end. {WHEN_HELP}")],
    freeze_from: Annotated[
        str | None,
        typer.Option("--freeze-from", help=f"Where the freeze begins (left out: it keeps its length). {WHEN_HELP}"),
    ] = None,
    server: ServerOpt = None,
    token: TokenOpt = None,
) -> None:
    """Organizers: move a contest's end (extend it, or end it now) and its freeze; the results
    its freeze holds show at the new end."""
    body = {"end": when(end), "freeze_from": None if freeze_from is None else when(freeze_from)}
    try:
        moved = server_client(server, token).put(f"/api/contests/{slug}/schedule", body).json()
    except GpuarenaError as exc:
        fail(exc)
    spec = moved["spec"]
    frozen = f", frozen {spec['freeze_hours'] * 60:.4g} min before it" if spec["freeze_hours"] else ""
    out.print(f"{slug} ({moved['phase']}) now ends {spec['end']}{frozen}", highlight=False)


@contest_app.command("standings")
def standings(
    slug: Annotated[str, typer.Argument(help="The contest's slug")],
    server: ServerOpt = None,
    token: TokenOpt = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print JSON")] = False,
    csv_out: Annotated[bool, typer.Option("--csv", help="Print CSV")] = False,
    live: Annotated[bool, typer.Option("--live", help="Organizers: the live standings during a freeze")] = False,
) -> None:
    """The standings under the contest's rule; each place that a tie rule decided names it."""
    try:
        client = server_client(server, token, need_token=live)
        if csv_out:
            sys.stdout.write(client.get_text(f"/api/contests/{slug}/standings.csv", live=live or None))
            return
        shown = client.get(f"/api/contests/{slug}/standings", live=live or None)
    except GpuarenaError as exc:
        fail(exc)
    if json_out:
        return _print_json(shown)
    table_data = shown["standings"]
    names = sorted({k for r in table_data["rows"] for k in r["figures"]})
    title = f"{slug}: {table_data['rule']}" + (
        " (frozen: entries after the freeze are hidden)" if shown["frozen"] else ""
    )
    table = Table("rank", "contestant", "total", *names, "decided by", header_style="bold", title=title)
    for r in table_data["rows"]:
        table.add_row(
            str(r["rank"]),
            r["contestant"],
            f"{r['total']:.4g}",
            *(str(r["figures"].get(k, "")) for k in names),
            r["tie_break"] or "",
        )
    out.print(table)
    if not table_data["rows"]:
        out.print("no entries yet")


@contest_app.command("entries")
def entries(
    slug: Annotated[str, typer.Argument(help="The contest's slug")],
    server: ServerOpt = None,
    token: TokenOpt = None,
    pending: Annotated[bool, typer.Option("--pending", help="Only passed runs waiting for review (the queue)")] = False,
    json_out: Annotated[bool, typer.Option("--json", help="Print JSON")] = False,
) -> None:
    """Your entries with their review and resubmission flags (organizers: everyone's)."""
    try:
        found = server_client(server, token).get(
            f"/api/contests/{slug}/entries", review="pending" if pending else None, passed=pending or None
        )
    except GpuarenaError as exc:
        fail(exc)
    if json_out:
        return _print_json(found)
    table = Table(
        "submission",
        "contestant",
        "problem",
        "device",
        "status",
        "score",
        "review",
        "comment",
        "flag",
        header_style="bold",
    )
    for e in found:
        table.add_row(
            str(e["submission_id"]),
            e["contestant"],
            e["problem"],
            e["device_kind"],
            e["status"],
            f"{e['score']:.3f}" if e["score"] is not None else "-",
            e["review"],
            e["review_comment"],
            e["flag_reason"],
        )
    out.print(table)


@contest_app.command("review")
def review(
    slug: Annotated[str, typer.Argument(help="The contest's slug")],
    submission_id: Annotated[int, typer.Argument(help="The entry's submission id")],
    accept: Annotated[bool, typer.Option("--accept/--reject", help="Accept or reject")],
    comment: Annotated[str, typer.Option(help="Shown to the contestant")] = "",
    merged: Annotated[bool | None, typer.Option("--merged/--not-merged", help="ccf-kernel: merged upstream")] = None,
    bonus: Annotated[list[str] | None, typer.Option("--bonus", help=BONUS_HELP)] = None,
    samples: Annotated[int | None, typer.Option(help="ccf-dataset: accepted samples")] = None,
    samples_score: Annotated[float | None, typer.Option(help="ccf-dataset: their total score")] = None,
    judge_score: Annotated[float | None, typer.Option(help="ccf-migration: the judge's score")] = None,
    completeness: Annotated[float | None, typer.Option(help="ccf-migration: share done, 0-1")] = None,
    server: ServerOpt = None,
    token: TokenOpt = None,
) -> None:
    """Organizers: accept or reject an entry, with what the rule reads from a review."""
    body = {
        "decision": "accepted" if accept else "rejected",
        "comment": comment,
        "merged_upstream": merged,
        "bonus": bonus,
        "samples_accepted": samples,
        "samples_score": samples_score,
        "judge_score": judge_score,
        "completeness": completeness,
    }
    try:
        done = (
            server_client(server, token)
            .post(
                f"/api/contests/{slug}/entries/{submission_id}/review", {k: v for k, v in body.items() if v is not None}
            )
            .json()
        )
    except GpuarenaError as exc:
        fail(exc)
    out.print(
        f"submission {submission_id} of {done['contestant']}: {done['review']}"
        + (f" ({done['review_comment']})" if done["review_comment"] else ""),
        highlight=False,
    )


@contest_app.command("similar")
def similar(
    slug: Annotated[str, typer.Argument(help="The contest's slug")],
    server: ServerOpt = None,
    token: TokenOpt = None,
    threshold: Annotated[float, typer.Option(help="Smallest similarity shown, 0-1")] = 0.5,
    json_out: Annotated[bool, typer.Option("--json", help="Print JSON")] = False,
) -> None:
    """Organizers: pairs of different contestants' solutions that look alike (flags, not verdicts)."""
    try:
        pairs = server_client(server, token).get(f"/api/contests/{slug}/similar", threshold=threshold)
    except GpuarenaError as exc:
        fail(exc)
    if json_out:
        return _print_json(pairs)
    table = Table("problem", "similarity", "first", "second", header_style="bold")
    for p in pairs:
        table.add_row(
            p["problem"],
            f"{p['similarity']:.2f}",
            f"{p['first']} ({p['first_contestant']})",
            f"{p['second']} ({p['second_contestant']})",
        )
    out.print(table)
    if not pairs:
        out.print(f"no pairs at or above {threshold:g}")


@contest_app.command("team")
def team(
    slug: Annotated[str, typer.Argument(help="The contest's slug")],
    name: Annotated[str, typer.Argument(help="The team's name")],
    members: Annotated[list[str], typer.Argument(help="User names")],
    server: ServerOpt = None,
    token: TokenOpt = None,
) -> None:
    """Organizers: add a team to a team contest, or replace its members."""
    try:
        server_client(server, token).put(f"/api/contests/{slug}/teams", {"name": name, "members": members})
    except GpuarenaError as exc:
        fail(exc)
    out.print(f"team {name} of {slug}: {', '.join(members)}", highlight=False)
