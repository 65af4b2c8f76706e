"""The bounty board's API against a real database (SQLite and PostgreSQL): every transition and
its history, who may do what, bad input that changes nothing, lapsing claim locks and passed
deadlines, verification by the claimer's ranked run alone, and the CSV and JSON exports."""

from __future__ import annotations

import csv
import datetime as dt
import io
import threading

import pytest
from sqlalchemy import func, select, update
from tests.service.conftest import submission_body

from gpuarena.contracts.records import Evaluation, Status
from gpuarena.service import bounties
from gpuarena.service.bounty_schemas import EXPORT_FIELDS
from gpuarena.service.tables import Bounty, BountyEvent, Submission, utcnow

SPEED = {
    "title": "axpy 2x on the CPU",
    "reward_amount": "500",
    "currency": "USD",
    "category": "speed",
    "problem": "axpy_dest",
    "device_kind": "cpu",
    "target_over": "reference",
    "target_speedup": 2.0,
}


class Board:
    """The API with an organiser, two participants and a runner bringing cpu and H100."""

    def __init__(self, api):
        self.api, self.http = api, api.http
        self.runner_headers, self.runner_id = api.runner(kinds=("cpu", "H100"))
        self.org, self.alice, self.bob = api.user("org", "organiser"), api.user("alice"), api.user("bob")

    def create(self, **fields) -> dict:
        made = self.http.post("/api/bounties", json={**SPEED, **fields}, headers=self.org)
        assert made.status_code == 201, made.text
        return made.json()

    def act(self, bounty_id: int, action: str, who: dict, note: str | None = None, status: int = 200) -> dict:
        answer = self.http.post(
            f"/api/bounties/{bounty_id}/{action}", headers=who, json=None if note is None else {"note": note}
        )
        assert answer.status_code == status, answer.text
        return answer.json()

    def get(self, bounty_id: int) -> dict:
        return self.http.get(f"/api/bounties/{bounty_id}").json()

    def run(
        self, who: dict, status: str = "PASSED", score: float | None = 2.5, mode: str = "ranked", kind: str = "cpu"
    ) -> int:
        """Queue a submission, then finish it as a runner would, with this status and score."""
        made = self.http.post("/api/submissions", json=submission_body(mode=mode, device_kind=kind), headers=who)
        assert made.status_code == 201, made.text
        sid = made.json()["id"]
        self.finish(sid, status, score, kind)
        return sid

    def finish(self, sid: int, status: str = "PASSED", score: float | None = 2.5, kind: str = "cpu") -> None:
        job = self.http.post(
            "/api/runner/claim", json={"runner_id": self.runner_id, "device_kinds": [kind]}, headers=self.runner_headers
        ).json()
        assert job["submission_id"] == sid
        record = Evaluation(
            status=Status(status),
            problem="axpy_dest",
            solution_hash="0" * 64,
            device="cpu",
            mode=job["mode"],
            score=score,
        ).model_dump(mode="json")
        posted = self.http.post(
            f"/api/runner/jobs/{job['job_id']}/result",
            headers=self.runner_headers,
            json={"lease_token": job["lease_token"], "evaluation": record},
        )
        assert posted.status_code == 200, posted.text

    def set(self, bounty_id: int, **values) -> None:
        """Move time for one bounty: write its expiry or deadline directly."""
        with self.api.db.write() as session:
            session.execute(update(Bounty).where(Bounty.id == bounty_id).values(**values))

    def snapshot(self) -> tuple:
        """Everything a refused request must leave as it was."""
        with self.api.db.read() as session:
            rows = session.execute(
                select(
                    Bounty.id, Bounty.state, Bounty.claimer_id, Bounty.claim_expires_at, Bounty.submission_id
                ).order_by(Bounty.id)
            ).all()
            return tuple(rows), session.scalar(select(func.count()).select_from(BountyEvent))


@pytest.fixture
def board(api) -> Board:
    return Board(api)


def _history(bounty: dict) -> list[tuple]:
    return [(e["action"], e["actor"], e["from_state"], e["to_state"]) for e in bounty["history"]]


