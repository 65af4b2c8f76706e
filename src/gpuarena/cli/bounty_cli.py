"""`gpuarena bounty ...`: the bounty board over the API. Organisers post bounties (from options
or a TOML file), verify, pay and withdraw them; anyone lists and reads them; people claim,
renew, release and submit their work."""

from __future__ import annotations

import json
import sys
import tomllib
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from gpuarena.cli.console import err, fail, out
from gpuarena.cli.server import ServerOpt, TokenOpt, server_client
from gpuarena.errors import GpuarenaError

bounty_app = typer.Typer(
    no_args_is_help=True,
    help="The bounty board: post, list, claim, renew, release, verify, pay, withdraw (docs/bounties.md).",
)
NoteOpt = Annotated[str, typer.Option("--note", help="A note kept in the bounty's history")]


def checked(data: dict[str, Any], where: str) -> dict[str, Any]:
    """One bounty's fields, checked against the API's model before anything is sent: mistakes
    are named here, with the field. Whole numbers are taken as the reward; a float is refused
    (money is written as text)."""
    from pydantic import ValidationError

    from gpuarena.service.bounty_schemas import BountyRequest

    data = dict(data)
    amount = data.get("reward_amount")
    if isinstance(amount, int) and not isinstance(amount, bool):
        data["reward_amount"] = str(amount)
    elif isinstance(amount, float):
        raise GpuarenaError(
            f"{where}: reward_amount {amount!r}: write the amount as text, e.g. reward_amount = "
            f'"{amount}" (money is never a float)'
        )
    try:
        return BountyRequest.model_validate(data).model_dump(mode="json", exclude_none=True)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'file'}: {e['msg']}" for e in exc.errors())
        raise GpuarenaError(f"{where}: {problems}") from None


