"""A frozen contest holds its late results everywhere (issue 46, item 4): an entry made during the
freeze shows its result to its author, the contest's organisers and admins only, on every
surface (the API's submissions list and record, the leaderboard and its CSV, the problem page
with its history, the home page's leaders and recent submissions, the user page), until the
contest ends; then it shows to everyone and its best joins the public leaderboard.

Before the fix, the contest's standings were frozen but alice's late 7.25 was everywhere else."""

from __future__ import annotations

import datetime as dt

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select, update
from tests.service.test_contests_api import NOW, Contest, evaluation
from tests.web.conftest import csrf_of

from gpuarena.service import leaderboard
from gpuarena.service.tables import BestPointRow, ContestRow, HeldBest, LeaderboardEntry, Problem, Submission

LATE = 7.25  # alice's entry during the freeze
EARLY = 1.5  # bob's run outside the contest: public all along
SHOWN = "7.250"  # how the pages print LATE


def _signed_in(api, headers: dict[str, str]) -> TestClient:
    client = TestClient(api.http.app)
    form = client.get("/signin")
    token = headers["Authorization"].removeprefix("Bearer ")
    reply = client.post(
        "/signin", data={"token": token, "csrf_token": csrf_of(form.text), "next": "/"}, follow_redirects=False
    )
    assert reply.status_code == 303, reply.text
    return client


class Frozen:
    """A contest in its freeze (started 3 h ago, frozen for the last 2 h, ending in 1 h) with
    alice's late entry judged, bob's public run beside it, and every kind of viewer."""

    def __init__(self, api):
        self.api = api
        self.c = Contest(api)
        self.alice, self.bob, self.carol = api.user("alice"), api.user("bob"), api.user("carol")
        self.admin, self.oscar = api.user("root", "admin"), api.user("oscar", "organiser")
        self.c.create(
            start=(NOW - dt.timedelta(hours=3)).isoformat(),
            end=(NOW + dt.timedelta(hours=1)).isoformat(),
            freeze_hours=2,
        )
        other = api.http.post(
            "/api/contests",
            json={
                "slug": "autumn",
                "title": "Another",
                "start": (NOW - dt.timedelta(hours=1)).isoformat(),
                "end": (NOW + dt.timedelta(hours=5)).isoformat(),
                "problems": ["axpy_dest"],
                "device_kinds": ["cpu"],
                "rule": {"name": "fastest"},
            },
            headers=self.oscar,
        )
        assert other.status_code == 201, other.text
        self.late = self.c.submit(self.alice).json()["id"]
        public = api.http.post(
            "/api/submissions",
            json={
                "problem": "axpy_dest",
                "device_kind": "cpu",
                "mode": "ranked",
                "solution": {
                    "name": "sol",
                    "manifest": {"language": "pytorch", "entry_point": "sol.py:solve"},
                    "sources": {"sol.py": "import torch\n\n\ndef solve(a, x, b, y):\n    y.copy_(b + a * x)\n"},
                },
            },
            headers=self.bob,
        )
        assert public.status_code == 201, public.text
        self.early = public.json()["id"]
        self.c.judge({self.late: evaluation(LATE), self.early: evaluation(EARLY)})
        self.privileged = {"alice": self.alice, "olga": self.c.olga, "root": self.admin}
        self.others = {"anonymous": {}, "bob": self.bob, "carol": self.carol, "oscar": self.oscar}

    def end(self) -> None:
        end_contest(self.api.db, "spring")


@pytest.fixture
def frozen(api) -> Frozen:
    return Frozen(api)


def test_the_late_entry_is_held_and_the_standings_are_frozen(frozen) -> None:
    api = frozen.api
    assert api.http.get("/api/contests/spring").json()["phase"] == "frozen"
    with api.db.read() as session:
        assert session.get(Submission, frozen.late).held_until is not None
        assert session.get(Submission, frozen.early).held_until is None
        # its best waits beside the public leaderboard, not in it
        assert session.scalar(select(func.count()).select_from(HeldBest)) == 1
        assert (
            session.scalar(select(LeaderboardEntry.user_id).where(LeaderboardEntry.submission_id == frozen.late))
            is None
        )