def test_a_speed_bounty_goes_open_claimed_submitted_verified_paid(board) -> None:
    made = board.create()
    assert made["state"] == "open" and made["reward_amount"] == "500" and made["required_score"] == 2.0
    assert made["baseline_score"] == 1.0 and "at least 2x over the reference" in made["target"]
    before = utcnow()
    claimed = board.act(made["id"], "claim", board.alice)
    expires = dt.datetime.fromisoformat(claimed["claim_expires_at"])
    assert claimed["state"] == "claimed" and claimed["claimer"] == "alice"
    assert before + dt.timedelta(days=7) <= expires <= utcnow() + dt.timedelta(days=7)

    made_run = board.http.post("/api/submissions", json=submission_body(), headers=board.alice).json()
    assert board.get(made["id"])["state"] == "submitted"  # queueing the ranked run submits it
    board.finish(made_run["id"], score=2.5)
    verified = board.get(made["id"])
    assert verified["state"] == "verified" and verified["submission_id"] == made_run["id"]
    assert (verified["claimer"], verified["claim_expires_at"]) == ("alice", None)  # the winner; no lock to run out
    paid = board.act(made["id"], "pay", board.org, note="wire 2026-12-01")
    assert paid["state"] == "paid"
    assert _history(paid) == [
        ("created", "org", "", "open"),
        ("claimed", "alice", "open", "claimed"),
        ("submitted", "alice", "claimed", "submitted"),
        ("verified", None, "submitted", "verified"),
        ("paid", "org", "verified", "paid"),
    ]
    assert f"#{made_run['id']}" in paid["history"][3]["note"] and paid["history"][4]["note"] == "wire 2026-12-01"
    times = [dt.datetime.fromisoformat(e["at"]) for e in paid["history"]]
    assert times == sorted(times) and before - dt.timedelta(minutes=1) < times[0] <= utcnow()


def test_only_the_claimer_s_ranked_passing_run_on_its_kind_meeting_the_target_verifies(board) -> None:
    bounty = board.create()["id"]
    board.act(bounty, "claim", board.alice)
    board.run(board.bob, score=9.0)  # not the claimer
    board.run(board.alice, score=9.0, mode="benchmark")  # not ranked
    board.run(board.alice, score=9.0, kind="H100")  # another device kind
    assert board.get(bounty)["state"] == "claimed"
    short = board.run(board.alice, score=1.99)
    failed = board.run(board.alice, status="WRONG_VALUES", score=None)
    shown = board.get(bounty)
    assert shown["state"] == "submitted" and shown["submission_id"] is None
    attempts = [e["note"] for e in shown["history"] if e["action"] == "attempt"]
    assert attempts == [f"ranked run #{short} scored 1.99, short of 2", f"ranked run #{failed} ended WRONG_VALUES"]
    exact = board.run(board.alice, score=2.0)  # the target itself is enough
    assert board.get(bounty)["state"] == "verified" and board.get(bounty)["submission_id"] == exact
    later = board.run(board.alice, score=5.0)  # a verified bounty stays with the run that verified it
    assert board.get(bounty)["submission_id"] == exact != later


def test_a_target_over_the_leaderboard_multiplies_its_best_score(board) -> None:
    answer = board.http.post("/api/bounties", json={**SPEED, "target_over": "leaderboard"}, headers=board.org)
    assert answer.status_code == 400 and "leaderboard of axpy_dest on cpu is empty" in answer.json()["error"]
    board.run(board.bob, score=1.5)
    made = board.create(target_over="leaderboard", target_speedup=2.0)
    assert (made["baseline_score"], made["required_score"]) == (1.5, 3.0)
    tiers = [board.create(title=f"tier {x}x", target_speedup=x) for x in (2.0, 4.0, 8.0)]  # tiers: one bounty each
    for bounty in [made, *tiers]:
        board.act(bounty["id"], "claim", board.alice)
    board.run(board.alice, score=2.9)
    assert [board.get(b["id"])["state"] for b in [made, *tiers]] == ["submitted", "verified", "submitted", "submitted"]
    board.run(board.alice, score=4.5)
    assert [board.get(b["id"])["state"] for b in [made, *tiers]] == ["verified", "verified", "verified", "submitted"]


