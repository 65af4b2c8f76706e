"""Commands that talk to a server as one of its users: login, submit, leaderboard, cancel,
invites (service_cli.py registers them, beside the commands that run the service)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from gpuarena.cli.console import err, fail, out
from gpuarena.cli.server import ServerOpt, TokenOpt, credentials_path, server_client
from gpuarena.errors import GpuarenaError


def login(
    server: Annotated[str, typer.Option(envvar="GPUARENA_SERVER", help="Server URL")],
    token: Annotated[
        str | None, typer.Option(envvar="GPUARENA_TOKEN", help="API token [default: asked for, or read from a pipe]")
    ] = None,
) -> None:
    """Check a token against a server and save both for later commands (~/.config/gpuarena)."""
    import getpass

    from gpuarena.client import Client

    server = server.rstrip("/")
    if not token:  # typed without echo at a terminal; read as a line from a pipe (no GetPassWarning)
        token = getpass.getpass("Token: ") if sys.stdin.isatty() else sys.stdin.readline()
    token = token.strip()
    try:
        me = Client(server, token).me()
    except GpuarenaError as exc:
        fail(exc)
    path = credentials_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.touch(mode=0o600)
    path.write_text(json.dumps({"server": server.rstrip("/"), "token": token}))
    out.print(f"signed in to {server} as {me['name']} ({me['role']}); saved to {path}", highlight=False)


SUBMIT_ATTEMPTS = 4


def _submit_once(client, problem: str, solution, device: str, mode: str, contest: str | None) -> dict[str, Any]:
    """POST the submission, retried where its answer may have been lost (the server could not be
    reached, or answered 502/503/504: the client moves to the next server, if any) with one
    idempotency key for this invocation: a retry of a POST that did reach the server returns
    the submission it made instead of queueing a second."""
    import time
    import uuid

    from gpuarena.client import ApiError

    key = f"submit-{uuid.uuid4().hex}"
    for attempt in range(SUBMIT_ATTEMPTS):
        try:
            return client.submit(problem, solution, device, mode, client_key=key, contest=contest)
        except ApiError as exc:
            if exc.status not in (None, 502, 503, 504) or attempt == SUBMIT_ATTEMPTS - 1:
                raise
            err.print(f"submitting: {exc}; trying again", highlight=False)
            time.sleep(0.5 * 2**attempt)
    raise AssertionError("unreachable")


def submit(
    problem: Annotated[str, typer.Argument(help="Problem id on the server, e.g. level1/softmax (or its local folder)")],
    solution: Annotated[Path, typer.Argument(help="A .py file, a folder with solution.toml, or a pack")],
    device: Annotated[str, typer.Option("--device", help="Device kind, e.g. cpu or H100")],
    server: ServerOpt = None,
    token: TokenOpt = None,
    mode: Annotated[
        str,
        typer.Option(
            help="test, benchmark, ranked (ranked enters the leaderboard) or profile (Nsight Compute, GPU kinds; shown on the submission's page)"
        ),
    ] = "ranked",
    json_out: Annotated[
        bool, typer.Option("--json", help="Print the Evaluation record and submission_id as JSON")
    ] = False,
    contest: Annotated[str | None, typer.Option("--contest", help="Enter the run into this contest (its slug)")] = None,
) -> None:
    """Submit a solution to a server, follow it live, and show the verdict; exit 0 only when PASSED."""
    import gpuarena.solution_readers  # noqa: F401  (registers every format's reader)
    from gpuarena.bundled import problem_id
    from gpuarena.cli.render import render
    from gpuarena.contracts.records import Evaluation
    from gpuarena.solutions import load_solution

    if mode not in ("test", "benchmark", "ranked", "profile"):
        fail(GpuarenaError(f"--mode must be test, benchmark, ranked or profile, not {mode!r}"))
    try:
        loaded = load_solution(solution)
        client = server_client(server, token)
        created = _submit_once(client, problem_id(problem), loaded, device, mode, contest)
        submission_id = created["id"]
        err.print(
            f"submission {submission_id} queued on {client.server} (stop it with `gpuarena cancel {submission_id}`)",
            highlight=False,
        )
        with err.status(f"submission {submission_id}: QUEUED") as status:
            final, said = created, ""
            for update in client.watch(submission_id):
                final = update
                where = f" (position {update['queue_position']} in the queue)" if update.get("queue_position") else ""
                line = f"submission {submission_id}: {update['status']}{where}"
                status.update(line)
                if not err.is_terminal and line != said:  # piped or logged: one line per change
                    err.print(line, highlight=False)
                    said = line
        if not final.get("done"):
            final = client.submission(submission_id)
    except GpuarenaError as exc:
        fail(exc)
    evaluation = final.get("evaluation")
    reason = (evaluation or final).get("reason") or ""
    if json_out:
        if final["status"] != "PASSED" and reason:  # the log says why, not only the JSON
            err.print(f"submission {submission_id}: {final['status']}: {reason}", highlight=False)
        sys.stdout.write(
            json.dumps(
                {
                    "submission_id": submission_id,
                    **(evaluation or {"status": final["status"], "reason": final["reason"]}),
                },
                indent=2,
            )
            + "\n"
        )
    elif evaluation:
        render(Evaluation.model_validate(evaluation), out)
    else:
        out.print(f"submission {submission_id}: {final['status']}: {final['reason']}", highlight=False)
    if not json_out:
        err.print(f"submission {submission_id} on {client.server}", highlight=False)
    raise typer.Exit(0 if final["status"] == "PASSED" else 1)


def leaderboard(
    problem: Annotated[str, typer.Argument(help="Problem id, e.g. level1/softmax (or its local folder)")],
    device: Annotated[str, typer.Option("--device", help="Device kind, e.g. cpu or H100")],
    server: ServerOpt = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print JSON")] = False,
) -> None:
    """Each user's best ranked, passing submission on PROBLEM and one device kind."""
    from gpuarena.bundled import problem_id

    try:
        board = server_client(server, None, need_token=False).leaderboard(problem_id(problem), device)
    except GpuarenaError as exc:
        fail(exc)
    if json_out:
        sys.stdout.write(json.dumps(board, indent=2) + "\n")
        return
    table = Table(
        "rank",
        "user",
        "score",
        "submission",
        "when",
        header_style="bold",
        title=f"{board['problem']} v{board['problem_version']} on {board['device_kind']}",
    )
    for row in board["rows"]:
        table.add_row(
            str(row["rank"]),
            row["user"],
            f"{row['score']:.3f}",
            str(row["submission_id"]),
            row["achieved_at"][:16].replace("T", " "),
        )
    out.print(table)
    if not board["rows"]:
        out.print("no ranked, passing submissions yet")


