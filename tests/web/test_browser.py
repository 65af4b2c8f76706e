"""The web pages in a real browser against a real `gpuarena serve`: sign in, submit through the
form, watch the status change without a reload, read the result and the leaderboard; hostile
text stays inert; forms without the CSRF token are refused; pages read without JavaScript."""

from __future__ import annotations

import re
from urllib.parse import quote

import httpx
import pytest
from tests.web.conftest import ARTIFACTS, csrf_of

from gpuarena.service.auth import issue_token
from gpuarena.service.db import Database
from gpuarena.service.tables import User

pytestmark = pytest.mark.e2e
PROBLEM = "level1/softmax"
SOFTMAX = "import torch\n\n\ndef solve(x):\n    return torch.softmax(x.float(), dim=-1).to(x.dtype)\n"
HOSTILE = "<script>window.__pwned = 1</script>"
HOSTILE_CODE = (
    "import torch\n"
    f"# {HOSTILE}\n\n\n"
    "def solve(x):\n"
    "    print('<img src=x onerror=\"window.__pwned = 2\">')\n"
    "    return torch.softmax(x.float(), dim=-1).to(x.dtype)\n"
)


def _shot(page, name: str) -> None:
    page.screenshot(path=str(ARTIFACTS / f"web-{name}.png"), full_page=True)


def _watch_errors(context) -> list[str]:
    """Console errors and uncaught exceptions of every page in the context (a CSP violation,
    a missing asset or a broken script shows up here)."""
    errors: list[str] = []
    context.on(
        "console",
        lambda message: (
            errors.append(f"{message.text} ({message.location.get('url')})") if message.type == "error" else None
        ),
    )
    context.on("weberror", lambda error: errors.append(str(error.error)))
    return errors


def _sign_in(context, server, token: str, next_path: str = "/"):
    page = context.new_page()
    page.goto(f"{server.url}/signin?next={next_path}")
    page.fill("input[name=token]", token)
    page.click("form[action='/signin'] button[type=submit]")
    page.wait_for_url(f"{server.url}{next_path}")
    return page


def _submit(page, code: str, mode: str) -> int:
    page.select_option("select[name=device_kind]", "cpu")
    page.select_option("select[name=mode]", mode)
    page.fill("textarea[name=code]", code)
    page.click("form[action='/submit'] button[type=submit]")
    page.wait_for_url(re.compile(r".*/submissions/\d+$"))
    return int(page.url.rsplit("/", 1)[1])


