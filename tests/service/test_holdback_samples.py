"""A dataset sample entered in a ccf-dataset contest during its freeze is held as any entry is
(holdback.py): to anyone but its contributor, the contest's organisers and admins the samples
API, the samples page and the public dataset show nothing of its check or review (no verdict, no
score, no report, no files; the review as pending) until the contest ends, and no status or
review filter finds it by its result. Then everyone sees it.

Before the fix, GET /api/samples, /api/samples/ID and /samples showed its verdict "ok", its
score and its acceptance to everyone, and /api/samples/dataset listed it."""

from __future__ import annotations

import datetime as dt

from sqlalchemy import select, update
from tests.service.test_holdback import _signed_in
from tests.service.test_samples import NOW, honest, run_checks, submit

from gpuarena.dataset.sample_pack import SAMPLES_SLUG
from gpuarena.service.tables import ContestRow, Submission
from gpuarena.service.web.render import number


def test_a_sample_entered_during_the_freeze_is_held_from_the_public(api, tmp_path) -> None:
    runner = api.runner()
    olga, alice, bob = api.user("olga", "organiser"), api.user("alice"), api.user("bob")
    made = api.http.post(
        "/api/contests",
        headers=olga,
        json={
            "slug": "data",
            "title": "Samples",
            "start": (NOW - dt.timedelta(hours=3)).isoformat(),
            "end": (NOW + dt.timedelta(hours=1)).isoformat(),
            "freeze_hours": 2,
            "problems": [SAMPLES_SLUG],
            "device_kinds": ["cpu"],
            "rule": {"name": "ccf-dataset"},
        },
    )
    assert made.status_code == 201, made.text
    assert api.http.get("/api/contests/data").json()["phase"] == "frozen"
    late = submit(api, alice, honest(tmp_path, "honest", "alice"), contest="data")
    run_checks(api, runner, 1)
    accepted = api.http.post(
        f"/api/samples/{late}/review", headers=olga, json={"decision": "accepted", "comment": "ok"}
    )
    assert accepted.status_code == 200, accepted.text
    true = accepted.json()
    assert true["status"] == "ok" and true["score"] > 0 and true["review"] == "accepted"
    score = number(true["score"])

    for who in ({}, bob):
        listed = api.http.get("/api/samples", headers=who).json()
        assert [(s["id"], s["status"], s["score"], s["review"], s["reviewer"]) for s in listed] == [
            (late, "held", None, "pending", None)
        ]
        assert listed[0]["held_until"] and listed[0]["contest"] == "data"
        shown = api.http.get(f"/api/samples/{late}", headers=who).json()
        assert (shown["status"], shown["score"], shown["report"], shown["files"]) == ("held", None, None, None)
        assert shown["review_comment"] == "" and shown["checked_at"] is None
        for query in ({"status": "ok"}, {"review": "accepted"}):  # its place in a filtered list would tell
            assert api.http.get("/api/samples", params=query, headers=who).json() == [], query
        assert [s["id"] for s in api.http.get("/api/samples", params={"review": "pending"}, headers=who).json()] == [
            late
        ]
    assert api.http.get("/api/samples/dataset").json() == []  # the public dataset waits for the end
    page = api.http.get("/samples").text
    assert "sample-held" in page and "sample-ok" not in page and score not in page
    page = _signed_in(api, bob).get("/samples").text
    assert "sample-ok" not in page and score not in page

    for who in (alice, olga):  # the contributor and the contest's organizer see it in place
        shown = api.http.get(f"/api/samples/{late}", headers=who).json()
        assert (shown["status"], shown["score"], shown["review"]) == ("ok", true["score"], "accepted")
        assert shown["report"]["verdict"] == "ok" and shown["files"]
        found = api.http.get("/api/samples", params={"status": "ok", "review": "accepted"}, headers=who).json()
        assert [s["id"] for s in found] == [late]
    page = _signed_in(api, olga).get("/samples").text
    assert "sample-ok" in page and score in page

    past = (dt.datetime.now(dt.UTC) - dt.timedelta(seconds=1)).replace(tzinfo=None)
    with api.db.write() as session:  # the contest ends
        row = session.scalar(select(ContestRow).where(ContestRow.slug == "data"))
        assert row is not None
        row.config = {**row.config, "end": past.isoformat() + "Z", "freeze_hours": 1}
        row.end = past
        session.execute(update(Submission).where(Submission.held_until.is_not(None)).values(held_until=past))
    listed = api.http.get("/api/samples").json()
    assert [(s["status"], s["score"], s["review"]) for s in listed] == [("ok", true["score"], "accepted")]
    assert [s["id"] for s in api.http.get("/api/samples/dataset").json()] == [late]
    assert score in api.http.get("/samples").text