def test_bad_input_gets_a_clear_error_and_changes_nothing(board, api) -> None:
    bounty = board.create()["id"]
    feature = board.create(category="feature", problem=None, device_kind=None, target_over=None, target_speedup=None)[
        "id"
    ]
    board.act(bounty, "claim", board.alice)
    runner_account = api.user("box", "runner")
    before = board.snapshot()
    past = (utcnow() - dt.timedelta(hours=1)).isoformat()
    creations = [
        ({"problem": "level9/nope"}, 400, "unknown problem 'level9/nope'"),
        ({"problem": None}, 400, "a speed bounty names a problem"),
        ({"device_kind": None}, 400, "device_kind: a speed bounty names"),
        ({"target_speedup": 0}, 400, "target_speedup"),
        ({"target_speedup": -2}, 400, "target_speedup"),
        ({"target_speedup": None}, 400, "target_speedup"),
        ({"target_over": "yesterday"}, 422, "target_over"),
        ({"category": "art"}, 422, "category"),
        ({"reward_amount": "abc"}, 400, "is not a decimal number"),
        ({"reward_amount": "-5"}, 400, "must be a positive number"),
        ({"reward_amount": "0"}, 400, "must be a positive number"),
        ({"reward_amount": "NaN"}, 400, "must be a positive number"),
        ({"reward_amount": "1e400"}, 400, "too large"),
        ({"reward_amount": 500.5}, 422, "reward_amount"),
        ({"currency": "us dollars"}, 400, "currency"),
        ({"claim_days": 0}, 400, "claim_days 0"),
        ({"deadline": past}, 400, "has already passed"),
        ({"title": "   "}, 400, "title"),
        ({"category": "bug"}, 400, "only speed bounties have a problem"),
        ({"surprise": 1}, 422, "surprise"),
    ]
    for fields, status, message in creations:
        answer = board.http.post("/api/bounties", json={**SPEED, **fields}, headers=board.org)
        assert (answer.status_code, message in answer.json()["error"]) == (status, True), (fields, answer.text)
    actions = [
        ("/api/bounties", board.alice, SPEED, 403, "needs an admin or organiser"),
        ("/api/bounties", {}, SPEED, 401, "API token"),
        (f"/api/bounties/{bounty}/claim", board.bob, None, 400, "already claimed by alice"),
        (f"/api/bounties/{bounty}/claim", board.alice, None, 400, "already yours"),
        ("/api/bounties/999/claim", board.bob, None, 404, "no bounty 999"),
        (f"/api/bounties/{feature}/claim", runner_account, None, 403, "runner account"),
        (f"/api/bounties/{bounty}/renew", board.bob, None, 403, "claimed by alice"),
        (f"/api/bounties/{bounty}/release", board.bob, None, 403, "only they or the bounty's poster"),
        (f"/api/bounties/{feature}/release", board.org, None, 400, "open, not claimed"),
        (f"/api/bounties/{bounty}/verify", board.org, None, 400, "only a ranked run"),
        (f"/api/bounties/{bounty}/verify", board.alice, None, 403, "who posted bounty"),
        (f"/api/bounties/{bounty}/pay", board.org, None, 400, "only a verified bounty"),
        (f"/api/bounties/{bounty}/withdraw", board.alice, None, 403, "who posted bounty"),
        (f"/api/bounties/{bounty}/submit", board.alice, {"note": "done"}, 400, "submitted by queueing a ranked run"),
        (f"/api/bounties/{feature}/submit", board.alice, {"note": "pr"}, 400, "no claim to submit"),
        (f"/api/bounties/{bounty}/release", board.alice, {"note": "x" * 3000}, 422, "note"),
    ]
    for path, who, body, status, message in actions:
        answer = board.http.post(path, json=body, headers=who)
        assert (answer.status_code, message in answer.json()["error"]) == (status, True), (path, answer.text)
    for query in ({"state": "lost"}, {"category": "art"}):
        assert board.http.get("/api/bounties", params=query).status_code == 422
    assert board.http.get("/api/bounties/999").status_code == 404
    assert board.snapshot() == before


