"""A speed bounty verified by a run whose result a contest's freeze holds (holdback.py): the
bounty's history, state and exports are public, so the run is only noted as held (no status, no
score) until the contest ends; then it is judged as any run is, and verifies the bounty or is
noted as falling short. The claim waits for it meanwhile.

Before the fix, the public history said "ranked run #N ... scored 7.25; the target was 2" and the
bounty was verified while the run's score was HELD everywhere else."""

from __future__ import annotations

import datetime as dt
import re

import pytest
from sqlalchemy import update
from tests.service.test_bounties import SPEED
from tests.service.test_contests_api import NOW, Contest, evaluation
from tests.service.test_holdback import _signed_in, end_contest

from gpuarena.service.tables import Bounty, Submission

LATE = 7.25
SHOWN = "7.25"  # how the history prints LATE (.4g)


def shows_score(text: str) -> bool:
    """Whether LATE is printed in `text` as a number of its own: a timestamp's seconds such as
    "10:37:07.251" hold the same characters and must not count."""
    return re.search(rf"(?<![\d.]){re.escape(SHOWN)}(?!\d)", text) is not None


class HeldBounty:
    """A contest in its freeze, two speed bounties (2x and 10x) claimed by alice, and alice's
    entry made during the freeze, judged at LATE."""

    def __init__(self, api):
        self.api, self.http = api, api.http
        self.c = Contest(api)
        self.alice = api.user("alice")
        self.c.create(
            start=(NOW - dt.timedelta(hours=3)).isoformat(),
            end=(NOW + dt.timedelta(hours=1)).isoformat(),
            freeze_hours=2,
        )
        self.reached, self.short = (self.post(2.0), self.post(10.0))
        for bounty_id in (self.reached, self.short):
            claimed = self.http.post(f"/api/bounties/{bounty_id}/claim", headers=self.alice)
            assert claimed.status_code == 200, claimed.text
        entered = self.c.submit(self.alice)
        assert entered.status_code == 201, entered.text
        self.late = entered.json()["id"]
        self.c.judge({self.late: evaluation(LATE)})

    def post(self, speedup: float) -> int:
        made = self.http.post("/api/bounties", json={**SPEED, "target_speedup": speedup}, headers=self.c.olga)
        assert made.status_code == 201, made.text
        return made.json()["id"]

    def get(self, bounty_id: int, who: dict | None = None) -> dict:
        answer = self.http.get(f"/api/bounties/{bounty_id}", headers=who or {})
        assert answer.status_code == 200, answer.text
        return answer.json()

    def end(self) -> None:
        end_contest(self.api.db, "spring")


@pytest.fixture
def held(api) -> HeldBounty:
    return HeldBounty(api)


def test_a_held_run_is_noted_without_its_result_and_verifies_nothing_until_the_contest_ends(held) -> None:
    with held.api.db.read() as session:
        assert session.get(Submission, held.late).held_until is not None
    for who in ({}, held.alice, held.c.olga):  # the bounty's history is the same for everyone
        for bounty_id in (held.reached, held.short):
            shown = held.get(bounty_id, who)
            assert shown["state"] == "submitted" and shown["submission_id"] is None
            last = shown["history"][-1]
            assert last["action"] == "held" and f"ranked run #{held.late} " in last["note"]
            assert "held until" in last["note"] and not shows_score(str(shown))
    assert held.http.get("/api/bounties", params={"state": "verified"}).json() == []
    for fmt in ("csv", "json"):
        exported = held.http.get(f"/api/bounties/export.{fmt}")
        assert exported.status_code == 200 and not shows_score(exported.text), fmt
        assert "verified" not in exported.text, fmt
    page = held.http.get(f"/bounties/{held.reached}").text
    assert not shows_score(page) and f"/submissions/{held.late}" not in page and "held until" in page
    page = _signed_in(held.api, held.alice).get("/bounties").text
    assert not shows_score(page)

    held.end()  # the hold is over: the next read judges the run
    reached, short = held.get(held.reached), held.get(held.short)
    assert reached["state"] == "verified" and reached["submission_id"] == held.late
    assert reached["history"][-1]["action"] == "verified" and f"scored {SHOWN}" in reached["history"][-1]["note"]
    assert short["state"] == "submitted" and short["history"][-1]["action"] == "attempt"
    assert f"scored {SHOWN}, short of 10" in short["history"][-1]["note"]
    # judged once: further reads and changes add nothing
    assert len(held.get(held.reached)["history"]) == len(reached["history"])
    assert len(held.get(held.short)["history"]) == len(short["history"])
    assert [b["id"] for b in held.http.get("/api/bounties", params={"state": "verified"}).json()] == [held.reached]


def test_the_claim_waits_for_a_held_run_and_it_is_judged_before_the_claim_lapses(held) -> None:
    with held.api.db.write() as session:  # alice's claim lock ran out during the freeze, after her run was queued
        queued = session.get(Submission, held.late).created_at
        session.execute(update(Bounty).where(Bounty.id == held.reached).values(claim_expires_at=queued))
    assert held.get(held.reached)["state"] == "submitted"  # not lapsed: the held run decides
    assert held.get(held.reached)["claimer"] == "alice"
    held.end()
    shown = held.get(held.reached)
    assert shown["state"] == "verified" and shown["claimer"] == "alice" and shown["submission_id"] == held.late
