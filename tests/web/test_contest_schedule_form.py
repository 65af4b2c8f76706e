"""The organizers' form on a contest's page moves its end (service/contest_schedule.py): a new
end and freeze, and "End it now"; a contestant sees no form and is refused, a bad time comes
back on the page with the reason, and the form carries the CSRF token."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator

import pytest
from tests.web.conftest import csrf_of
from tests.web.test_pages import Site
from tests.web.test_submit_contest import _contest


@pytest.fixture
def site(tmp_path, database_templates) -> Iterator[Site]:
    made = Site(tmp_path, database_templates.sqlite(tmp_path / "db.sqlite"))
    yield made
    made.db.dispose()


def test_organizers_move_the_end_and_end_it_now_from_the_contest_page(site) -> None:
    _, olga_token = site.account("olga", "organiser")
    _, alice_token = site.account("alice")
    _contest(site, olga_token, "spring", -dt.timedelta(hours=1), freeze_hours=1)
    olga, alice = site.signed_in(olga_token), site.signed_in(alice_token)
    page = olga.get("/contests/spring").text
    assert 'action="/contests/spring/schedule"' in page
    assert "/schedule" not in alice.get("/contests/spring").text  # no form for a contestant

    later = (dt.datetime.now(dt.UTC) + dt.timedelta(hours=5)).strftime("%Y-%m-%dT%H:%M:%SZ")
    forged = olga.post("/contests/spring/schedule", data={"end": later, "csrf_token": "forged"})
    assert forged.status_code == 403
    refused = alice.post(
        "/contests/spring/schedule",
        data={"end": later, "csrf_token": csrf_of(alice.get("/").text)},
        follow_redirects=True,
    )
    assert "only the organizers of spring" in refused.text
    bad = olga.post(
        "/contests/spring/schedule", data={"end": "soon", "csrf_token": csrf_of(page)}, follow_redirects=True
    )
    assert 'class="error"' in bad.text and "end" in bad.text
    moved = olga.post(
        "/contests/spring/schedule", data={"end": later, "csrf_token": csrf_of(page)}, follow_redirects=True
    )
    assert moved.status_code == 200 and later in moved.text  # the form shows the new end
    assert site.client().get("/api/contests/spring").json()["phase"] == "running"

    ended = olga.post(
        "/contests/spring/schedule", data={"end_now": "1", "csrf_token": csrf_of(page)}, follow_redirects=True
    )
    assert ended.status_code == 200 and 'id="phase">ended' in ended.text.replace('class="phase ended" ', "")
    assert site.client().get("/api/contests/spring").json()["phase"] == "ended"
    assert 'action="/contests/spring/schedule"' not in ended.text  # nothing left to move