def test_api_submissions_list_holds_the_result(frozen) -> None:
    api = frozen.api
    for name, who in frozen.others.items():
        listed = {s["id"]: s for s in api.http.get("/api/submissions", headers=who).json()}
        held = listed[frozen.late]
        assert (held["status"], held["score"]) == ("HELD", None), name
        assert "shows when the contest ends" in held["reason"] and held["held_until"]
        assert listed[frozen.early]["score"] == EARLY
        for query in ({"status": "PASSED"}, {"status": "passed", "user": "alice"}, {"problem": "axpy_dest"}):
            found = api.http.get("/api/submissions", params=query, headers=who).json()
            assert all(s["score"] != LATE for s in found), (name, query)
            if "status" in query:  # a filter by result finds nothing held (its place would tell)
                assert frozen.late not in [s["id"] for s in found], (name, query)
    for name, who in frozen.privileged.items():
        listed = {s["id"]: s for s in api.http.get("/api/submissions", headers=who).json()}
        assert (listed[frozen.late]["status"], listed[frozen.late]["score"]) == ("PASSED", LATE), name
        found = api.http.get("/api/submissions", params={"status": "PASSED"}, headers=who).json()
        assert frozen.late in [s["id"] for s in found], name


def test_api_single_submission_holds_the_result_and_record(frozen) -> None:
    api = frozen.api
    for name, who in frozen.others.items():
        shown = api.http.get(f"/api/submissions/{frozen.late}", headers=who).json()
        assert (shown["status"], shown["score"], shown["evaluation"]) == ("HELD", None, None), name
        assert shown["done"] is True
        record = api.http.get(f"/submissions/{frozen.late}/record.json", headers=who).json()
        assert record["evaluation"] is None and record["status"] == "HELD"
    page = api.http.get(f"/submissions/{frozen.late}").text  # its web page, anonymous
    assert SHOWN not in page and "HELD" in page
    page = _signed_in(api, frozen.carol).get(f"/submissions/{frozen.late}").text
    assert SHOWN not in page and "HELD" in page
    assert SHOWN in _signed_in(api, frozen.c.olga).get(f"/submissions/{frozen.late}").text
    for name, who in frozen.privileged.items():
        shown = api.http.get(f"/api/submissions/{frozen.late}", headers=who).json()
        assert (shown["status"], shown["score"]) == ("PASSED", LATE), name
        assert shown["evaluation"]["score"] == LATE


def test_api_leaderboard_holds_the_result(frozen) -> None:
    api = frozen.api
    params = {"problem": "axpy_dest", "device_kind": "cpu"}

    def board(who: dict) -> list[tuple]:
        answer = api.http.get("/api/leaderboard", params=params, headers=who)
        assert answer.status_code == 200, answer.text
        return [(r["rank"], r["user"], r["score"]) for r in answer.json()["rows"]]

    for name, who in frozen.others.items():
        assert board(who) == [(1, "bob", EARLY)], name
        csv = api.http.get("/leaderboard.csv", params=params).text
        assert "alice" not in csv and "bob" in csv
    for name, who in frozen.privileged.items():
        assert board(who) == [(1, "alice", LATE), (2, "bob", EARLY)], name
    frozen.end()
    assert board({}) == [(1, "alice", LATE), (2, "bob", EARLY)]
    with api.db.read() as session:  # folded into the public leaderboard by the read
        assert session.scalar(select(func.count()).select_from(HeldBest)) == 0
        assert (
            session.scalar(select(LeaderboardEntry.score).where(LeaderboardEntry.submission_id == frozen.late)) == LATE
        )


def test_problem_page_holds_the_result_and_its_history_point(frozen) -> None:
    api = frozen.api
    page = api.http.get("/problems/axpy_dest").text
    assert SHOWN not in page and f'/submissions/{frozen.late}"' not in page
    assert "1.500" in page and "/users/bob" in page
    for name in ("bob", "carol", "oscar"):
        page = _signed_in(api, frozen.others[name]).get("/problems/axpy_dest").text
        assert SHOWN not in page, name
    for name, who in frozen.privileged.items():
        page = _signed_in(api, who).get("/problems/axpy_dest").text
        assert SHOWN in page and f'/submissions/{frozen.late}"' in page, name
    frozen.end()
    page = api.http.get("/problems/axpy_dest").text
    history = page.split("Best score over time", 1)[1].split("</table>", 1)[0]
    assert SHOWN in history and "alice" in history