def test_one_of_many_simultaneous_claims_wins(board, api) -> None:
    bounty = board.create()["id"]
    people = [api.user(f"p{i}") for i in range(8)]
    answers: list[int] = []

    def claim(who: dict) -> None:
        answers.append(board.http.post(f"/api/bounties/{bounty}/claim", headers=who).status_code)

    threads = [threading.Thread(target=claim, args=(who,)) for who in people]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(answers) == [200] + [400] * 7
    assert [e["action"] for e in board.get(bounty)["history"]] == ["created", "claimed"]


def test_a_claim_lock_lapses_back_to_open_unless_renewed(board) -> None:
    bounty = board.create(claim_days=3)["id"]
    board.act(bounty, "claim", board.alice)
    board.set(bounty, claim_expires_at=utcnow() + dt.timedelta(hours=1))
    renewed = board.act(bounty, "renew", board.alice)
    assert dt.datetime.fromisoformat(renewed["claim_expires_at"]) > utcnow() + dt.timedelta(days=2, hours=23)
    board.set(bounty, claim_expires_at=utcnow() - dt.timedelta(seconds=1))
    listed = board.http.get("/api/bounties", params={"state": "open"}).json()  # a read applies the lapse
    assert [b["id"] for b in listed] == [bounty] and listed[0]["claimer"] is None
    lapsed = board.get(bounty)
    assert _history(lapsed)[-1] == ("claim lapsed", None, "claimed", "open")
    assert "alice's claim ran out" in lapsed["history"][-1]["note"]
    answer = board.http.post(f"/api/bounties/{bounty}/renew", headers=board.alice)
    assert answer.status_code == 400 and "open, not claimed" in answer.json()["error"]
    assert board.act(bounty, "claim", board.bob)["claimer"] == "bob"


def test_a_lock_waits_for_a_ranked_run_queued_in_time(board) -> None:
    """A claimer's ranked run queued before the lock ran out keeps the claim until its verdict;
    one queued after the lock ran out verifies nothing."""
    bounty = board.create()["id"]
    board.act(bounty, "claim", board.alice)
    sid = board.http.post("/api/submissions", json=submission_body(), headers=board.alice).json()["id"]
    with board.api.db.write() as session:
        session.execute(
            update(Submission).where(Submission.id == sid).values(created_at=utcnow() - dt.timedelta(hours=2))
        )
    board.set(bounty, claim_expires_at=utcnow() - dt.timedelta(hours=1), created_at=utcnow() - dt.timedelta(hours=3))
    assert board.get(bounty)["state"] == "submitted"  # still held: its run is in flight
    board.finish(sid, score=3.0)
    assert board.get(bounty)["state"] == "verified"

    late = board.create()["id"]
    board.act(late, "claim", board.alice)
    board.set(late, claim_expires_at=utcnow() - dt.timedelta(seconds=1))
    board.run(board.alice, score=9.0)  # queued after the lock ran out (before anything swept it)
    shown = board.get(late)
    assert (shown["state"], shown["submission_id"]) == ("open", None)
    assert [e["action"] for e in shown["history"]] == ["created", "claimed", "claim lapsed"]


def test_a_run_queued_before_the_bounty_was_posted_verifies_nothing(board) -> None:
    """A ranked run waiting in the queue when a speed bounty is posted (and claimed) was not
    made for it: its verdict is no attempt at the bounty; a run queued after the posting is."""
    early = board.http.post("/api/submissions", json=submission_body(), headers=board.alice).json()["id"]
    with board.api.db.write() as session:  # queued a minute before the bounty below
        session.execute(
            update(Submission).where(Submission.id == early).values(created_at=utcnow() - dt.timedelta(minutes=1))
        )
    bounty = board.create()["id"]
    board.act(bounty, "claim", board.alice)
    board.finish(early, score=9.0)
    shown = board.get(bounty)
    assert (shown["state"], shown["submission_id"]) == ("claimed", None)
    assert [e["action"] for e in shown["history"]] == ["created", "claimed"]
    late = board.run(board.alice, score=9.0)
    shown = board.get(bounty)
    assert (shown["state"], shown["submission_id"]) == ("verified", late)


