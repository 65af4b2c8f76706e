"""Commands that run the service: serve, runner, db, users, tokens; and the registration of the
client commands beside them (client_cli.py: login, submit, leaderboard, cancel, invites)."""

from __future__ import annotations

import logging
import signal
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from gpuarena.cli.console import err, fail, need_server, out
from gpuarena.cli.server import ServerOpt, server_client
from gpuarena.errors import GpuarenaError

db_app = typer.Typer(no_args_is_help=True, help="The service's database: migrations.")
users_app = typer.Typer(no_args_is_help=True, help="Accounts, made directly in the configured database.")
tokens_app = typer.Typer(no_args_is_help=True, help="API tokens, managed directly in the configured database.")


@db_app.callback()
@users_app.callback()
@tokens_app.callback()
def _needs_the_service(context: typer.Context) -> None:
    """These commands work on the service's database: they need the `server` extra."""
    need_server(f"{context.info_name} {context.invoked_subcommand or ''}".strip())


HomeOpt = Annotated[
    Path | None,
    typer.Option(
        "--home",
        envvar="GPUARENA_HOME",
        help="Folder for the embedded database and caches [default: GPUARENA_HOME, else the nearest .gpuarena/ with a database from here up, else ~/.gpuarena]",
    ),
]
DatabaseOpt = Annotated[
    str | None,
    typer.Option(
        "--database",
        envvar="GPUARENA_DATABASE_URL",
        help="sqlite:///file.db or postgresql://user@host/db [default: SQLite in --home]",
    ),
]


def _settings(home: Path | None, database: str | None, **more: object):
    from gpuarena.service.config import Settings

    return Settings.from_env(home=home, database_url=database, **more)


def _database(home: Path | None, database: str | None):
    """The database the account commands write to, made or migrated first; a new SQLite file
    is said out loud (a server started elsewhere keeps its own)."""
    from gpuarena.service.db import Database
    from gpuarena.service.migrate import upgrade

    settings = _settings(home, database)
    path = settings.database_url.removeprefix("sqlite:///") if settings.database_url.startswith("sqlite:///") else ""
    if path and not Path(path).exists():
        err.print(
            f"no database at {path} yet: making a new one (a server started with another GPUARENA_HOME "
            "will not see what is written here; --home or GPUARENA_HOME chooses)",
            highlight=False,
        )
    upgrade(settings.database_url)
    return Database(settings.database_url)


def _where(db) -> str:
    """The database's URL for messages, without a password."""
    return db.write_engine.url.render_as_string(hide_password=True)


def serve(
    host: Annotated[str, typer.Option(help="Address to listen on")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on")] = 8000,
    home: HomeOpt = None,
    database: DatabaseOpt = None,
    no_runner: Annotated[bool, typer.Option("--no-runner", help="Do not start the embedded runner")] = False,
    problems: Annotated[
        list[Path] | None, typer.Option("--problems", help="Another folder of problems to serve (repeatable)")
    ] = None,
    cpu_only: Annotated[
        bool, typer.Option("--cpu-only", help="The embedded runner uses the CPU only, not the GPUs")
    ] = False,
) -> None:
    """Run the server: JSON API (docs at /docs), the database (SQLite by default), and a runner for this machine's devices."""
    need_server("serve")
    from gpuarena.cli.serve import runner_budget
    from gpuarena.cli.serve import serve as run_server
    from gpuarena.service.db import shown_url

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)  # the runner's heartbeats and polls, every few seconds
    try:
        settings = _settings(home, database, **({"problem_roots": problems} if problems else {}))
        if not no_runner:
            runner_budget()  # a bad GPUARENA_RUNNER_BUDGET is named before "serving on"
        err.print(
            f"gpuarena serving on http://{host}:{port} (API docs at /docs), database {shown_url(settings.database_url)}",
            highlight=False,
        )
        run_server(settings, host, port, with_runner=not no_runner, runner_gpus=not cpu_only)
    except GpuarenaError as exc:
        fail(exc)