def cancel(
    submission_id: Annotated[int, typer.Argument(help="The submission's id")],
    server: ServerOpt = None,
    token: TokenOpt = None,
) -> None:
    """Cancel a queued or running submission of yours (admins: anyone's)."""
    try:
        done = server_client(server, token).cancel(submission_id)
    except GpuarenaError as exc:
        fail(exc)
    out.print(f"submission {submission_id}: {done['status']} ({done['reason']})", highlight=False)


invites_app = typer.Typer(
    help="Sign-up links for people without shell access (organisers, admins).", no_args_is_help=True
)


@invites_app.command("create")
def invites_create(
    server: ServerOpt = None,
    token: TokenOpt = None,
    role: Annotated[str, typer.Option(help="participant, or organiser (admins only)")] = "participant",
    uses: Annotated[int, typer.Option(help="How many people may sign up with it")] = 1,
    days: Annotated[float | None, typer.Option(help="Expire after this many days (0: never)")] = 7.0,
    note: Annotated[str, typer.Option(help="A note for the invites list")] = "",
) -> None:
    """Make an invite link; whoever opens it picks a name and gets an account (printed once, last line)."""
    try:
        made = server_client(server, token).invite(role, uses, days or None, note)
    except GpuarenaError as exc:
        fail(exc)
    err.print(
        f"invite {made['info']['id']}: {made['info']['role']}, {made['info']['uses_left']} use(s); the link "
        "(shown once):",
        highlight=False,
    )
    sys.stdout.write(made["link"] + "\n")
