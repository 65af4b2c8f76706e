"""An organizer moves a contest's end (PUT /api/contests/{slug}/schedule): extending a frozen
contest keeps its late result held until the new end, on every table that holds it; ending it
now shows the result everywhere at once and closes the contest to entries; a freeze brought
forward holds entries made from then on. Bad moves (into the past, after the end, by a
contestant, moving a freeze that has begun) are refused with the reason and change nothing."""

from __future__ import annotations

import datetime as dt

import pytest
from sqlalchemy import select
from tests.service.test_contests_api import NOW, Contest, evaluation
from tests.service.test_holdback import LATE, Frozen

from gpuarena.service.tables import BestPointRow, ContestRow, HeldBest, Submission


def holds(api, submission_id: int) -> set[dt.datetime | None]:
    """Where the submission's hold is kept: its row, its held best and its history point."""
    with api.db.read() as session:
        return {
            session.get(Submission, submission_id).held_until,
            *session.scalars(select(HeldBest.held_until)),
            *session.scalars(select(BestPointRow.held_until).where(BestPointRow.submission_id == submission_id)),
        }


def move(api, who: dict, slug: str = "spring", **body) -> dict:
    answer = api.http.put(f"/api/contests/{slug}/schedule", json=body, headers=who)
    assert answer.status_code == 200, answer.text
    return answer.json()


def shown_to_anonymous(api, submission_id: int) -> tuple:
    shown = api.http.get(f"/api/submissions/{submission_id}").json()
    return shown["status"], shown["score"]


@pytest.fixture
def frozen(api) -> Frozen:
    return Frozen(api)


def test_extending_a_frozen_contest_holds_its_late_result_until_the_new_end(frozen) -> None:
    api = frozen.api
    later = (NOW + dt.timedelta(hours=5)).replace(tzinfo=None)
    moved = move(api, frozen.c.olga, end=later.isoformat())
    assert moved["phase"] == "frozen"
    assert moved["spec"]["freeze_hours"] == pytest.approx(6.0)  # the freeze stays where it began
    assert holds(api, frozen.late) == {later}
    assert shown_to_anonymous(api, frozen.late) == ("HELD", None)
    with api.db.read() as session:
        row = session.scalar(select(ContestRow).where(ContestRow.slug == "spring"))
        assert row.end == later
    assert api.http.get("/api/contests/spring").json()["spec"]["end"].startswith(later.isoformat()[:19])


def test_ending_a_contest_now_shows_its_held_result_everywhere_and_closes_it(frozen) -> None:
    api = frozen.api
    moved = move(api, frozen.c.olga, end="now")
    assert moved["phase"] == "ended"
    assert shown_to_anonymous(api, frozen.late) == ("PASSED", LATE)
    board = api.http.get("/api/leaderboard", params={"problem": "axpy_dest", "device_kind": "cpu"}).json()
    assert [(r["user"], r["score"]) for r in board["rows"]][0] == ("alice", LATE)
    standings = frozen.c.standings()
    assert not standings["frozen"] and [r["contestant"] for r in standings["standings"]["rows"]] == ["alice"]
    refused = frozen.c.submit(frozen.bob)
    assert refused.status_code == 400 and "ended" in refused.json()["error"]
    again = api.http.put("/api/contests/spring/schedule", json={"end": "now"}, headers=frozen.c.olga)
    assert again.status_code == 400 and "results are final" in again.json()["error"]


def test_a_freeze_brought_forward_holds_entries_made_from_then_on(api) -> None:
    c = Contest(api)
    alice, bob = api.user("alice"), api.user("bob")
    c.create(freeze_hours=0)  # an hour old, two hours to go, no freeze
    early = c.submit(alice).json()["id"]
    c.judge({early: evaluation(2.0)})
    end = (dt.datetime.now(dt.UTC) + dt.timedelta(minutes=30)).replace(microsecond=0, tzinfo=None)  # not NOW:
    # the module's clock was read when the tests were collected, minutes earlier in a long run
    moved = move(api, c.olga, end=end.isoformat(), freeze_from="now")
    assert moved["phase"] == "frozen" and 0.45 < moved["spec"]["freeze_hours"] <= 0.5  # from the server's now
    late = c.submit(bob).json()["id"]
    c.judge({late: evaluation(3.0)})
    assert shown_to_anonymous(api, early) == ("PASSED", 2.0)  # shown before the freeze: stays shown
    assert shown_to_anonymous(api, late) == ("HELD", None)
    assert holds(api, late) == {end}
    public = [r["contestant"] for r in c.standings()["standings"]["rows"]]
    live = [r["contestant"] for r in c.standings(who=c.olga, live=True)["standings"]["rows"]]
    assert public == ["alice"] and live == ["bob", "alice"]


def test_bad_moves_are_refused_with_the_reason_and_change_nothing(frozen) -> None:
    api = frozen.api
    before = api.http.get("/api/contests/spring").json()
    past = (dt.datetime.now(dt.UTC) - dt.timedelta(minutes=1)).isoformat()
    later = (NOW + dt.timedelta(hours=5)).isoformat()
    cases = [
        (frozen.alice, {"end": later}, 403, "only the organizers of spring"),
        (frozen.oscar, {"end": later}, 403, "only the organizers of spring"),  # another contest's organiser
        (frozen.c.olga, {"end": past}, 400, "is in the past"),
        (frozen.c.olga, {"end": later, "freeze_from": "now"}, 400, "stays there"),
        (frozen.c.olga, {"end": "tomorrow"}, 422, "end"),
        (frozen.c.olga, {"end": later, "start": past}, 422, "start"),
    ]
    for who, body, code, said in cases:
        answer = api.http.put("/api/contests/spring/schedule", json=body, headers=who)
        assert answer.status_code == code and said in answer.text, (body, answer.text)
    assert api.http.get("/api/contests/spring").json() == before
    missing = api.http.put("/api/contests/autumn-2030/schedule", json={"end": later}, headers=frozen.c.olga)
    assert missing.status_code == 404
