"""Contests through the API on a real database: creation and its bad input, entering
submissions (window, mode, team, daily limit), organizer review, standings as computed by
hand (with the tie rule that decided each place), the freeze, CSV export, resubmission flags
and similarity pairs."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from sqlalchemy import func, select
from tests.service.conftest import GOOD, submission_body

from gpuarena.contracts.records import Evaluation, Status, WorkloadResult
from gpuarena.service.tables import ContestEntry, ContestRow, Submission

NOW = dt.datetime.now(dt.UTC).replace(microsecond=0)


def contest_body(slug: str = "spring", rule: dict | None = None, **fields) -> dict:
    body = {
        "slug": slug,
        "title": "Spring kernels",
        "description": "# Spring\nFastest **axpy** wins.",
        "start": (NOW - dt.timedelta(hours=1)).isoformat(),
        "end": (NOW + dt.timedelta(hours=2)).isoformat(),
        "problems": ["axpy_dest"],
        "device_kinds": ["cpu"],
        "rule": rule or {"name": "fastest"},
    }
    body.update(fields)
    return body


def evaluation(
    score: float | None,
    low: float | None = None,
    high: float | None = None,
    error: float = 1e-6,
    status: str = "PASSED",
) -> dict:
    workload = WorkloadResult(
        name="w",
        status=Status(status),
        speedup=score,
        max_abs_error=error,
        max_rel_error=error,
        speedup_ci95=(low or score * 0.98, high or score * 1.02) if score else None,
    )
    return Evaluation(
        status=Status(status),
        problem="axpy_dest",
        solution_hash="0" * 64,
        device="cpu",
        mode="ranked",
        score=score,
        workloads=[workload],
    ).model_dump(mode="json")


class Contest:
    """An organizer, a runner and helpers to submit into a contest and post results."""

    def __init__(self, api):
        self.api = api
        self.runner_headers, self.runner_id = api.runner()
        self.olga = api.user("olga", "organiser")

    def create(self, **fields) -> dict:
        answer = self.api.http.post("/api/contests", json=contest_body(**fields), headers=self.olga)
        assert answer.status_code == 201, answer.text
        return answer.json()

    def submit(self, who: dict, slug: str = "spring", source: str = GOOD, **fields):
        body = {**submission_body(**fields), "contest": slug}
        body["solution"]["sources"]["sol.py"] = source
        return self.api.http.post("/api/submissions", json=body, headers=who)

    def judge(self, results: dict[int, dict]) -> None:
        """Claim every queued job and post the given evaluation for its submission."""
        while (
            answer := self.api.http.post(
                "/api/runner/claim",
                json={"runner_id": self.runner_id, "device_kinds": ["cpu"]},
                headers=self.runner_headers,
            )
        ).status_code == 200:
            job = answer.json()
            posted = self.api.http.post(
                f"/api/runner/jobs/{job['job_id']}/result",
                headers=self.runner_headers,
                json={"lease_token": job["lease_token"], "evaluation": results[job["submission_id"]]},
            )
            assert posted.status_code == 200, posted.text

    def standings(self, slug: str = "spring", who: dict | None = None, **params) -> dict:
        answer = self.api.http.get(f"/api/contests/{slug}/standings", params=params, headers=who or {})
        assert answer.status_code == 200, answer.text
        return answer.json()


def rows(standings: dict) -> list[tuple]:
    return [(r["rank"], r["contestant"], r["total"], r["tie_break"]) for r in standings["standings"]["rows"]]


def test_every_mistake_of_a_contest_file_is_named_at_once_and_nothing_is_written(api) -> None:
    """The docs' contest.toml used to fail three times in a row, one mistake at a time."""
    c = Contest(api)
    c.create(slug="taken")
    body = contest_body(
        slug="taken",
        problems=["axpy_dest", "level9/nope"],
        organizers=["otto"],
        entries="team",
        teams=[{"name": "red", "members": ["carol"]}],
    )
    answer = api.http.post("/api/contests", json=body, headers=c.olga)
    assert answer.status_code == 400, answer.text
    error = answer.json()["error"]
    for mistake in (
        "4 mistakes",
        "a contest named 'taken' exists already",
        "unknown problem 'level9/nope'",
        "organizers: no user named 'otto'",
        "team members: no user named 'carol'",
    ):
        assert mistake in error, error
    with api.db.read() as session:
        assert session.scalar(select(func.count()).select_from(ContestRow)) == 1