def test_a_speed_bounty_on_a_device_kind_no_runner_has_brought_is_posted_with_a_warning(board) -> None:
    made = board.create(device_kind="TPU")
    assert made["state"] == "open" and made["device_kind"] == "TPU"
    assert len(made["warnings"]) == 1 and "no runner of device kind 'TPU' has been seen yet" in made["warnings"][0]
    assert board.create()["warnings"] == []  # cpu: the runner is online
    assert board.get(made["id"])["warnings"] == []


def test_a_passed_deadline_expires_the_bounty(board) -> None:
    bounty = board.create(deadline=(utcnow() + dt.timedelta(days=1)).isoformat())["id"]
    feature = board.create(
        category="feature",
        problem=None,
        device_kind=None,
        target_over=None,
        target_speedup=None,
        deadline=(utcnow() + dt.timedelta(days=1)).isoformat(),
    )["id"]
    board.act(bounty, "claim", board.alice)
    board.act(feature, "claim", board.bob)
    board.act(feature, "submit", board.bob, note="https://example.org/pull/7")
    for b in (bounty, feature):
        board.set(b, deadline=utcnow() - dt.timedelta(minutes=1))
    expired = board.get(bounty)
    assert expired["state"] == "expired" and expired["claimer"] is None
    assert _history(expired)[-1] == ("expired", None, "claimed", "expired")
    answer = board.http.post(f"/api/bounties/{bounty}/claim", headers=board.bob)
    assert answer.status_code == 400 and "is expired" in answer.json()["error"]
    # work handed in before the deadline waits for the organiser
    assert board.get(feature)["state"] == "submitted"
    assert board.act(feature, "verify", board.org)["state"] == "verified"


def test_organisers_verify_feature_bounties_release_and_withdraw(board) -> None:
    feature = board.create(
        title="a Metal backend",
        category="hardware",
        problem=None,
        device_kind=None,
        target_over=None,
        target_speedup=None,
        reward_amount="1200.00",
        currency="eur",
    )
    assert (feature["currency"], feature["reward_amount"], feature["target"]) == ("EUR", "1200.00", "")
    board.act(feature["id"], "claim", board.alice)
    answer = board.http.post(f"/api/bounties/{feature['id']}/submit", json={"note": "  "}, headers=board.alice)
    assert answer.status_code == 400 and "where the work is" in answer.json()["error"]
    board.act(feature["id"], "submit", board.alice, note="https://example.org/pull/1")
    board.act(feature["id"], "verify", board.alice, status=403)
    board.act(feature["id"], "verify", board.org, note="merged")
    paid = board.act(feature["id"], "pay", board.org)
    assert _history(paid)[-3:] == [
        ("submitted", "alice", "claimed", "submitted"),
        ("verified", "org", "submitted", "verified"),
        ("paid", "org", "verified", "paid"),
    ]
    assert paid["history"][-1]["note"] == "1200.00 EUR to alice"
    board.act(feature["id"], "withdraw", board.org, status=400)  # paid is final

    other = board.create()["id"]
    board.act(other, "claim", board.alice)
    released = board.act(other, "release", board.org, note="no progress in a month")
    assert (released["state"], released["claimer"]) == ("open", None)
    board.act(other, "claim", board.bob)
    assert board.act(other, "release", board.bob)["state"] == "open"  # the claimer lets go too
    withdrawn = board.act(other, "withdraw", board.org, note="the problem changed")
    assert withdrawn["state"] == "withdrawn"
    assert _history(withdrawn)[-1] == ("withdrawn", "org", "open", "withdrawn")
    assert board.act(other, "claim", board.alice, status=400)["error"].endswith("only an open bounty can be claimed")


