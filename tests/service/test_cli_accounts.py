"""The account commands against a real database (SQLite and PostgreSQL), configured only from
the environment: `gpuarena db upgrade`, `users add` (the token is the last line), `tokens list`
and `tokens revoke`."""

from __future__ import annotations

import os
import stat

import pytest
from sqlalchemy import select
from typer.testing import CliRunner

from gpuarena.cli.app import app
from gpuarena.service.auth import AuthError, authenticate
from gpuarena.service.db import Database
from gpuarena.service.tables import Token


def test_accounts_and_tokens_from_the_command_line(database_url, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("GPUARENA_DATABASE_URL", database_url)
    monkeypatch.setenv("GPUARENA_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("COLUMNS", "200")
    cli = CliRunner()

    upgraded = cli.invoke(app, ["db", "upgrade"])
    assert upgraded.exit_code == 0, upgraded.output
    assert "at revision" in upgraded.stdout

    made = cli.invoke(app, ["users", "add", "alice", "--role", "organiser"])
    assert made.exit_code == 0, made.output
    token = made.stdout.strip().splitlines()[-1]
    assert token.startswith("gpa_")

    listed = cli.invoke(app, ["tokens", "list", "alice"])
    assert listed.exit_code == 0, listed.output
    assert token[:12] in listed.stdout and token not in listed.stdout  # shown once, listed by its prefix
    database = Database(database_url)
    try:
        with database.read() as session:
            assert authenticate(session, token).user.role == "organiser"
            token_id = session.scalar(select(Token.id).where(Token.prefix == token[:12]))
        revoked = cli.invoke(app, ["tokens", "revoke", str(token_id)])
        assert revoked.exit_code == 0, revoked.output
        with database.read() as session, pytest.raises(AuthError, match="revoked"):
            authenticate(session, token)
    finally:
        database.dispose()
    assert "revoked" in cli.invoke(app, ["tokens", "list", "alice"]).stdout

    bad_role = cli.invoke(app, ["users", "add", "bob", "--role", "king"])
    assert bad_role.exit_code == 2 and "role 'king'" in bad_role.output
    twice = cli.invoke(app, ["users", "add", "alice"])
    assert twice.exit_code == 2 and "already exists" in twice.output


def test_the_default_database_is_sqlite_in_the_home_folder(tmp_path, monkeypatch) -> None:
    monkeypatch.delenv("GPUARENA_DATABASE_URL", raising=False)
    monkeypatch.setenv("GPUARENA_HOME", str(tmp_path / "home"))
    made = CliRunner().invoke(app, ["users", "add", "alice"])
    assert made.exit_code == 0, made.output
    assert (tmp_path / "home" / "gpuarena.db").is_file()


def test_account_commands_reach_the_server_s_database_from_its_clone(tmp_path, monkeypatch) -> None:
    """`scripts/serve.sh` keeps its data in .gpuarena/ of the clone; `gpuarena users add` run
    there (or below) without GPUARENA_HOME must write to that database, and say which."""
    monkeypatch.delenv("GPUARENA_DATABASE_URL", raising=False)
    monkeypatch.delenv("GPUARENA_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "user-home"))
    monkeypatch.setenv("COLUMNS", "400")
    clone = tmp_path / "clone"
    (clone / "examples").mkdir(parents=True)
    cli = CliRunner()
    assert cli.invoke(app, ["db", "upgrade", "--home", str(clone / ".gpuarena")]).exit_code == 0
    monkeypatch.chdir(clone / "examples")
    made = cli.invoke(app, ["users", "add", "alice"])
    assert made.exit_code == 0, made.output
    server_db = clone / ".gpuarena" / "gpuarena.db"
    assert f"in sqlite:///{server_db}" in made.stderr and "no database" not in made.stderr
    assert not (tmp_path / "user-home" / ".gpuarena").exists()
    database = Database(f"sqlite:///{server_db}")
    try:
        with database.read() as session:
            assert authenticate(session, made.stdout.strip().splitlines()[-1]).user.name == "alice"
    finally:
        database.dispose()
    # elsewhere, with no database near: a new one in ~/.gpuarena, and the message says so
    monkeypatch.chdir(tmp_path)
    elsewhere = cli.invoke(app, ["users", "add", "bob"])
    assert elsewhere.exit_code == 0 and "no database at" in elsewhere.stderr
    assert (tmp_path / "user-home" / ".gpuarena" / "gpuarena.db").is_file()


def test_a_new_sqlite_database_is_the_owner_s_alone_from_its_first_command(tmp_path, monkeypatch) -> None:
    """`gpuarena db upgrade` (or `users add`) on a fresh path makes the file 0600 and its folder
    0700, under the usual umask: it holds seeds and token hashes before `serve` ever starts."""
    monkeypatch.delenv("GPUARENA_DATABASE_URL", raising=False)
    monkeypatch.setenv("GPUARENA_HOME", str(tmp_path / "home"))
    old = os.umask(0o022)
    try:
        upgraded = CliRunner().invoke(app, ["db", "upgrade"])
        other = tmp_path / "elsewhere" / "accounts.db"
        added = CliRunner().invoke(app, ["users", "add", "alice", "--database", f"sqlite:///{other}"])
    finally:
        os.umask(old)
    assert upgraded.exit_code == 0, upgraded.output
    assert added.exit_code == 0, added.output
    for database in (tmp_path / "home" / "gpuarena.db", other):
        assert stat.S_IMODE(database.stat().st_mode) == 0o600, database
        assert stat.S_IMODE(database.parent.stat().st_mode) == 0o700, database.parent