def test_a_contest_on_a_device_kind_no_runner_has_brought_is_made_with_a_warning(api) -> None:
    c = Contest(api)
    made = c.create(slug="later", device_kinds=["B200"])
    assert made["spec"]["device_kinds"] == ["B200"]
    assert len(made["warnings"]) == 1 and "no runner of device kind 'B200' has been seen yet" in made["warnings"][0]
    assert c.create(slug="now")["warnings"] == []  # the cpu runner said hello just now
    assert api.http.get("/api/contests/later").json()["warnings"] == []  # a warning belongs to the creation


def test_bad_contests_get_a_clear_error_and_write_nothing(api) -> None:
    c = Contest(api)
    alice = api.user("alice")
    cases = [
        (c.olga, contest_body(end=(NOW - dt.timedelta(hours=3)).isoformat()), 422, "must end after it starts"),
        (c.olga, contest_body(problems=["level9/nope"]), 400, "unknown problem 'level9/nope'"),
        (c.olga, contest_body(rule={"name": "fastest", "points": [1, 5]}), 422, "must not increase"),
        (c.olga, contest_body(rule={"name": "borda"}), 422, "rule"),
        (c.olga, contest_body(organizers=["nobody"]), 400, "no user named 'nobody'"),
        (
            c.olga,
            contest_body(
                entries="team", teams=[{"name": "a", "members": ["alice"]}, {"name": "b", "members": ["alice"]}]
            ),
            422,
            "one team only",
        ),
        (alice, contest_body(), 403, "needs an admin or organiser"),
    ]
    for who, body, code, message in cases:
        answer = api.http.post("/api/contests", json=body, headers=who)
        assert answer.status_code == code, (body, answer.text)
        assert message in answer.json()["error"], answer.text
    with api.db.read() as session:
        assert session.scalar(select(func.count()).select_from(ContestRow)) == 0
    c.create()
    again = api.http.post("/api/contests", json=contest_body(), headers=c.olga)
    assert again.status_code == 400 and "exists already" in again.json()["error"]
    assert [x["spec"]["slug"] for x in api.http.get("/api/contests").json()] == ["spring"]


def test_an_oversized_contest_file_is_refused_before_it_is_validated(api) -> None:
    """20,000 problem ids (189 KB) held the server's event loop for 30 s: the uniqueness check
    was quadratic and ran, on the body, before the role check. A participant is now refused by
    role before the body is validated, the check is linear, and a contest has at most
    MAX_PROBLEMS problems."""
    from gpuarena.contests.model import MAX_PROBLEMS

    c = Contest(api)
    alice = api.user("alice")
    flood = contest_body(problems=[f"p{i}" for i in range(20_000)])
    refused = api.http.post("/api/contests", json=flood, headers=alice)
    assert refused.status_code == 403 and "needs an admin or organiser" in refused.json()["error"]
    too_many = api.http.post("/api/contests", json=flood, headers=c.olga)
    assert too_many.status_code == 422 and f"at most {MAX_PROBLEMS}" in too_many.text
    repeated = api.http.post("/api/contests", json=contest_body(problems=["p1", "p2"] * 1000), headers=c.olga)
    assert repeated.status_code == 422 and "repeated: p1, p2" in repeated.json()["error"]
    assert api.http.get("/api/health").status_code == 200