def test_board_filters_and_exports(board) -> None:
    speed = board.create(reward_amount="12.50")["id"]
    bug = board.create(
        title='fix, "quoted"',
        category="bug",
        problem=None,
        device_kind=None,
        target_over=None,
        target_speedup=None,
        reward_amount="1e3",
    )["id"]
    board.act(speed, "claim", board.alice)
    pick = lambda **q: [b["id"] for b in board.http.get("/api/bounties", params=q).json()]  # noqa: E731
    assert pick() == [bug, speed]  # newest first
    assert pick(state="claimed") == [speed] and pick(category="bug") == [bug]
    assert pick(state="open", category="speed") == []

    exported = board.http.get("/api/bounties/export.csv")
    assert exported.headers["content-type"].startswith("text/csv")
    assert 'filename="bounties.csv"' in exported.headers["content-disposition"]
    rows = list(csv.DictReader(io.StringIO(exported.text)))
    assert list(rows[0]) == EXPORT_FIELDS
    assert [(r["id"], r["title"], r["reward_amount"], r["state"], r["claimer"]) for r in rows] == [
        (str(bug), 'fix, "quoted"', "1000", "open", ""),
        (str(speed), "axpy 2x on the CPU", "12.50", "claimed", "alice"),
    ]
    assert rows[1]["required_score"] == "2.0" and rows[1]["problem"] == "axpy_dest"
    only_bugs = list(
        csv.DictReader(io.StringIO(board.http.get("/api/bounties/export.csv", params={"category": "bug"}).text))
    )
    assert [r["id"] for r in only_bugs] == [str(bug)]
    records = board.http.get("/api/bounties/export.json", params={"state": "claimed"}).json()
    assert [r["id"] for r in records] == [speed] and records[0]["reward_amount"] == "12.50"
    assert [e["action"] for e in records[0]["history"]] == ["created", "claimed"]
    assert board.http.get("/api/bounties/export.xml").status_code == 422


def test_the_service_sweeps_with_a_given_time(board) -> None:
    """The logic takes `now`: a claim made now lapses at claim_days, not before."""
    bounty = board.create(claim_days=2)["id"]
    board.act(bounty, "claim", board.alice)
    with board.api.db.write() as session:
        start = session.get(Bounty, bounty).claim_expires_at - dt.timedelta(days=2)
        assert not bounties.due(session, start + dt.timedelta(days=1, hours=23))
        assert bounties.sweep(session, start + dt.timedelta(days=1, hours=23)) == []
        assert bounties.due(session, start + dt.timedelta(days=2, seconds=1))
        assert bounties.sweep(session, start + dt.timedelta(days=2, seconds=1)) == [bounty]
    assert board.get(bounty)["state"] == "open"


def test_only_the_bounty_s_poster_or_an_admin_verifies_and_pays_and_never_their_own_claim(api) -> None:
    """Any organiser could verify and pay any bounty, their own claim included."""
    board = Board(api)
    other = api.user("other-org", "organiser")
    admin = api.user("root", "admin")
    feature = board.create(category="feature", problem=None, device_kind=None, target_over=None, target_speedup=None)
    board.act(feature["id"], "claim", other)  # an organiser may claim as anyone may
    board.act(feature["id"], "submit", other, note="PR 12")
    refused = board.act(feature["id"], "verify", other, status=403)
    assert "org, who posted bounty" in refused["error"]
    board.act(feature["id"], "verify", board.org)
    assert board.act(feature["id"], "pay", other, status=403)
    board.act(feature["id"], "pay", board.org, note="wire 42")
    assert board.get(feature["id"])["state"] == "paid"
    own = board.create(
        title="docs", category="feature", problem=None, device_kind=None, target_over=None, target_speedup=None
    )
    board.act(own["id"], "claim", board.org)
    board.act(own["id"], "submit", board.org, note="PR 13")
    assert "your own claim" in board.act(own["id"], "verify", board.org, status=403)["error"]
    board.act(own["id"], "verify", admin)
    assert "your own claim" in board.act(own["id"], "pay", board.org, status=403)["error"]
    board.act(own["id"], "pay", admin, note="wire 43")