RUNNER_TOKEN_IN_PS = (
    "warning: --token on the command line shows the runner's token to every user of this machine "
    "(ps, /proc/PID/cmdline) for as long as the runner runs; set GPUARENA_TOKEN or use --token-file FILE "
    "(mode 0600) instead"
)


def _checked_budget(value: float) -> float:
    """--budget (GPUARENA_RUNNER_BUDGET) as serve's embedded runner takes it: finite, above 0."""
    from gpuarena.cli.serve import BAD_BUDGET, budget_ok

    if not budget_ok(value):
        raise typer.BadParameter(BAD_BUDGET)
    return value


def _runner_token(context: typer.Context, token: str | None, token_file: Path | None) -> str | None:
    """The runner's token: from GPUARENA_TOKEN or --token-file, which `ps` does not show; --token
    typed on the command line still works (scripts use it) but is warned about."""
    # by name: typer may carry its own copy of click, whose ParameterSource is another enum
    from_command_line = getattr(context.get_parameter_source("token"), "name", "") == "COMMANDLINE"
    if token_file is not None:
        if from_command_line:
            raise GpuarenaError("give --token-file or --token, not both")
        try:
            token = token_file.read_text().strip()
        except OSError as exc:
            raise GpuarenaError(f"--token-file {token_file}: {exc.strerror}") from None
        if not token:
            raise GpuarenaError(f"--token-file {token_file} is empty")
    elif from_command_line and token:
        err.print(RUNNER_TOKEN_IN_PS, style="yellow", highlight=False)
    return token