def test_entries_are_checked_when_submitted_and_a_refused_one_leaves_nothing(api) -> None:
    c = Contest(api)
    alice = api.user("alice")
    c.create(daily_submission_limit=2)
    c.create(slug="later", start=(NOW + dt.timedelta(days=1)).isoformat(), end=(NOW + dt.timedelta(days=2)).isoformat())
    c.create(slug="over", start=(NOW - dt.timedelta(days=2)).isoformat(), end=(NOW - dt.timedelta(days=1)).isoformat())
    c.create(slug="teams", entries="team", teams=[{"name": "red", "members": ["olga"]}])
    refusals = [
        (dict(slug="later"), 400, "has not started"),
        (dict(slug="over"), 400, "ended"),
        (dict(mode="benchmark"), 400, "only ranked runs count"),
        (dict(slug="nope"), 404, "no contest 'nope'"),
        (dict(slug="teams"), 403, "on no team"),
    ]
    for fields, code, message in refusals:
        answer = c.submit(alice, **fields)
        assert answer.status_code == code and message in answer.json()["error"], answer.text
    assert c.submit(alice).status_code == 201
    assert c.submit(alice).status_code == 201
    third = c.submit(alice)
    assert third.status_code == 400 and "the limit is 2 a day" in third.json()["error"]
    with api.db.read() as session:
        assert session.scalar(select(func.count()).select_from(Submission)) == 2
        assert session.scalar(select(func.count()).select_from(ContestEntry)) == 2
    assert c.submit(c.olga, slug="teams").status_code == 201  # on a team: counts for the team
    entries = api.http.get("/api/contests/teams/entries", headers=c.olga).json()
    assert [(e["contestant"], e["user"]) for e in entries] == [("red", "olga")]
    # organizers add teams later; a user stays on one team; others cannot
    assert (
        api.http.put(
            "/api/contests/teams/teams", json={"name": "blue", "members": ["alice"]}, headers=alice
        ).status_code
        == 403
    )
    twice = api.http.put("/api/contests/teams/teams", json={"name": "blue", "members": ["olga"]}, headers=c.olga)
    assert twice.status_code == 400 and "olga is on red" in twice.json()["error"]
    added = api.http.put("/api/contests/teams/teams", json={"name": "blue", "members": ["alice"]}, headers=c.olga)
    assert added.status_code == 200 and [t["name"] for t in added.json()["spec"]["teams"]] == ["red", "blue"]
    assert c.submit(alice, slug="teams").status_code == 201
    mine = api.http.get("/api/contests/teams/entries", headers=alice).json()
    assert [(e["contestant"], e["user"]) for e in mine] == [("blue", "alice")]  # her team's, not red's


def test_fastest_standings_as_computed_by_hand_with_ties_flags_and_csv(api) -> None:
    c = Contest(api)
    alice, bob, carol = api.user("alice"), api.user("bob"), api.user("carol")
    c.create()
    ids = {name: c.submit(who).json()["id"] for name, who in (("alice", alice), ("bob", bob), ("carol", carol))}
    resubmit = c.submit(alice).json()["id"]  # within the first's interval: flagged, does not count
    c.judge(
        {
            ids["alice"]: evaluation(2.0),
            ids["bob"]: evaluation(3.0),
            ids["carol"]: evaluation(2.0),
            resubmit: evaluation(2.02, low=1.95, high=2.1),
        }
    )
    table = c.standings()
    # by hand: bob 3.0 first (10 points); alice and carol both 2.0, alice earlier: 8, carol 6
    assert rows(table) == [(1, "bob", 10.0, None), (2, "alice", 8.0, None), (3, "carol", 6.0, None)]
    assert table["live"] and not table["frozen"]
    best = table["per_problem_best"]
    assert [(b["problem"], b["contestant"], b["score"]) for b in best] == [("axpy_dest", "bob", 3.0)]
    mine = api.http.get("/api/contests/spring/entries", headers=alice).json()
    assert [e["submission_id"] for e in mine] == [resubmit, ids["alice"]]  # her own only, newest first
    assert mine[0]["flagged"] and "does not clear your best so far" in mine[0]["flag_reason"]
    assert not mine[1]["flagged"] and mine[1]["score_low"] == 1.96
    csv = api.http.get("/api/contests/spring/standings.csv")
    assert csv.status_code == 200 and csv.headers["content-type"].startswith("text/csv")
    lines = csv.text.splitlines()
    assert lines[0].startswith("rank,contestant,total,first places,solved,tie_break,axpy_dest@cpu")
    assert lines[1:] == ["1,bob,10,1,1,,10", "2,alice,8,0,1,,8", "3,carol,6,0,1,,6"]


def test_geomean_ties_name_the_rule_that_decided_them(api) -> None:
    c = Contest(api)
    alice, bob = api.user("alice"), api.user("bob")
    c.create(rule={"name": "fastest", "aggregation": "geomean", "floor": 0.5})
    a, b = c.submit(alice).json()["id"], c.submit(bob).json()["id"]
    c.judge({a: evaluation(0.4), b: evaluation(None, status="WRONG_VALUES")})
    # by hand: alice's 0.4 counts as the floor 0.5, bob unsolved counts 0.5 too: equal totals;
    # alice solved one problem, bob none: "more problems solved" puts alice first. Bob has an
    # entry but no pass: he is listed with the floor.
    assert rows(c.standings()) == [(1, "alice", 0.5, None), (2, "bob", 0.5, "more problems solved")]


