"""A contest end to end with real processes: `gpuarena serve` with its embedded CPU runner,
an organizer creating a ccf-kernel contest from a TOML file, contestants submitting with
`gpuarena submit --contest`, the review queue and reviews from the CLI, and standings (table,
JSON and CSV) as computed by hand."""

from __future__ import annotations

import datetime as dt
import json

import pytest
from tests.service.processes import SOLUTIONS, _cli

pytestmark = pytest.mark.e2e

TOML = """
slug = "e2e-kernels"
title = "End-to-end kernels"
description = "Operators for **axpy**."
start = {start}
end = {end}
problems = ["axpy_dest"]
device_kinds = ["cpu"]
organizers = ["olga"]

[rule]
name = "ccf-kernel"
"""


def said(done) -> str:
    """What a command wrote to stderr, on one line (rich wraps at the terminal's width)."""
    return " ".join(done.stderr.split())


# One database (PostgreSQL, where the service's own site runs on SQLite: tests/service/test_end_to_end.py); the
# contest's queries run on both in the service lane (tests/service/test_contests_api.py).
@pytest.mark.parametrize("served", ["postgresql"], indirect=True)
def test_a_contest_from_file_to_standings(served, tmp_path) -> None:
    server, env = served
    tokens = {
        name: _cli("users", "add", name, "--role", role, env=env).stdout.split()[-1]
        for name, role in (("olga", "organiser"), ("alice", "participant"), ("bob", "participant"))
    }

    def as_user(name: str, *args: str, check: bool = True):
        return _cli(*args, "--server", server.url, "--token", tokens[name], env=env, check=check)

    now = dt.datetime.now(dt.UTC).replace(microsecond=0)
    contest = tmp_path / "contest.toml"
    contest.write_text(
        TOML.format(
            start=(now - dt.timedelta(hours=1)).isoformat().replace("+00:00", "Z"),
            end=(now + dt.timedelta(hours=1)).isoformat().replace("+00:00", "Z"),
        )
    )
    bad = tmp_path / "bad.toml"
    bad.write_text(
        TOML.format(
            start=now.isoformat().replace("+00:00", "Z"),
            end=(now - dt.timedelta(hours=1)).isoformat().replace("+00:00", "Z"),
        )
    )
    refused = as_user("olga", "contest", "create", str(bad), check=False)
    assert refused.returncode == 2 and "must end after it starts" in said(refused)
    not_staff = as_user("alice", "contest", "create", str(contest), check=False)
    assert not_staff.returncode == 2 and "needs an admin or organiser" in said(not_staff)
    made = as_user("olga", "contest", "create", str(contest))
    assert "contest e2e-kernels created: ccf-kernel" in made.stdout

    def submit(name: str, solution: str) -> dict:
        done = as_user(
            name,
            "submit",
            "axpy_dest",
            str(SOLUTIONS / solution),
            "--device",
            "cpu",
            "--contest",
            "e2e-kernels",
            "--json",
            check=False,
        )
        return json.loads(done.stdout)

    alice = submit("alice", "dest_good.py")
    bob = submit("bob", "dest_good.py")
    bob_wrong = submit("bob", "dest_skips_write.py")
    assert alice["status"] == "PASSED" and bob["status"] == "PASSED" and bob_wrong["status"] != "PASSED"
    outside = as_user(
        "alice",
        "submit",
        "axpy_dest",
        str(SOLUTIONS / "dest_good.py"),
        "--device",
        "cpu",
        "--mode",
        "test",
        "--contest",
        "e2e-kernels",
        check=False,
    )
    assert outside.returncode == 2 and "only ranked runs count" in said(outside)

    queue = json.loads(as_user("olga", "contest", "entries", "e2e-kernels", "--pending", "--json").stdout)
    assert sorted(e["submission_id"] for e in queue) == sorted([alice["submission_id"], bob["submission_id"]])
    refused = as_user("bob", "contest", "review", "e2e-kernels", str(bob["submission_id"]), "--accept", check=False)
    assert refused.returncode == 2 and "only the organizers" in said(refused)
    as_user(
        "olga",
        "contest",
        "review",
        "e2e-kernels",
        str(alice["submission_id"]),
        "--accept",
        "--comment",
        "tidy",
        "--bonus",
        "write_up",
    )
    as_user(
        "olga",
        "contest",
        "review",
        "e2e-kernels",
        str(bob["submission_id"]),
        "--accept",
        "--merged",
        "--comment",
        "merged upstream",
    )

    # by hand: a level-1 problem scores 5; bob's work was merged (+50): bob 55, alice 5
    shown = json.loads(_cli("contest", "standings", "e2e-kernels", "--server", server.url, "--json", env=env).stdout)
    assert [(r["rank"], r["contestant"], r["total"]) for r in shown["standings"]["rows"]] == [
        (1, "bob", 55.0),
        (2, "alice", 5.0),
    ]
    table = _cli("contest", "standings", "e2e-kernels", "--server", server.url, env=env).stdout
    assert "bob" in table and "55" in table
    csv = _cli("contest", "standings", "e2e-kernels", "--server", server.url, "--csv", env=env).stdout.splitlines()
    assert csv[0].split(",")[:3] == ["rank", "contestant", "total"] and csv[1].startswith("1,bob,55,")
    mine = json.loads(as_user("alice", "contest", "entries", "e2e-kernels", "--json").stdout)
    assert [(e["review"], e["review_comment"], e["bonus"]) for e in mine] == [("accepted", "tidy", ["write_up"])]
    listed = _cli("contest", "list", "--server", server.url, env={**env, "COLUMNS": "200"}).stdout
    assert "e2e-kernels" in listed and "running" in listed