def runner(
    context: typer.Context,
    server: ServerOpt = None,
    token: Annotated[
        str | None,
        typer.Option(
            "--token",
            envvar="GPUARENA_TOKEN",
            help="Runner token [default: GPUARENA_TOKEN, --token-file, or `gpuarena login`]; on the command line "
            "it shows in ps: prefer GPUARENA_TOKEN or --token-file",
        ),
    ] = None,
    token_file: Annotated[
        Path | None,
        typer.Option(
            "--token-file",
            envvar="GPUARENA_TOKEN_FILE",
            help="Read the runner token from this file (keep it mode 0600)",
        ),
    ] = None,
    name: Annotated[str | None, typer.Option(help="This runner's name [default: the host name]")] = None,
    device: Annotated[list[str] | None, typer.Option(help="Serve only this device: cpu or cuda:N (repeatable)")] = None,
    devices: Annotated[
        str | None,
        typer.Option(
            "--devices",
            envvar="GPUARENA_RUNNER_DEVICES",
            help="The device slots, one worker each, instead of detecting them: e.g. cuda:0,cuda:1 or cuda:0=H100; "
            "cpu:N adds workers on the CPU (to try a multi-device host without a GPU)",
        ),
    ] = None,
    devices_file: Annotated[
        Path | None,
        typer.Option(
            "--devices-file",
            envvar="GPUARENA_RUNNER_DEVICES_FILE",
            help="Like --devices, read from a file and read again at each health check: a device no longer "
            "listed has disappeared and is drained",
        ),
    ] = None,
    health_interval: Annotated[
        float,
        typer.Option(
            envvar="GPUARENA_HEALTH_INTERVAL",
            help="Seconds between health checks of idle devices (0: only at start and after a harness failure)",
        ),
    ] = 60.0,
    budget: Annotated[
        float,
        typer.Option(
            envvar="GPUARENA_RUNNER_BUDGET", callback=_checked_budget, help="Timing budget per workload, in seconds"
        ),
    ] = 2.0,
    prewarm: Annotated[
        bool,
        typer.Option(
            envvar="GPUARENA_RUNNER_PREWARM",
            help="Start each device's next job process ahead (imports done, nothing "
            "on the device), so jobs do not wait for Python and torch to load",
        ),
    ] = True,
    serve: Annotated[
        bool | None,
        typer.Option(
            "--serve/--no-serve",
            envvar="GPUARENA_RUNNER_SERVE",
            help="Keep one job process per device serving its kernel jobs one after another (workers waiting with "
            "their CUDA contexts made, as run-many judges) [default: on GPUs with --prewarm]",
            show_default=False,
        ),
    ] = None,
    self_test: Annotated[
        bool,
        typer.Option(
            envvar="GPUARENA_RUNNER_SELF_TEST",
            help="Judge each language's tiny self-test program once per device kind before serving, and show the "
            "outcomes with the devices (kept in the cache: a restart with the same software does not pay again)",
        ),
    ] = True,
    stack: Annotated[
        str,
        typer.Option(
            envvar="GPUARENA_RUNNER_STACK",
            help="The software stack this runner offers (e.g. maca, vllm, torch-2.13-cpu): its device kinds become "
            "KIND@STACK, so jobs (migration checks above all) asking for that stack run here and only here",
        ),
    ] = "",
) -> None:
    """Serve jobs from a server on this machine's devices: one worker per device, until Ctrl-C or SIGTERM.

    --server may list several API servers (http://a:8000,http://b:8000): the runner moves to
    the next when one cannot be reached."""
    from gpuarena.host_devices import detect
    from gpuarena.runner.agent import Runner, RunnerConfig
    from gpuarena.runner.devices import advertise, parse_devices

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)  # the runner's heartbeats and polls, every few seconds
    try:
        client = server_client(server, _runner_token(context, token, token_file))
        if devices and devices_file:
            raise GpuarenaError("give --devices or --devices-file, not both")
        if devices_file:
            where = f"--devices-file {devices_file}"

            def list_devices():
                try:
                    return parse_devices(devices_file.read_text(), where)
                except OSError as exc:
                    raise GpuarenaError(f"{where}: {exc.strerror}") from None

            slots = list_devices()
        elif devices:
            slots = parse_devices(devices)

            def list_devices():
                gpus = {s.device for s in detect(cpu=False)}  # are its GPUs still there?
                return [s for s in slots if not s.device.startswith("cuda") or s.device in gpus]
        else:
            slots = detect()
            list_devices = lambda: detect()  # noqa: E731
        if device:
            unknown = set(device) - {s.device for s in slots}
            if unknown:
                raise GpuarenaError(
                    f"--device {', '.join(sorted(unknown))}: not here (found: {', '.join(s.device for s in slots)})"
                )
            slots = [s for s in slots if s.device in device]
        if not slots:
            raise GpuarenaError("no devices to serve (check --devices / --devices-file)")
        slots = advertise(slots, stack)
        named: dict[str, Any] = {"name": name} if name else {}  # else the config's default (the host's name)
        config = RunnerConfig(
            slots=slots,
            budget_s=budget,
            list_devices=list_devices,
            health_interval_s=health_interval,
            prewarm=prewarm,
            serve=serve,
            self_test=self_test,
            **named,
        )
        agent = Runner(client, config)
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, lambda *_: agent.stop())
        err.print(
            f"runner {config.name}: {', '.join(f'{s.device} ({s.kind})' for s in slots)} -> "
            f"{', '.join(client.servers)}",
            highlight=False,
        )
        agent.run()
    except GpuarenaError as exc:
        fail(exc)


@db_app.command("upgrade")
def db_upgrade(home: HomeOpt = None, database: DatabaseOpt = None) -> None:
    """Create or migrate the database to the newest schema."""
    from gpuarena.service.db import shown_url
    from gpuarena.service.migrate import current, upgrade

    try:
        settings = _settings(home, database)
        upgrade(settings.database_url)
        out.print(f"{shown_url(settings.database_url)}: at revision {current(settings.database_url)}", highlight=False)
    except GpuarenaError as exc:
        fail(exc)


@users_app.command("add")
def users_add(
    name: Annotated[str, typer.Argument(help="The account name")],
    role: Annotated[str, typer.Option(help="admin, organiser, participant or runner")] = "participant",
    device_kind: Annotated[
        list[str] | None, typer.Option(help="Runner accounts: device kinds its token may serve (repeatable)")
    ] = None,
    home: HomeOpt = None,
    database: DatabaseOpt = None,
) -> None:
    """Create an account; its first API token is the last line printed (shown once)."""
    from gpuarena.service.auth import add_user, issue_token

    try:
        db = _database(home, database)
        with db.write() as session:
            user = add_user(session, name, role)
            _, plain = issue_token(session, user, "first", device_kinds=device_kind or None)
    except GpuarenaError as exc:
        fail(exc)
    err.print(f"created {role} {name!r} in {_where(db)}; its API token (shown once):", highlight=False)
    sys.stdout.write(plain + "\n")