def test_ccf_kernel_review_bonus_and_permissions(api) -> None:
    c = Contest(api)
    alice, bob = api.user("alice"), api.user("bob")
    other_organiser = api.user("otto", "organiser")
    c.create(rule={"name": "ccf-kernel"})
    a, b = c.submit(alice).json()["id"], c.submit(bob).json()["id"]
    failed = c.submit(bob).json()["id"]
    c.judge({a: evaluation(1.1), b: evaluation(1.3), failed: evaluation(None, status="WRONG_VALUES")})
    queue = api.http.get(
        "/api/contests/spring/entries", params={"review": "pending", "passed": True}, headers=c.olga
    ).json()
    assert sorted(e["submission_id"] for e in queue) == [a, b]
    for who in (bob, other_organiser):  # a contestant, an organiser of no part in this contest
        refused = api.http.post(f"/api/contests/spring/entries/{a}/review", json={"decision": "accepted"}, headers=who)
        assert refused.status_code == 403 and "only the organizers of spring" in refused.json()["error"]
    cannot = api.http.post(
        f"/api/contests/spring/entries/{failed}/review", json={"decision": "accepted"}, headers=c.olga
    )
    assert cannot.status_code == 400 and "only a run that passed" in cannot.json()["error"]
    bad_bonus = api.http.post(
        f"/api/contests/spring/entries/{a}/review", json={"decision": "accepted", "bonus": ["charm"]}, headers=c.olga
    )
    assert bad_bonus.status_code == 422
    assert c.standings()["standings"]["rows"][0]["total"] == 0  # nothing accepted yet
    for sid, body in (
        (a, {"decision": "accepted", "comment": "clean", "bonus": ["write_up"]}),
        (b, {"decision": "accepted", "comment": "ok"}),
    ):
        answer = api.http.post(f"/api/contests/spring/entries/{sid}/review", json=body, headers=c.olga)
        assert answer.status_code == 200, answer.text
    # by hand: level 1 problem: 5 points each; alice's bonus item breaks the tie
    assert rows(c.standings()) == [(1, "alice", 5.0, None), (2, "bob", 5.0, "more bonus items")]
    merged = api.http.post(
        f"/api/contests/spring/entries/{b}/review",
        json={"decision": "accepted", "comment": "merged upstream", "merged_upstream": True},
        headers=c.olga,
    )
    assert merged.json()["merged_upstream"] and merged.json()["reviewer"] == "olga"
    assert rows(c.standings()) == [(1, "bob", 55.0, None), (2, "alice", 5.0, None)]
    seen = api.http.get("/api/contests/spring/entries", headers=alice).json()
    assert [(e["review"], e["review_comment"]) for e in seen] == [("accepted", "clean")]
    rejected = api.http.post(
        f"/api/contests/spring/entries/{a}/review", json={"decision": "rejected", "comment": "copied"}, headers=c.olga
    )
    assert rejected.json()["review"] == "rejected"
    assert api.http.get("/api/contests/spring/entries", headers=alice).json()[0]["review_comment"] == "copied"
    assert rows(c.standings())[1] == (2, "alice", 0.0, None)


def test_frozen_standings_hide_late_entries_but_not_from_organizers(api) -> None:
    c = Contest(api)
    alice = api.user("alice")
    c.create(
        start=(NOW - dt.timedelta(hours=3)).isoformat(), end=(NOW + dt.timedelta(hours=1)).isoformat(), freeze_hours=2
    )
    a = c.submit(alice).json()["id"]
    c.judge({a: evaluation(2.0)})
    public = c.standings()
    assert public["frozen"] and not public["live"] and public["standings"]["rows"] == []
    assert api.http.get("/api/contests/spring").json()["phase"] == "frozen"
    refused = api.http.get("/api/contests/spring/standings", params={"live": True}, headers=alice)
    assert refused.status_code == 403 and "frozen" in refused.json()["error"]
    live = c.standings(who=c.olga, live=True)
    assert live["live"] and rows(live) == [(1, "alice", 10.0, None)]