def test_home_page_leaders_and_recent_hold_the_result(frozen) -> None:
    api = frozen.api

    def leaders(client: TestClient) -> str:
        page = client.get("/").text
        return page.split('class="grid leaders"', 1)[1].split("</table>", 1)[0]

    def recent(client: TestClient) -> str:
        return client.get("/").text.split('class="grid submissions"', 1)[1].split("</table>", 1)[0]

    anonymous = api.http
    assert "bob" in leaders(anonymous) and "alice" not in leaders(anonymous)
    assert SHOWN not in recent(anonymous) and "HELD" in recent(anonymous)
    carol = _signed_in(api, frozen.carol)
    assert "alice" not in leaders(carol) and SHOWN not in recent(carol)
    olga = _signed_in(api, frozen.c.olga)
    assert "alice" in leaders(olga) and SHOWN in recent(olga)
    frozen.end()
    assert "alice" in leaders(anonymous) and SHOWN in recent(anonymous)


def test_user_page_holds_the_result(frozen) -> None:
    api = frozen.api
    page = api.http.get("/users/alice").text
    assert SHOWN not in page and "No leaderboard entries yet" in page and "HELD" in page
    results = api.http.get("/results.json", params={"user": "alice"}).json()
    assert [(r["status"], r["score"]) for r in results] == [("HELD", None)]
    assert SHOWN not in _signed_in(api, frozen.bob).get("/users/alice").text
    for name, who in frozen.privileged.items():
        page = _signed_in(api, who).get("/users/alice").text
        ranks = page.split("Best ranks", 1)[1].split("</table>", 1)[0]
        assert SHOWN in ranks and "1 / 2" in ranks, name
    frozen.end()
    ranks = api.http.get("/users/alice").text.split("Best ranks", 1)[1].split("</table>", 1)[0]
    assert SHOWN in ranks and "1 / 2" in ranks


def test_the_kept_rows_are_what_a_rebuild_from_the_submissions_gives(frozen) -> None:
    """record_result, result by result, writes what leaderboard.rebuild (and migration 0008)
    builds from the stored submissions: during the freeze and after its release."""
    api = frozen.api

    def kept() -> tuple:
        with api.db.read() as session:
            return tuple(
                sorted(tuple(r) for r in session.execute(select(*table.__table__.columns).select_from(table)).all())
                for table in (LeaderboardEntry, HeldBest)
            ) + (
                sorted(
                    (r.submission_id, r.score, r.held_until is not None) for r in session.scalars(select(BestPointRow))
                ),
            )

    before = kept()
    with api.db.write() as session:
        leaderboard.rebuild(session)
    assert kept() == before
    with api.db.read() as session:
        problem_id = session.scalar(select(Problem.id).where(Problem.slug == "axpy_dest", Problem.current))
        public = leaderboard.read_rows(session, problem_id, "cpu")
        assert [(name, score) for score, _, _, name, *_ in public] == [
            (u, s) for u, s, _ in leaderboard.recompute(session, problem_id, "cpu")
        ]


def end_contest(db, slug: str) -> None:
    """The contest ends: its end, and the holds it gave, are now in the past."""
    past = (dt.datetime.now(dt.UTC) - dt.timedelta(seconds=1)).replace(tzinfo=None)
    with db.write() as session:
        row = session.scalar(select(ContestRow).where(ContestRow.slug == slug))
        assert row is not None
        row.config = {**row.config, "end": past.isoformat() + "Z", "freeze_hours": 1}
        row.end = past
        session.execute(update(Submission).where(Submission.held_until.is_not(None)).values(held_until=past))
        session.execute(update(HeldBest).values(held_until=past))
        session.execute(update(BestPointRow).where(BestPointRow.held_until.is_not(None)).values(held_until=past))
