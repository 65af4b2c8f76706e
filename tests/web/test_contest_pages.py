"""The contest pages in a real browser against a real `gpuarena serve`: an organizer creates a
contest through the form (a mistake comes back with the text kept), contestants' ranked runs
enter it, the organizer reviews them in the queue, the standings name the tie rule that
decided a place, the contestant sees the decision, and similar solutions are shown side by side."""

from __future__ import annotations

import datetime as dt
import re
import time

import httpx
import pytest
from tests.web.conftest import csrf_of
from tests.web.test_browser import SOFTMAX, _shot, _sign_in, _watch_errors

pytestmark = pytest.mark.e2e
PROBLEM = "level1/softmax"


def contest_toml(slug: str, start: dt.datetime, end: dt.datetime) -> str:
    def utc(t: dt.datetime) -> str:
        return t.replace(microsecond=0).isoformat().replace("+00:00", "Z")

    return (
        f'slug = "{slug}"\ntitle = "Browser cup"\ndescription = "Fastest **softmax**."\n'
        f"start = {utc(start)}\nend = {utc(end)}\n"
        f'problems = ["{PROBLEM}"]\ndevice_kinds = ["cpu"]\n\n[rule]\nname = "ccf-kernel"\n'
    )


def _enter(server, token: str, slug: str) -> int:
    body = {
        "problem": PROBLEM,
        "device_kind": "cpu",
        "mode": "ranked",
        "contest": slug,
        "solution": {
            "name": "sm",
            "manifest": {"language": "pytorch", "entry_point": "sm.py:solve"},
            "sources": {"sm.py": SOFTMAX},
        },
    }
    made = httpx.post(f"{server.url}/api/submissions", json=body, headers={"Authorization": f"Bearer {token}"})
    assert made.status_code == 201, made.text
    return made.json()["id"]


def _wait_done(server, ids: list[int]) -> None:
    deadline = time.monotonic() + 300
    while not all(httpx.get(f"{server.url}/api/submissions/{i}").json()["done"] for i in ids):
        assert time.monotonic() < deadline, "the runs did not finish"
        time.sleep(0.5)


def test_contest_create_enter_review_standings_and_similar(server, browser) -> None:
    olga, alice, bob = server.user("olga", "organiser"), server.user("cup-alice"), server.user("cup-bob")
    context = browser.new_context(base_url=server.url)
    errors = _watch_errors(context)
    page = _sign_in(context, server, olga, "/contests/new")
    now = dt.datetime.now(dt.UTC)
    page.fill("textarea[name=spec]", contest_toml("browser-cup", now, now - dt.timedelta(hours=1)))
    page.click("form[action='/contests/new'] button[type=submit]")
    assert "must end after it starts" in page.locator("p.error").inner_text()
    assert "browser-cup" in page.input_value("textarea[name=spec]")  # what was typed is kept
    page.fill(
        "textarea[name=spec]", contest_toml("browser-cup", now - dt.timedelta(minutes=5), now + dt.timedelta(hours=2))
    )
    page.click("form[action='/contests/new'] button[type=submit]")
    page.wait_for_url(f"{server.url}/contests/browser-cup")
    assert page.locator("#phase").inner_text() == "running"
    first = page.locator("time.countdown").inner_text()
    assert re.fullmatch(r"(\d+d )?\d\d:\d\d:\d\d", first), first  # the countdown runs in the page
    deadline = time.monotonic() + 5
    while page.locator("time.countdown").inner_text() == first:  # (the page's CSP forbids evaluated JS)
        assert time.monotonic() < deadline, "the countdown does not tick"
        time.sleep(0.2)
    assert PROBLEM in page.locator("ul.contest-problems").inner_text()
    assert "No entries yet" in page.content()

    ids = [_enter(server, alice, "browser-cup"), _enter(server, bob, "browser-cup")]
    _wait_done(server, ids)

    page.goto("/contests/browser-cup/review")
    assert page.locator("table.review tbody tr").count() == 2
    forged = context.request.post(f"{server.url}/contests/browser-cup/review/{ids[0]}", form={"decision": "accepted"})
    assert forged.status == 403  # without the form's CSRF token
    row = page.locator(f"#entry-{ids[0]}")
    row.locator("input[name=comment]").fill("clean and documented")
    row.locator("input[name=bonus][value=write_up]").check()
    with page.expect_navigation():
        row.locator("button[type=submit]").click()
    assert page.locator("table.review tbody tr").count() == 1
    row = page.locator(f"#entry-{ids[1]}")
    row.locator("input[name=comment]").fill("fine")
    with page.expect_navigation():
        row.locator("button[type=submit]").click()
    assert "Nothing waiting for review" in page.content()
    _shot(page, "contest-review")

    page.goto("/contests/browser-cup")
    cells = [[c.inner_text() for c in r.locator("td").all()] for r in page.locator("table.standings tbody tr").all()]
    # by hand: both accepted on a level-1 problem (5 each); alice's bonus item breaks the tie
    assert [(c[0], c[1], c[2]) for c in cells] == [("1", "cup-alice", "5.000"), ("2", "cup-bob", "5.000")]
    assert "more bonus items" in cells[1]
    _shot(page, "contest-standings")

    page.goto("/contests/browser-cup/similar")
    pair = page.locator("table.similar tbody tr")
    assert pair.count() == 1 and "1.00" in pair.inner_text()
    pair.locator("a").click()
    assert page.locator(".side-by-side section").count() == 2
    assert page.locator(".side-by-side pre code").first.inner_text().startswith("import torch")

    contestant = browser.new_context(base_url=server.url)
    mine = _sign_in(contestant, server, alice, "/contests/browser-cup")
    assert "clean and documented" in mine.locator("table.my-entries").inner_text()
    mine.goto("/contests/browser-cup/review")
    assert "Not allowed" in mine.content()  # a contestant does not see the queue
    assert csrf_of(mine.content())
    contestant.close()
    context.close()
    # the one expected: the refused contest file came back as a 400 page
    assert [e for e in errors if not ("status of 400" in e and "/contests/new" in e)] == []