def test_an_entry_s_code_is_seen_by_its_contest_s_organizers_not_another_contest_s(api) -> None:
    """The organiser role was global: an organiser of contest B read the code and log of contest
    A's entries. Now a submission's private parts are its author's, admins', the problem's
    owner's and its own contest's organisers'."""
    c = Contest(api)
    alice, bob = api.user("alice"), api.user("bob")
    oscar, admin = api.user("oscar", "organiser"), api.user("root", "admin")
    c.create()
    made = api.http.post("/api/contests", json=contest_body(slug="autumn"), headers=oscar)
    assert made.status_code == 201, made.text
    entry = c.submit(alice).json()["id"]
    failing = evaluation(None, status="RUNTIME_ERROR")
    failing.update(reason="boom", log="Traceback: secret_helper() at sol.py line 3")
    c.judge({entry: failing})
    for who, code in ((alice, 200), (c.olga, 200), (admin, 200), (oscar, 403), (bob, 403)):
        assert api.http.get(f"/api/submissions/{entry}/code", headers=who).status_code == code, who
    shown = api.http.get(f"/api/submissions/{entry}", headers=oscar).json()
    assert "secret_helper" not in str(shown.get("evaluation"))
    assert "secret_helper" in str(api.http.get(f"/api/submissions/{entry}", headers=c.olga).json()["evaluation"])


def test_similar_code_is_flagged_to_organizers_only(api) -> None:
    c = Contest(api)
    alice, bob, carol = api.user("alice"), api.user("bob"), api.user("carol")
    c.create()
    copied = GOOD.replace("solve(a, x, b, y)", "solve(p, q, r, out)").replace("b, a, x, out=y", "r, p, q, out=out")
    honest = "import torch\n\n\ndef solve(a, x, b, y):\n    y.copy_(b + a * x)\n"
    ids = [c.submit(who, source=src).json()["id"] for who, src in ((alice, GOOD), (bob, copied), (carol, honest))]
    c.judge({i: evaluation(1.0) for i in ids})
    assert api.http.get("/api/contests/spring/similar", headers=alice).status_code == 403
    pairs = api.http.get("/api/contests/spring/similar", params={"threshold": 0.5}, headers=c.olga).json()
    assert [(p["first_contestant"], p["second_contestant"]) for p in pairs] == [("alice", "bob")]
    assert pairs[0]["similarity"] > 0.9


def test_kept_standings_follow_results_reviews_and_slow_commits(api, monkeypatch) -> None:
    """Standings are kept in the process and brought up to date from the entries changed
    since: a result, a review, and a write stamped before the newest one seen (a slow
    transaction that committed late) all show on the next read. Computed in this process (not
    the standings child), so that what it keeps can be seen here."""
    from sqlalchemy import update

    from gpuarena.service import contest_standings
    from gpuarena.service.tables import utcnow

    monkeypatch.setenv("GPUARENA_STANDINGS_PROCESS", "0")
    kept_before = len(contest_standings._kept)
    c = Contest(api)
    alice, bob, carol = api.user("alice"), api.user("bob"), api.user("carol")
    c.create(rule={"name": "ccf-kernel"})
    a = c.submit(alice).json()["id"]
    c.judge({a: evaluation(2.0)})
    assert rows(c.standings()) == [(1, "alice", 0.0, None)]  # passed, not reviewed yet
    b, late = c.submit(bob).json()["id"], c.submit(carol).json()["id"]
    c.judge({b: evaluation(3.0), late: evaluation(None, status="WRONG_VALUES")})
    assert [r[1] for r in rows(c.standings())] == ["alice", "bob", "carol"]
    api.http.post(f"/api/contests/spring/entries/{b}/review", json={"decision": "accepted"}, headers=c.olga)
    assert rows(c.standings())[0] == (1, "bob", 5.0, None)
    # carol's verdict rewritten by a transaction stamped half a minute before the newest change
    with api.db.write() as session:
        session.execute(update(Submission).where(Submission.id == late).values(status="PASSED", score=4.0))
        session.execute(
            update(ContestEntry)
            .where(ContestEntry.submission_id == late)
            .values(review="accepted", merged_upstream=True, updated_at=utcnow() - dt.timedelta(seconds=30))
        )
    assert rows(c.standings())[0] == (1, "carol", 55.0, None)
    assert len(contest_standings._kept) == kept_before + 1  # this contest's, kept between the reads