@users_app.command("list")
def users_list(home: HomeOpt = None, database: DatabaseOpt = None) -> None:
    """Accounts and their roles."""
    from sqlalchemy import select

    from gpuarena.service.tables import User

    db = _database(home, database)
    table = Table("id", "name", "role", "created", header_style="bold")
    with db.read() as session:
        for user in session.scalars(select(User).order_by(User.id)):
            table.add_row(str(user.id), user.name, user.role, f"{user.created_at:%Y-%m-%d %H:%M}")
    out.print(table)


@tokens_app.command("list")
def tokens_list(
    name: Annotated[str, typer.Argument(help="Account name")], home: HomeOpt = None, database: DatabaseOpt = None
) -> None:
    """An account's tokens (their first characters, never the whole token)."""
    from sqlalchemy import select

    from gpuarena.service.auth import user_by_name
    from gpuarena.service.tables import Token

    try:
        db = _database(home, database)
        table = Table("id", "name", "token", "created", "last used", "state", header_style="bold")
        with db.read() as session:
            user = user_by_name(session, name)
            for t in session.scalars(select(Token).where(Token.user_id == user.id).order_by(Token.id)):
                state = (
                    "revoked"
                    if t.revoked_at
                    else ("expires " + f"{t.expires_at:%Y-%m-%d}" if t.expires_at else "active")
                )
                table.add_row(
                    str(t.id),
                    t.name,
                    t.prefix + "…",
                    f"{t.created_at:%Y-%m-%d %H:%M}",
                    f"{t.last_used_at:%Y-%m-%d %H:%M}" if t.last_used_at else "-",
                    state,
                )
    except GpuarenaError as exc:
        fail(exc)
    out.print(table)


@tokens_app.command("create")
def tokens_create(
    name: Annotated[str, typer.Argument(help="Account name")],
    label: Annotated[str, typer.Option(help="A name for the token")] = "",
    expires_in_days: Annotated[float | None, typer.Option(help="Expire after this many days")] = None,
    home: HomeOpt = None,
    database: DatabaseOpt = None,
) -> None:
    """A new token for an account; printed once, as the last line."""
    import datetime as dt

    from gpuarena.service.auth import issue_token, user_by_name

    try:
        db = _database(home, database)
        with db.write() as session:
            user = user_by_name(session, name)
            _, plain = issue_token(
                session, user, label, dt.timedelta(days=expires_in_days) if expires_in_days else None
            )
    except GpuarenaError as exc:
        fail(exc)
    err.print(f"new token for {name!r} in {_where(db)} (shown once):", highlight=False)
    sys.stdout.write(plain + "\n")


@tokens_app.command("revoke")
def tokens_revoke(
    token_id: Annotated[int, typer.Argument(help="Token id (from `gpuarena tokens list`)")],
    home: HomeOpt = None,
    database: DatabaseOpt = None,
) -> None:
    """Revoke a token: requests with it are refused from now on."""
    from gpuarena.service.auth import revoke_token

    try:
        db = _database(home, database)
        with db.write() as session:
            token = revoke_token(session, token_id)
            out.print(f"revoked token {token.id} ({token.prefix}…) in {_where(db)}", highlight=False)
    except GpuarenaError as exc:
        fail(exc)


def register(app: typer.Typer) -> None:
    from gpuarena.cli.client_cli import cancel, invites_app, leaderboard, login, submit

    app.command()(serve)
    app.command()(cancel)
    app.command()(runner)
    app.command()(login)
    app.command()(submit)
    app.command()(leaderboard)
    from gpuarena.cli.batch import batch

    app.command()(batch)
    app.add_typer(db_app, name="db")
    app.add_typer(users_app, name="users")
    app.add_typer(tokens_app, name="tokens")
    app.add_typer(invites_app, name="invites")
    from gpuarena.cli.contest_cli import contest_app

    app.add_typer(contest_app, name="contest")
