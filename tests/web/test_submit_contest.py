"""The problem page's submit form enters a contest (issue 46, item 14): it lists the open
contests the user may enter for that problem, a ranked run sent with one chosen is entered,
a refused entry comes back on the page with the reason, and the form carries the CSRF token."""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterator

import pytest
from sqlalchemy import select
from tests.web.conftest import csrf_of
from tests.web.test_pages import CODE, Site

from gpuarena.service.contests import open_for
from gpuarena.service.deps import Caller
from gpuarena.service.tables import ContestEntry, Submission

NOW = dt.datetime.now(dt.UTC).replace(microsecond=0)


@pytest.fixture(params=["sqlite", "postgresql"])
def site(request, tmp_path, database_templates) -> Iterator[Site]:
    if request.param == "sqlite":
        made = Site(tmp_path, database_templates.sqlite(tmp_path / "db.sqlite"))
        yield made
        made.db.dispose()
        return
    with database_templates.postgres() as url:
        made = Site(tmp_path, url)
        yield made
        made.db.dispose()


def _contest(site: Site, token: str, slug: str, start: dt.timedelta, **fields) -> None:
    body = {
        "slug": slug,
        "title": f"Contest {slug}",
        "start": (NOW + start).isoformat(),
        "end": (NOW + start + dt.timedelta(hours=3)).isoformat(),
        "problems": ["axpy_dest"],
        "device_kinds": ["cpu"],
        "rule": {"name": "fastest"},
        **fields,
    }
    made = site.client().post("/api/contests", json=body, headers={"Authorization": f"Bearer {token}"})
    assert made.status_code == 201, made.text


def _choices(html: str) -> list[str]:
    select_ = re.search(r'<select name="contest">(.*?)</select>', html, re.S)
    return re.findall(r'<option value="([^"]*)"', select_.group(1)) if select_ else []


def test_the_submit_form_enters_the_contest_chosen(site) -> None:
    _, olga = site.account("olga", "organiser")
    alice_id, alice_token = site.account("alice")
    _, bob_token = site.account("bob")
    _contest(site, olga, "spring", -dt.timedelta(hours=1))
    _contest(site, olga, "later", dt.timedelta(days=1))  # not open yet
    _contest(site, olga, "ended", -dt.timedelta(hours=5))  # over
    _contest(
        site,
        olga,
        "teams",
        -dt.timedelta(hours=1),
        entries="team",
        teams=[{"name": "blue", "members": ["bob"]}],
    )
    alice, bob = site.signed_in(alice_token), site.signed_in(bob_token)
    page = alice.get("/problems/axpy_dest").text
    assert _choices(page) == ["", "spring"]  # none, or the one open contest alice may enter
    assert _choices(bob.get("/problems/axpy_dest").text) == ["", "spring", "teams"]
    assert _choices(site.client().get("/problems/axpy_dest").text) == []  # signed out: no form at all
    with site.db.read() as session:
        who = Caller(user_id=alice_id, name="alice", role="participant", token_id=0, device_kinds=None)
        assert open_for(session, who, "level9/elsewhere") == []  # another problem's contests: none

    form = {"problem": "axpy_dest", "device_kind": "cpu", "code": CODE, "filename": "sol.py"}
    refused = alice.post(
        "/submit", data={**form, "mode": "ranked", "contest": "spring", "csrf_token": "forged"}, follow_redirects=False
    )
    assert refused.status_code == 403 and "security token" in refused.text
    entered = alice.post(
        "/submit",
        data={**form, "mode": "ranked", "contest": "spring", "csrf_token": csrf_of(page)},
        follow_redirects=False,
    )
    assert entered.status_code == 303, entered.text
    sid = int(entered.headers["location"].rsplit("/", 1)[1])
    plain = alice.post(
        "/submit", data={**form, "mode": "ranked", "contest": "", "csrf_token": csrf_of(page)}, follow_redirects=False
    )
    assert plain.status_code == 303, plain.text
    wrong = alice.post(
        "/submit", data={**form, "mode": "test", "contest": "spring", "csrf_token": csrf_of(page)}
    )  # a contest counts ranked runs only: refused, the page keeps the choice and says why
    assert wrong.status_code == 400 and "only ranked runs count in a contest" in wrong.text
    assert 'value="spring" selected' in wrong.text
    with site.db.read() as session:
        entries = session.execute(select(ContestEntry.submission_id, ContestEntry.contestant)).all()
        assert entries == [(sid, "alice")]
        assert session.scalar(select(Submission.id).where(Submission.mode == "test")) is None  # nothing kept