def test_sign_in_submit_watch_live_result_and_leaderboard(server, browser) -> None:
    token = server.user("alice")
    context = browser.new_context(base_url=server.url, viewport={"width": 1280, "height": 900})
    errors = _watch_errors(context)
    page = context.new_page()
    page.goto("/")
    assert page.locator("table.problems a", has_text=PROBLEM).count() == 1
    assert page.locator("td", has_text="cpu").count() >= 1  # the embedded runner's device kind
    _shot(page, "home")
    page.goto("/signin?next=/problems/" + PROBLEM)
    _shot(page, "signin")
    page.close()

    page = _sign_in(context, server, token, f"/problems/{PROBLEM}")
    assert page.locator("header nav", has_text="alice").count() == 1
    assert page.locator(".markdown table").count() == 1  # the README's Markdown table, rendered
    assert "def reference" in page.locator("pre.code code").first.inner_text()
    page.wait_for_selector("pre.code code.hljs")  # highlighted by highlight.js
    _shot(page, "problem-before")

    sid = _submit(page, SOFTMAX, "ranked")
    page.evaluate("window.__sameDocument = true")  # gone if the page reloads
    live = page.locator("#live")
    assert live.get_attribute("data-status") in ("QUEUED", "RUNNING")
    _shot(page, "submission-waiting")
    page.wait_for_selector("#live[data-status=PASSED]", timeout=180_000)
    assert page.evaluate("window.__sameDocument") is True, "the result arrived by a reload, not by a live update"
    rows = page.locator("table.workloads tbody tr")
    assert rows.count() == 2
    assert {rows.nth(i).locator("td").first.inner_text().split("\n")[0] for i in range(2)} == {
        "small-64x1000",
        "small-128x4096",
    }
    assert page.locator("table.workloads .status.ok").count() == 2
    assert re.search(r"\d ± [\d.e-]+ (µs|ms)", page.locator("table.workloads").inner_text())
    page.wait_for_selector(".chart canvas")  # the speedup chart, drawn after the live swap
    assert "torch.softmax" in page.locator("pre.code").inner_text()  # the author sees the code
    _shot(page, "submission")

    page.goto(f"/problems/{PROBLEM}")
    # the server is shared: other tests' contestants may be on this board too
    board = page.locator("table.leaderboard[data-kind=cpu] tbody tr")
    mine = [board.nth(i) for i in range(board.count()) if board.nth(i).locator("td").nth(1).inner_text() == "alice"]
    assert len(mine) == 1
    assert mine[0].locator(f"a[href='/submissions/{sid}']").count() == 1
    page.wait_for_selector(".board .chart canvas")  # best score over time
    _shot(page, "problem")

    page.goto("/users/alice")
    assert page.locator("td", has_text=PROBLEM).count() >= 2  # a best rank and a submission
    assert "1 / 1" in page.locator("table").first.inner_text()
    _shot(page, "user")

    page.goto("/tokens")
    page.fill("input[name=name]", "laptop")
    page.click("form[action='/tokens'] button[type=submit]")
    assert page.locator("#new-token").inner_text().startswith("gpa_")
    assert page.locator("table.tokens tbody tr").count() == 2
    _shot(page, "tokens")
    assert errors == []
    laptop = page.locator("table.tokens tbody tr", has_text="laptop")
    laptop.locator("button", has_text="Revoke").click()
    page.wait_for_url(f"{server.url}/tokens")
    assert "revoked" in page.locator("table.tokens tbody tr", has_text="laptop").inner_text()
    context.close()

    # Without JavaScript: the same pages, fetched as plain HTML, hold the result and the board
    plain = httpx.get(f"{server.url}/submissions/{sid}")
    assert plain.status_code == 200 and 'data-status="PASSED"' in plain.text and "small-128x4096" in plain.text
    assert "hx-trigger" not in plain.text  # done: nothing left to poll
    board_html = httpx.get(f"{server.url}/problems/{PROBLEM}").text
    assert re.search(r'<table class="grid leaderboard" data-kind="cpu">.*?alice', board_html, re.S)
    assert "Best score over time" in board_html and "<td>alice</td>" in board_html  # the chart's table fallback
    no_js = browser.new_context(base_url=server.url, java_script_enabled=False)
    page = no_js.new_page()
    page.goto(f"/submissions/{sid}")
    assert page.locator("table.workloads tbody tr").count() == 2
    _shot(page, "submission-nojs")
    no_js.close()


def _hostile_account(server) -> str:
    """An account whose name carries markup. The service refuses such names, so it is written
    straight into the database: the pages must stay safe even if one got in."""
    db = Database(f"sqlite:///{server.home / 'gpuarena.db'}")
    try:
        with db.write() as session:
            user = User(name=HOSTILE, role="participant")
            session.add(user)
            session.flush()
            return issue_token(session, user, HOSTILE)[1]
    finally:
        db.dispose()


def test_markup_in_code_log_and_names_stays_inert(server, browser) -> None:
    token = _hostile_account(server)
    context = browser.new_context(base_url=server.url, viewport={"width": 1280, "height": 900})
    errors = _watch_errors(context)
    page = _sign_in(context, server, token, f"/problems/{PROBLEM}")
    sid = _submit(page, HOSTILE_CODE, "test")
    page.wait_for_selector("#live[data-status=PASSED]", timeout=180_000)
    assert page.evaluate("typeof window.__pwned") == "undefined"
    assert HOSTILE in page.locator("pre.code").inner_text()  # shown as text
    assert '<img src=x onerror="window.__pwned = 2">' in page.locator("pre.log").inner_text()
    assert page.locator("main script, main img").count() == 0
    assert page.locator("dl.meta dd", has_text=HOSTILE).count() == 1  # the user name, as text
    _shot(page, "xss-submission")
    for path in ("/tokens", "/users/" + quote(HOSTILE, safe="")):
        page.goto(path)
        assert HOSTILE in page.locator("main").inner_text()
        assert page.evaluate("typeof window.__pwned") == "undefined"
    assert errors == []  # in particular no CSP report of a blocked inline script
    html = httpx.get(f"{server.url}/submissions/{sid}").text
    assert HOSTILE not in html and "&lt;script&gt;window.__pwned = 1&lt;/script&gt;" in html
    context.close()