def test_the_standings_json_is_the_standings_record_kept_until_a_change(api, monkeypatch) -> None:
    """The API's standings JSON is serialized in chunks of rows and kept per change: the same
    document as the record itself, the same bytes until an entry changes."""
    from gpuarena.service import contest_standings, contests

    monkeypatch.setattr(contest_standings, "CHUNK", 1)  # several chunks from a handful of rows
    c = Contest(api)
    c.create()
    ids = [c.submit(api.user(name)).json()["id"] for name in ("alice", "bob", "carol")]
    c.judge({i: evaluation(1.0 + k) for k, i in enumerate(ids)})
    first = c.standings()
    with api.db.read() as session:
        row = contests.get(session, "spring")
        record = contest_standings.standings(session, row, None)
        # the API's came from the standings process, computed at its own moment
        assert first.pop("computed_at") and first == record.model_dump(mode="json", exclude={"computed_at"})
        assert len(first["standings"]["rows"]) == 3
        assert contest_standings.standings_json(session, row, None) is contest_standings.standings_json(
            session, row, None
        )


def test_api_standings_are_computed_beside_the_server_process(api, monkeypatch) -> None:
    """GET .../standings is answered by the standings process (standings_process.py), so the
    server process keeps no entries of the contest; a child that dies is replaced; with
    GPUARENA_STANDINGS_PROCESS=0 the server process computes them itself, to the same rows."""
    import os
    import signal

    from gpuarena.service import contest_standings, standings_process

    c = Contest(api)
    c.create()
    ids = [c.submit(api.user(name)).json()["id"] for name in ("alice", "bob")]
    c.judge({i: evaluation(2.0 - k) for k, i in enumerate(ids)})
    with api.db.read() as session:
        contest_id = session.scalars(select(ContestRow.id).where(ContestRow.slug == "spring")).one()
    contest_standings._kept.clear()
    beside = c.standings()
    assert [r["contestant"] for r in beside["standings"]["rows"]] == ["alice", "bob"]
    assert not [key for key in contest_standings._kept if key[1] == contest_id]
    for pid in list(standings_process._pool._processes):
        os.kill(pid, signal.SIGKILL)
    assert c.standings()["standings"]["rows"] == beside["standings"]["rows"]
    monkeypatch.setenv("GPUARENA_STANDINGS_PROCESS", "0")
    here = c.standings()
    assert here["standings"]["rows"] == beside["standings"]["rows"]
    assert [key for key in contest_standings._kept if key[1] == contest_id]


def test_the_docs_contest_file_names_all_its_mistakes_at_once_and_warns_of_an_unseen_device(
    api, live, tmp_path, monkeypatch
) -> None:
    """`gpuarena contest create` with docs/contests.md's own contest.toml: one refusal that
    names every mistake, then (mistakes fixed, still no H100 runner) the contest with a warning."""
    from typer.testing import CliRunner

    from gpuarena.cli.app import app

    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    docs = (Path(__file__).resolve().parents[2] / "docs" / "contests.md").read_text()
    text = docs.split("cat > contest.toml <<'EOF'\n", 1)[1].split("\nEOF\n", 1)[0]
    path = tmp_path / "contest.toml"
    path.write_text(text)
    api.runner()  # a cpu runner: the file's H100 has none
    olga = api.user("olga", "organiser")["Authorization"].removeprefix("Bearer ")

    def create() -> object:
        return CliRunner().invoke(app, ["contest", "create", str(path), "--server", live, "--token", olga])

    refused = create()
    assert refused.exit_code == 2, refused.output
    for mistake in ("2 mistakes", "'level1/softmax', 'level2/...'", "organizers: no user named 'otto'"):
        assert mistake in refused.stderr, refused.stderr
    path.write_text(text.replace('["level1/softmax", "level2/..."]', '["axpy_dest"]'))
    api.user("otto")
    made = create()
    assert made.exit_code == 0, made.output
    assert "contest spring-2027 created" in made.stdout
    assert "warning: no runner of device kind 'H100' has been seen yet" in made.stderr