def read_bounty_file(path: Path) -> list[dict[str, Any]]:
    """The bounties of a TOML file: its top-level table is one bounty, or each [[bounty]] table
    is one (tiers of one problem, say)."""
    try:
        data = tomllib.loads(path.read_text())
    except OSError as exc:
        raise GpuarenaError(f"cannot read {path}: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise GpuarenaError(f"{path}: not valid TOML: {exc}") from None
    if "bounty" in data:
        extra = sorted(set(data) - {"bounty"})
        if extra or not isinstance(data["bounty"], list):
            raise GpuarenaError(
                f"{path}: write one bounty as top-level keys, or several as [[bounty]] tables "
                f"(not both{': ' + ', '.join(extra) if extra else ''})"
            )
        return [checked(item, f"{path}: bounty {i + 1}") for i, item in enumerate(data["bounty"])]
    return [checked(data, str(path))]


def from_options(
    title: str | None,
    rewards: list[str],
    currency: str,
    category: str | None,
    description: str,
    problem: str | None,
    device_kind: str | None,
    over: str | None,
    speedups: list[float],
    claim_days: int,
    deadline: str | None,
) -> list[dict[str, Any]]:
    """The bounties the options describe: one per --speedup (tiers, each with its --reward, or
    all with the one given), or a single bounty."""
    if not title or not category or not rewards:
        raise GpuarenaError("give --title, --category and --reward (or --file bounty.toml)")
    tiers: list[float | None] = list(speedups) or [None]
    if len(rewards) not in (1, len(tiers)):
        raise GpuarenaError(f"{len(rewards)} --reward for {len(tiers)} --speedup: give one reward, or one per speed-up")
    made = []
    for i, speedup in enumerate(tiers):
        data: dict[str, Any] = dict(
            title=title if len(tiers) == 1 else f"{title} ({speedup:g}x)",
            description=description,
            reward_amount=rewards[i if len(rewards) > 1 else 0],
            currency=currency,
            category=category,
            problem=problem,
            device_kind=device_kind,
            target_over=over,
            target_speedup=speedup,
            claim_days=claim_days,
            deadline=deadline,
        )
        made.append(checked({k: v for k, v in data.items() if v is not None}, "options"))
    return made


def _print_json(value: object) -> None:
    sys.stdout.write(json.dumps(value, indent=2) + "\n")


def _said(bounty: dict[str, Any]) -> str:
    """One line about a bounty: id, state, reward, title, and who holds it until when."""
    held = (
        f", claimed by {bounty['claimer']} until {_when(bounty['claim_expires_at'])}"
        if bounty["claim_expires_at"]
        else f", by {bounty['claimer']}"
        if bounty["claimer"]
        else ""
    )
    return (
        f"bounty {bounty['id']} ({bounty['state']}{held}): {bounty['reward_amount']} {bounty['currency']}, "
        f"{bounty['title']}"
    )


def _when(text: str | None) -> str:
    return text[:16].replace("T", " ") + " UTC" if text else "-"


@bounty_app.command("create")
def create(
    title: Annotated[str | None, typer.Option(help="What the bounty is for")] = None,
    reward: Annotated[
        list[str] | None,
        typer.Option(help="The reward, a decimal amount such as 500 or 12.50 (repeat: one per --speedup)"),
    ] = None,
    currency: Annotated[str, typer.Option(help="USD, EUR, USDC, ...")] = "USD",
    category: Annotated[str | None, typer.Option(help="speed, feature, bug or hardware")] = None,
    description: Annotated[str, typer.Option(help="Markdown, shown on the bounty's page")] = "",
    problem: Annotated[str | None, typer.Option(help="Speed bounties: the problem, e.g. level1/softmax")] = None,
    device_kind: Annotated[str | None, typer.Option(help="Speed bounties: the device kind, e.g. H100")] = None,
    over: Annotated[
        str | None, typer.Option(help="Speed bounties: reference (default) or leaderboard (its best now)")
    ] = None,
    speedup: Annotated[
        list[float] | None,
        typer.Option(help="Speed bounties: the speed-up to reach, e.g. 2 (repeat for tiers: one bounty each)"),
    ] = None,
    claim_days: Annotated[int, typer.Option(help="Days a claim holds unless renewed")] = 7,
    deadline: Annotated[
        str | None, typer.Option(help="Expires unverified after this UTC time, e.g. 2027-01-31T00:00")
    ] = None,
    file: Annotated[
        Path | None,
        typer.Option(
            "--file", help="A TOML file: one bounty's fields as top-level keys, or [[bounty]] tables (docs/bounties.md)"
        ),
    ] = None,
    server: ServerOpt = None,
    token: TokenOpt = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print the bounties made as JSON")] = False,
) -> None:
    """Post bounties (organisers and admins), from options or a TOML file; all are checked here before one is sent."""
    try:
        wanted = (
            read_bounty_file(file)
            if file
            else from_options(
                title,
                reward or [],
                currency,
                category,
                description,
                problem,
                device_kind,
                over,
                speedup or [],
                claim_days,
                deadline,
            )
        )
        client = server_client(server, token)
        made = []
        for body in wanted:
            made.append(client.post("/api/bounties", body).json())
            if not json_out:
                out.print(
                    f"{_said(made[-1])}" + (f"\n  target: {made[-1]['target']}" if made[-1]["target"] else ""),
                    highlight=False,
                )
            for warning in made[-1].get("warnings", []):
                err.print(f"warning: bounty {made[-1]['id']}: {warning}", highlight=False)
    except GpuarenaError as exc:
        fail(exc)
    if json_out:
        _print_json(made)


@bounty_app.command("list")
def list_bounties(
    state: Annotated[
        str | None, typer.Option(help="open, claimed, submitted, verified, paid, expired or withdrawn")
    ] = None,
    category: Annotated[str | None, typer.Option(help="speed, feature, bug or hardware")] = None,
    server: ServerOpt = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print JSON")] = False,
    csv_out: Annotated[bool, typer.Option("--csv", help="Print CSV (the board's export columns)")] = False,
) -> None:
    """The board, newest first (no token needed)."""
    from gpuarena.service.bounty_schemas import board_csv

    try:
        rows = server_client(server, None, need_token=False).get("/api/bounties", state=state, category=category)
    except GpuarenaError as exc:
        fail(exc)
    if json_out:
        _print_json(rows)
        return
    if csv_out:
        sys.stdout.write(board_csv(rows))
        return
    table = Table("id", "state", "category", "reward", "title", "target", "claimer", "lock until", header_style="bold")
    for b in rows:
        target = f"{b['target_speedup']:g}x over {b['target_over']} on {b['device_kind']}" if b["target"] else ""
        table.add_row(
            str(b["id"]),
            b["state"],
            b["category"],
            f"{b['reward_amount']} {b['currency']}",
            b["title"],
            target,
            b["claimer"] or "",
            _when(b["claim_expires_at"]) if b["claimer"] else "",
        )
    out.print(table)
    if not rows:
        out.print("no bounties" + (" match" if state or category else " yet"))


@bounty_app.command("show")
def show(
    bounty_id: Annotated[int, typer.Argument(help="The bounty's id")],
    server: ServerOpt = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print JSON")] = False,
) -> None:
    """One bounty and its history: every change, who made it and when."""
    try:
        b = server_client(server, None, need_token=False).get(f"/api/bounties/{bounty_id}")
    except GpuarenaError as exc:
        fail(exc)
    if json_out:
        _print_json(b)
        return
    out.print(_said(b), highlight=False)
    out.print(f"  category: {b['category']}" + (f"; target: {b['target']}" if b["target"] else ""), highlight=False)
    if b["submission_id"]:
        out.print(f"  verified by ranked run #{b['submission_id']}", highlight=False)
    if b["deadline"]:
        out.print(f"  deadline: {_when(b['deadline'])}", highlight=False)
    table = Table("when", "who", "action", "state", "note", header_style="bold")
    for e in b["history"]:
        moved = e["to_state"] if e["from_state"] == e["to_state"] else f"{e['from_state'] or '-'} -> {e['to_state']}"
        table.add_row(_when(e["at"]), e["actor"] or "(service)", e["action"], moved, e["note"])
    out.print(table)


def _act(bounty_id: int, action: str, server: str | None, token: str | None, note: str | None = None) -> None:
    """POST one state change and print the bounty as it now is."""
    try:
        b = (
            server_client(server, token)
            .post(f"/api/bounties/{bounty_id}/{action}", {} if note is None else {"note": note})
            .json()
        )
    except GpuarenaError as exc:
        fail(exc)
    out.print(_said(b), highlight=False)


@bounty_app.command("claim")
def claim(
    bounty_id: Annotated[int, typer.Argument(help="The bounty's id")], server: ServerOpt = None, token: TokenOpt = None
) -> None:
    """Claim an open bounty: it is yours for its claim days (renew before the lock lapses)."""
    _act(bounty_id, "claim", server, token)


@bounty_app.command("renew")
def renew(
    bounty_id: Annotated[int, typer.Argument(help="The bounty's id")], server: ServerOpt = None, token: TokenOpt = None
) -> None:
    """Renew your claim: it holds another claim days from now."""
    _act(bounty_id, "renew", server, token)


@bounty_app.command("release")
def release(
    bounty_id: Annotated[int, typer.Argument(help="The bounty's id")],
    note: NoteOpt = "",
    server: ServerOpt = None,
    token: TokenOpt = None,
) -> None:
    """Give up your claim (organisers: anyone's); the bounty is open again."""
    _act(bounty_id, "release", server, token, note)


@bounty_app.command("submit")
def submit(
    bounty_id: Annotated[int, typer.Argument(help="The bounty's id")],
    note: Annotated[str, typer.Option("--note", help="Where the work is: a pull request, a commit, a report")],
    server: ServerOpt = None,
    token: TokenOpt = None,
) -> None:
    """Feature, bug and hardware bounties: hand in your work for an organiser to verify (speed
    bounties are submitted by `gpuarena submit PROBLEM SOLUTION --mode ranked`)."""
    _act(bounty_id, "submit", server, token, note)


@bounty_app.command("verify")
def verify(
    bounty_id: Annotated[int, typer.Argument(help="The bounty's id")],
    note: NoteOpt = "",
    server: ServerOpt = None,
    token: TokenOpt = None,
) -> None:
    """Organisers: accept the work on a feature, bug or hardware bounty."""
    _act(bounty_id, "verify", server, token, note)


@bounty_app.command("pay")
def pay(
    bounty_id: Annotated[int, typer.Argument(help="The bounty's id")],
    note: Annotated[str, typer.Option("--note", help="The payment's reference")] = "",
    server: ServerOpt = None,
    token: TokenOpt = None,
) -> None:
    """Organisers: record that a verified bounty was paid."""
    _act(bounty_id, "pay", server, token, note)


@bounty_app.command("withdraw")
def withdraw(
    bounty_id: Annotated[int, typer.Argument(help="The bounty's id")],
    note: NoteOpt = "",
    server: ServerOpt = None,
    token: TokenOpt = None,
) -> None:
    """Organisers: take an open, claimed or submitted bounty off the board."""
    _act(bounty_id, "withdraw", server, token, note)


def register(app: typer.Typer) -> None:
    app.add_typer(bounty_app, name="bounty")