def test_forms_without_the_csrf_token_are_refused(server, browser) -> None:
    token = server.user("carol")
    context = browser.new_context(base_url=server.url)
    page = _sign_in(context, server, token, "/tokens")
    before = page.locator("table.tokens tbody tr").count()
    # the browser's session cookie goes along, the form's token does not: a cross-site forgery
    forged = context.request.post(f"{server.url}/tokens", form={"name": "forged"})
    assert forged.status == 403 and "security token" in forged.text()
    wrong = context.request.post(f"{server.url}/tokens", form={"name": "forged", "csrf_token": "guess"})
    assert wrong.status == 403
    signout = context.request.post(f"{server.url}/signout", form={})
    assert signout.status == 403
    page.reload()
    assert page.locator("table.tokens tbody tr").count() == before  # nothing was created, still signed in
    good = context.request.post(f"{server.url}/tokens", form={"name": "real", "csrf_token": csrf_of(page.content())})
    assert good.status == 201
    context.close()
    # without any session: the sign-in form is refused too
    assert httpx.post(f"{server.url}/signin", data={"token": token}).status_code == 403


def test_admin_page_lists_runners_and_queue(server, browser) -> None:
    admin = server.user("root", role="admin")
    participant = server.user("dave")
    context = browser.new_context(base_url=server.url, viewport={"width": 1280, "height": 800})
    page = _sign_in(context, server, participant, "/")
    page.goto("/admin")
    assert page.locator("h1", has_text="Not allowed").count() == 1
    context.close()
    context = browser.new_context(base_url=server.url, viewport={"width": 1280, "height": 800})
    page = _sign_in(context, server, admin, "/admin")
    runners = page.locator("table.runners tbody tr")
    assert runners.count() >= 1 and "embedded" in runners.first.inner_text() and "online" in runners.first.inner_text()
    _shot(page, "admin")
    page.click("form[action='/signout'] button")
    page.wait_for_url(f"{server.url}/")
    page.goto("/admin")
    assert "/signin" in page.url
    context.close()


def test_api_docs_render_offline(server, browser) -> None:
    """/docs and /redoc were blank offline: FastAPI loads their scripts from a CDN. Every
    request that leaves the server is refused here, and both pages must still render."""
    context = browser.new_context()
    refused: list[str] = []

    def offline(route) -> None:
        if route.request.url.startswith(server.url):
            route.continue_()
        else:
            refused.append(route.request.url)
            route.abort()

    context.route("**/*", offline)
    errors = _watch_errors(context)
    page = context.new_page()
    page.goto(f"{server.url}/docs")
    page.wait_for_selector(".swagger-ui .info .title", timeout=20_000)
    assert "gpuarena" in page.locator(".swagger-ui .info .title").inner_text()
    page.wait_for_selector(".opblock-summary-path", timeout=20_000)  # the API's operations are listed
    _shot(page, "api-docs")
    page.goto(f"{server.url}/redoc")
    page.wait_for_selector("h1:has-text('gpuarena')", timeout=20_000)
    _shot(page, "api-redoc")
    context.close()
    assert refused == [], refused
    assert errors == [], errors


def test_pages_fit_a_phone_and_long_names_do_not_overlap(server, browser) -> None:
    """At phone width no page scrolls sideways (the home page was 624 px wide at 390 with its
    header overlapping); at 1280 px a long problem name wraps in its cell instead of running
    into the summary next to it."""
    phone = browser.new_context(viewport={"width": 390, "height": 800})
    page = phone.new_page()
    for path in ("/", "/problems/level1/softmax", "/signin"):
        page.goto(f"{server.url}{path}")
        width = page.evaluate("document.documentElement.scrollWidth")
        assert width <= 390, (path, width)
    _shot(page, "phone-signin")
    page.goto(f"{server.url}/")
    _shot(page, "phone-home")
    top = page.locator("header.top").bounding_box()
    brand, nav = page.locator("header.top .brand").bounding_box(), page.locator("header.top nav").bounding_box()
    assert brand["x"] + brand["width"] <= nav["x"] or brand["y"] + brand["height"] <= nav["y"], (brand, nav, top)
    phone.close()
    desk = browser.new_context(viewport={"width": 1280, "height": 900})
    page = desk.new_page()
    page.goto(f"{server.url}/")
    overlaps = page.evaluate("""() => [...document.querySelectorAll('table.problems tbody tr')].filter(row => {
        const name = row.cells[0].querySelector('a') || row.cells[0];
        return name.getBoundingClientRect().right > row.cells[1].getBoundingClientRect().left + 1;
    }).map(row => row.cells[0].innerText)""")
    assert overlaps == [], overlaps
    _shot(page, "desktop-home")
    desk.close()
