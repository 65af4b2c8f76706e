"""The pages through a TestClient (no browser, no runner): escaping, who sees code, CSRF,
sessions and cookies, redirects. Fast; the browser tests cover the live flow."""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select
from tests.web.conftest import ROOT, csrf_of

from gpuarena.contracts.records import Evaluation
from gpuarena.service.app import create_app
from gpuarena.service.auth import issue_token
from gpuarena.service.catalog import sync_problems
from gpuarena.service.config import Settings
from gpuarena.service.db import Database
from gpuarena.service.tables import DeviceKind, Problem, SolutionBlob, Submission, Token, User, utcnow
from gpuarena.service.web.render import markdown
from gpuarena.service.web.security import SECRET_FILE, SESSION_COOKIE

FIXTURE_PROBLEMS = ROOT / "tests" / "fixtures" / "problems"
HOSTILE = "<script>window.__pwned=1</script>"
ESCAPED = "&lt;script&gt;window.__pwned=1&lt;/script&gt;"
CODE = f"import torch\n# {HOSTILE}\n\n\ndef solve(a, x, b, y):\n    torch.addcmul(b, a, x, out=y)\n"


class Site:
    """The app over a fresh SQLite database, with accounts made directly and a browser-like
    client per account (each keeps its own session cookie)."""

    def __init__(self, tmp: Path, database_url: str):
        self.settings = Settings(
            home=tmp / "home",
            database_url=database_url,
            problem_roots=[FIXTURE_PROBLEMS],
            bundled_problems=False,
            submit_limit_per_minute=1000,
        )
        self.db = Database(self.settings.database_url)
        sync_problems(self.db, self.settings.all_problem_roots())
        self.app = create_app(self.settings, self.db)
        with self.db.write() as session:  # the cpu device kind exists once a runner has said hello
            session.add(DeviceKind(name="cpu"))

    def account(self, name: str, role: str = "participant") -> tuple[int, str]:
        with self.db.write() as session:
            user = User(name=name, role=role)  # no name check: hostile names must render safely too
            session.add(user)
            session.flush()
            return user.id, issue_token(session, user, "first")[1]

    def client(self) -> TestClient:
        return TestClient(self.app, raise_server_exceptions=True)

    def signed_in(self, token: str) -> TestClient:
        client = self.client()
        form = client.get("/signin")
        reply = client.post(
            "/signin", data={"token": token, "csrf_token": csrf_of(form.text), "next": "/"}, follow_redirects=False
        )
        assert reply.status_code == 303, reply.text
        return client


@pytest.fixture(params=["sqlite", "postgresql"])
def site(request, tmp_path, database_templates) -> Iterator[Site]:
    """On SQLite, and on PostgreSQL where scripts/test.sh started one (else skipped there); each
    database a copy of a migrated template (tests/databases.py)."""
    if request.param == "sqlite":
        made = Site(tmp_path, database_templates.sqlite(tmp_path / "db.sqlite"))
        yield made
        made.db.dispose()
        return
    with database_templates.postgres() as url:
        made = Site(tmp_path, url)
        yield made
        made.db.dispose()


def _submit(client: TestClient, code: str = CODE, mode: str = "test") -> int:
    page = client.get("/problems/axpy_dest")
    reply = client.post(
        "/submit",
        data={
            "problem": "axpy_dest",
            "device_kind": "cpu",
            "mode": mode,
            "code": code,
            "filename": "sol.py",
            "csrf_token": csrf_of(page.text),
        },
        follow_redirects=False,
    )
    assert reply.status_code == 303, reply.text
    return int(reply.headers["location"].rsplit("/", 1)[1])


def _finish(site: Site, submission_id: int, log: str, reason: str) -> None:
    """Post a result through the runner API, as a runner would."""
    _, runner_token = site.account("box", "runner")
    api = site.client()
    headers = {"Authorization": f"Bearer {runner_token}"}
    runner = api.post(
        "/api/runner/hello", headers=headers, json={"name": "box", "devices": [{"device": "cpu", "kind": "cpu"}]}
    )
    job = api.post(
        "/api/runner/claim", headers=headers, json={"runner_id": runner.json()["runner_id"], "device_kinds": ["cpu"]}
    ).json()
    assert job["submission_id"] == submission_id
    evaluation = Evaluation(
        status="WRONG_VALUES",
        reason=reason,
        problem="axpy_dest",
        solution_hash="0" * 64,
        device="cpu",
        mode="test",
        log=log,
        workloads=[{"name": "n4096", "status": "WRONG_VALUES", "reason": reason}],
    )
    posted = api.post(
        f"/api/runner/jobs/{job['job_id']}/result",
        headers=headers,
        json={"lease_token": job["lease_token"], "evaluation": evaluation.model_dump(mode="json")},
    )
    assert posted.status_code == 200, posted.text


def test_user_text_is_escaped_everywhere(site) -> None:
    _, token = site.account(HOSTILE)
    author = site.signed_in(token)
    sid = _submit(author)
    _finish(site, sid, log=f"printed {HOSTILE}", reason=f"worst at {HOSTILE}")
    created = author.post("/tokens", data={"name": HOSTILE, "csrf_token": csrf_of(author.get("/tokens").text)})
    assert created.status_code == 201
    anonymous = site.client()
    pages = {
        f"/submissions/{sid}": author,
        f"/submissions/{sid}/live": author,
        "/tokens": author,
        "/users/" + HOSTILE.replace("/", "%2F"): anonymous,
        "/": author,
    }
    for path, client in pages.items():
        html = client.get(path).text
        assert HOSTILE not in html, f"{path} carries raw markup"
        assert ESCAPED in html, f"{path} does not show the text escaped"
    shown = author.get(f"/submissions/{sid}").text
    assert shown.count(ESCAPED) >= 4  # user name, code, log, reason (page and workload)
    assert re.search(r'<pre class="log">printed ' + re.escape(ESCAPED), shown)


def test_markdown_drops_raw_html_and_script_links() -> None:
    html = str(
        markdown(
            f"# Title\n\n{HOSTILE}\n\n[click](javascript:alert(1)) <img src=x onerror=alert(1)>\n\n"
            "| a | b |\n| - | - |\n| 1 | 2 |\n"
        )
    )
    assert "<h1>Title</h1>" in html and "<table>" in html
    assert "<script" not in html and "<img" not in html and 'href="javascript' not in html
    assert ESCAPED in html


def test_code_visibility_follows_the_author_admins_the_owner_and_the_public_flag(site) -> None:
    """An organiser account sees a submission's code only through a contest it organises that
    the submission was entered in (tests/service/test_contests_api.py): the role is not global."""
    _, alice_token = site.account("alice")
    bob_id, bob_token = site.account("bob")
    _, organiser_token = site.account("olga", "organiser")
    _, admin_token = site.account("root", "admin")
    alice, bob, olga, root = (site.signed_in(t) for t in (alice_token, bob_token, organiser_token, admin_token))
    anonymous = site.client()
    sid = _submit(alice, code=CODE.replace(HOSTILE, "secret-kernel"))

    def sees(client: TestClient) -> bool:
        return "secret-kernel" in client.get(f"/submissions/{sid}").text

    assert sees(alice) and sees(root)
    assert not sees(bob) and not sees(anonymous) and not sees(olga)
    assert "secret-kernel" not in anonymous.get(f"/submissions/{sid}/live").text

    # bob is not the owner: he may not open the solutions, and the page shows him no settings form
    page = bob.get("/problems/axpy_dest").text
    assert 'action="/problem-settings"' not in page
    refused = bob.post(
        "/problem-settings", data={"problem": "axpy_dest", "solutions_public": "on", "csrf_token": csrf_of(page)}
    )
    assert refused.status_code == 403 and not sees(anonymous)

    # an admin makes bob the owner; then bob opens the solutions to everyone
    page = root.get("/problems/axpy_dest").text
    made_owner = root.post(
        "/problem-settings",
        data={"problem": "axpy_dest", "owner": "bob", "csrf_token": csrf_of(page)},
        follow_redirects=False,
    )
    assert made_owner.status_code == 303
    with site.db.read() as session:
        assert session.scalar(select(Problem.owner_id).where(Problem.slug == "axpy_dest")) == bob_id
    page = bob.get("/problems/axpy_dest").text
    assert 'action="/problem-settings"' in page
    opened = bob.post(
        "/problem-settings",
        data={"problem": "axpy_dest", "solutions_public": "on", "csrf_token": csrf_of(page)},
        follow_redirects=False,
    )
    assert opened.status_code == 303
    assert sees(anonymous) and sees(bob)
    assert anonymous.get("/api/problems/axpy_dest").json()["solutions_public"] is True

    unknown = root.post(
        "/problem-settings",
        data={"problem": "axpy_dest", "owner": "nobody", "csrf_token": csrf_of(root.get("/problems/axpy_dest").text)},
    )
    assert unknown.status_code == 400 and "owner: no user named" in unknown.text


def test_logs_follow_the_code_visibility_and_show_no_host_paths(site) -> None:
    """A submission's log (what the solution printed, tracebacks quoting its code) is on its
    page for the author and admins only (and its contest's organisers), until the solutions are
    public; the machine's folders and name are out of it for everyone."""
    _, alice_token = site.account("alice")
    _, bob_token = site.account("bob")
    _, organiser_token = site.account("olga", "organiser")
    _, admin_token = site.account("root", "admin")
    alice, bob, olga, root = (site.signed_in(t) for t in (alice_token, bob_token, organiser_token, admin_token))
    anonymous = site.client()
    sid = _submit(alice)
    run = "/tmp/gpuarena-run-k2j3h4l5"
    log = (
        f'Traceback:\n  File "{run}/work/solution/sol.py", line 9, in solve\n'
        '    TOKEN = "log-secret-42"\nprinted from /home/judge/.cache on judge-host-9\n'
    )
    _finish(site, sid, log=log, reason="output y: 3 elements wrong")

    for client in (alice, root):
        for path in (f"/submissions/{sid}", f"/submissions/{sid}/live"):
            html = client.get(path).text
            assert "log-secret-42" in html and "&#34;&lt;run&gt;/work/solution/sol.py&#34;, line 9" in html, path
            assert run not in html and "/home/judge" not in html and "~/.cache" in html
    for client in (bob, anonymous, olga):
        for path in (f"/submissions/{sid}", f"/submissions/{sid}/live"):
            html = client.get(path).text
            assert "log-secret-42" not in html and "gpuarena-run" not in html, path
            assert "output y: 3 elements wrong" in html and "The log is the author" in html

    with site.db.write() as session:
        session.get(Submission, sid).problem.solutions_public = True
    assert "log-secret-42" in anonymous.get(f"/submissions/{sid}").text


def test_every_form_needs_the_session_csrf_token(site) -> None:
    _, token = site.account("alice")
    alice = site.signed_in(token)
    other = site.client()
    other_token = csrf_of(other.get("/signin").text)  # a valid token, but of another session
    forms = [
        ("/submit", {"problem": "axpy_dest", "device_kind": "cpu", "code": CODE}),
        ("/tokens", {"name": "x"}),
        ("/tokens/1/revoke", {}),
        ("/signout", {}),
        ("/problem-settings", {"problem": "axpy_dest", "solutions_public": "on"}),
        ("/signin", {"token": token}),
        ("/invites", {"role": "participant", "uses": "10000", "days": "7"}),
        ("/invites/1/revoke", {}),
        ("/join/inv_anything", {"name": "made-by-another-page"}),
    ]
    for path, data in forms:
        for extra in ({}, {"csrf_token": other_token}, {"csrf_token": ""}):
            reply = alice.post(path, data={**data, **extra}, follow_redirects=False)
            assert reply.status_code == 403, f"{path} {extra}: {reply.status_code}"
            assert "security token" in reply.text
    with site.db.read() as session:
        assert session.scalar(select(Token).where(Token.name == "x")) is None
        assert session.get(Token, 1).revoked_at is None
    assert "Sign out" in alice.get("/").text  # still signed in


def test_session_cookie_secret_key_and_headers(site) -> None:
    client = site.client()
    reply = client.get("/signin")
    cookie = reply.headers["set-cookie"]
    assert cookie.startswith(SESSION_COOKIE + "=") and "httponly" in cookie.lower() and "samesite=lax" in cookie.lower()
    key_file = site.settings.home / SECRET_FILE
    assert stat.S_IMODE(os.stat(key_file).st_mode) == 0o600
    key = key_file.read_text()
    assert len(key) >= 32 and key not in cookie
    create_app(site.settings, site.db)  # a restart reuses the key: sessions survive it
    assert key_file.read_text() == key
    assert "script-src 'self'" in reply.headers["content-security-policy"]
    assert reply.headers["x-frame-options"] == "DENY"
    assert "content-security-policy" not in client.get("/api/health").headers
    # the signed cookie carries the session; a tampered one is ignored, not trusted
    _, token = site.account("alice")
    value = site.signed_in(token).cookies[SESSION_COOKIE]
    assert "Sign out" in TestClient(site.app, cookies={SESSION_COOKIE: value}).get("/").text
    tampered = value[:-6] + ("AAAAAA" if not value.endswith("AAAAAA") else "BBBBBB")
    assert "Sign out" not in TestClient(site.app, cookies={SESSION_COOKIE: tampered}).get("/").text


def test_revoking_the_session_token_signs_out_and_sign_in_errors_are_clear(site) -> None:
    alice_id, token = site.account("alice")
    alice = site.signed_in(token)
    assert "Sign out" in alice.get("/").text
    with site.db.write() as session:
        session.scalar(select(Token).where(Token.user_id == alice_id)).revoked_at = utcnow()
    assert "Sign out" not in alice.get("/").text
    assert alice.get("/tokens", follow_redirects=False).headers["location"] == "/signin?next=/tokens"

    client = site.client()
    csrf = csrf_of(client.get("/signin").text)
    wrong = client.post("/signin", data={"token": "gpa_nope", "csrf_token": csrf})
    assert wrong.status_code == 401 and "not known here" in wrong.text and "GPUARENA_TOKEN" not in wrong.text
    revoked = client.post("/signin", data={"token": token, "csrf_token": csrf})
    assert revoked.status_code == 401 and "was revoked" in revoked.text


def test_signing_out_ends_the_session_on_the_server(site) -> None:
    """Issue 46: a copy of the session cookie taken before sign-out signs nobody in after it."""
    _, token = site.account("alice")
    alice = site.signed_in(token)
    copied = alice.cookies[SESSION_COOKIE]
    assert "Sign out" in TestClient(site.app, cookies={SESSION_COOKIE: copied}).get("/").text
    other = site.signed_in(token)  # another browser of hers, signed in with the same token
    page = alice.get("/")
    signed_out = alice.post("/signout", data={"csrf_token": csrf_of(page.text)}, follow_redirects=False)
    assert signed_out.status_code == 303
    assert "Sign out" not in alice.get("/").text
    replayed = TestClient(site.app, cookies={SESSION_COOKIE: copied})
    assert "Sign out" not in replayed.get("/").text
    assert replayed.get("/tokens", follow_redirects=False).headers["location"] == "/signin?next=/tokens"
    # a form sent with the replayed cookie and the CSRF token of its page acts as nobody
    form = replayed.get("/signin")
    made = replayed.post("/tokens", data={"name": "stolen", "csrf_token": csrf_of(form.text)}, follow_redirects=False)
    assert made.status_code == 303 and made.headers["location"].startswith("/signin")
    with site.db.read() as session:
        assert session.scalar(select(Token).where(Token.name == "stolen")) is None
    assert "Sign out" in other.get("/").text  # her other browser stays signed in
    # sign-out still needs the form's CSRF token
    kept = other.post("/signout", data={}, follow_redirects=False)
    assert kept.status_code == 403 and "Sign out" in other.get("/").text


def test_sign_in_follows_only_local_paths(site) -> None:
    _, token = site.account("alice")
    for target, expected in (
        ("/problems/axpy_dest", "/problems/axpy_dest"),
        ("//evil.example", "/"),
        ("https://evil.example", "/"),
        ("/\\evil.example", "/"),
    ):
        client = site.client()
        reply = client.post(
            "/signin",
            data={"token": token, "next": target, "csrf_token": csrf_of(client.get("/signin").text)},
            follow_redirects=False,
        )
        assert reply.headers["location"] == expected


def test_submit_form_errors_name_the_field(site) -> None:
    _, token = site.account("alice")
    alice = site.signed_in(token)
    csrf = csrf_of(alice.get("/problems/axpy_dest").text)
    cases = [
        ({"code": ""}, "solution: choose a file"),
        ({"device_kind": "TPU"}, "unknown device kind"),
        ({"mode": "fast"}, "mode &#39;fast&#39;"),
        ({"filename": "my-sol.txt"}, "my-sol.txt"),
    ]
    for change, message in cases:
        data = {
            "problem": "axpy_dest",
            "device_kind": "cpu",
            "mode": "test",
            "code": CODE,
            "filename": "sol.py",
            "csrf_token": csrf,
            **change,
        }
        reply = alice.post("/submit", data=data)
        assert reply.status_code == 400 and message in reply.text, (change, reply.text[-600:])
        if change.get("code") is None:
            assert "window.__pwned" in reply.text  # what was typed comes back, escaped
    upload = alice.post(
        "/submit",
        data={"problem": "axpy_dest", "device_kind": "cpu", "mode": "test", "csrf_token": csrf},
        files={"file": ("up.py", CODE.encode())},
        follow_redirects=False,
    )
    assert upload.status_code == 303
    pasted = alice.post(
        "/submit",
        data={
            "problem": "axpy_dest",
            "device_kind": "cpu",
            "mode": "test",
            "filename": "sol.py",
            "code": CODE.replace("\n", "\r\n"),
            "csrf_token": csrf,
        },
        follow_redirects=False,
    )
    with site.db.read() as session:
        sid = int(pasted.headers["location"].rsplit("/", 1)[1])
        blob = session.get(SolutionBlob, session.get(Submission, sid).solution_hash)
        assert blob.sources == {"sol.py": CODE}  # the same code as a file upload, not CRLF
    assert alice.get("/submit").status_code == 405
    assert site.client().post("/submit", data={"problem": "axpy_dest"}).status_code == 403


def test_pages_answer_404_and_403_in_html(site) -> None:
    _, token = site.account("alice")
    alice = site.signed_in(token)
    for path in ("/problems/nope", "/submissions/999", "/users/nobody", "/no/such/page"):
        reply = alice.get(path)
        assert reply.status_code == 404 and "<h1>Not found</h1>" in reply.text
    # the API keeps answering JSON for addresses it does not have
    api = alice.get("/api/no-such-endpoint")
    assert api.status_code == 404 and "no such API endpoint" in api.json()["error"]
    admin = alice.get("/admin")
    assert admin.status_code == 403 and "this page is for admins" in admin.text
    assert site.client().get("/admin", follow_redirects=False).status_code == 303


def test_browser_errors_come_back_as_pages_with_one_size_limit(site) -> None:
    """A page's error is a page, never the API's JSON: an upload over the limit (413, one limit
    quoted: the solution's), an id that is not a number or does not fit (404), and the API
    keeps answering JSON for the same mistakes."""
    _, token = site.account("alice")
    alice = site.signed_in(token)
    csrf = csrf_of(alice.get("/problems/axpy_dest").text)
    limit = site.settings.max_request_bytes
    big = alice.post(
        "/submit",
        data={"problem": "axpy_dest", "device_kind": "cpu", "mode": "test", "csrf_token": csrf},
        files={"file": ("big.py", b"#" * (limit + 100_000))},
    )
    assert big.status_code == 413 and big.headers["content-type"].startswith("text/html"), big.text[:300]
    assert f"{limit:,} bytes" in big.text and "Go back" in big.text
    api_big = alice.post(
        "/api/submissions/upload",
        files={"file": ("big.py", b"#" * (limit + 100_000))},
        data={"problem": "axpy_dest", "device_kind": "cpu"},
        headers={"Authorization": f"Bearer {token}"},
    )
    assert api_big.status_code == 413 and f"{limit:,} bytes" in api_big.json()["error"]
    for path in ("/submissions/abc", "/submissions/99999999999999999999"):
        reply = alice.get(path)
        assert reply.status_code == 404 and "<h1>Not found</h1>" in reply.text, (path, reply.text[:300])
        assert "Input should be" not in reply.text and "INTEGER" not in reply.text
    assert alice.get("/api/submissions/abc").status_code == 422  # the API: JSON, as before
    assert "error" in alice.get("/api/submissions/abc").json()


def test_leaderboard_marks_entries_within_noise_as_tied(site) -> None:
    """Each entry shows its score's 95% interval; an entry whose interval overlaps the one
    above is marked tied: its place is within noise."""
    _, runner_token = site.account("box", "runner")
    api = site.client()
    headers = {"Authorization": f"Bearer {runner_token}"}
    runner_id = api.post(
        "/api/runner/hello", headers=headers, json={"name": "box", "devices": [{"device": "cpu", "kind": "cpu"}]}
    ).json()["runner_id"]
    tokens = {}
    for name, speedup, low, high in (("ann", 2.0, 1.9, 2.1), ("bob", 1.95, 1.85, 2.05), ("cy", 1.2, 1.15, 1.25)):
        _, token = tokens[name] = site.account(name)
        submission_id = _submit(site.signed_in(token), mode="ranked")
        job = api.post(
            "/api/runner/claim", headers=headers, json={"runner_id": runner_id, "device_kinds": ["cpu"]}
        ).json()
        assert job["submission_id"] == submission_id
        evaluation = Evaluation(
            status="PASSED",
            problem="axpy_dest",
            solution_hash="0" * 64,
            device="cpu",
            mode="ranked",
            score=speedup,
            workloads=[{"name": "n4096", "status": "PASSED", "speedup": speedup, "speedup_ci95": (low, high)}],
        )
        posted = api.post(
            f"/api/runner/jobs/{job['job_id']}/result",
            headers=headers,
            json={"lease_token": job["lease_token"], "evaluation": evaluation.model_dump(mode="json")},
        )
        assert posted.status_code == 200, posted.text
    page = site.client().get("/problems/axpy_dest").text
    board = page[page.index("leaderboard") :]
    assert board.count("tied with #") == 1 and "≈ tied with #1" in board  # bob with ann; cy is clearly behind
    assert "1.85" in board and "2.05" in board
    import csv as csv_module
    import io

    rows = list(
        csv_module.DictReader(io.StringIO(site.client().get("/leaderboard.csv?problem=axpy_dest&device_kind=cpu").text))
    )
    assert [(r["user"], r["tied_with_above"]) for r in rows] == [("ann", "False"), ("bob", "True"), ("cy", "False")]
    # bob's next try is shown beside his best and the leader's, per workload
    bob_client = site.signed_in(tokens["bob"][1])
    again = _submit(bob_client, mode="ranked")
    job = api.post("/api/runner/claim", headers=headers, json={"runner_id": runner_id, "device_kinds": ["cpu"]}).json()
    evaluation = Evaluation(
        status="PASSED",
        problem="axpy_dest",
        solution_hash="0" * 64,
        device="cpu",
        mode="ranked",
        score=1.5,
        workloads=[{"name": "n4096", "status": "PASSED", "speedup": 1.5, "speedup_ci95": (1.4, 1.6)}],
    )
    api.post(
        f"/api/runner/jobs/{job['job_id']}/result",
        headers=headers,
        json={"lease_token": job["lease_token"], "evaluation": evaluation.model_dump(mode="json")},
    )
    shown = bob_client.get(f"/submissions/{again}").text
    assert ">your best</th>" in shown and ">leader</th>" in shown
    row = shown[shown.index("<td>n4096") :]
    row = row[: row.index("</tr>")]
    assert ">1.500<" in row and ">1.950<" in row and ">2.000<" in row, row
    home = site.client().get("/").text  # the home page: leaders and recent activity
    leaders = home[home.index("<h2>Leaders</h2>") : home.index("Recent activity")]
    assert "axpy_dest" in leaders and ">ann<" in leaders and ">bob<" not in leaders
    assert "Recent activity" in home and home.count("/submissions/") >= 3
    assert float(rows[1]["score_low"]) == 1.85


def test_the_author_cancels_a_queued_submission_from_its_page(site) -> None:
    _, alice_token = site.account("alice")
    _, bob_token = site.account("bob")
    alice, bob = site.signed_in(alice_token), site.signed_in(bob_token)
    sid = _submit(alice)
    mine = alice.get(f"/submissions/{sid}").text
    assert "Cancel this submission" in mine and "(position 1 in the queue)" in mine
    theirs = bob.get(f"/submissions/{sid}").text
    assert "Cancel this submission" not in theirs
    refused = bob.post(f"/submissions/{sid}/cancel", data={"csrf_token": csrf_of(theirs)})
    assert refused.status_code == 403 and "only its author or an admin" in refused.text and "<h1>" in refused.text
    done = alice.post(f"/submissions/{sid}/cancel", data={"csrf_token": csrf_of(mine)}, follow_redirects=False)
    assert done.status_code == 303 and done.headers["location"] == f"/submissions/{sid}"
    page = alice.get(f"/submissions/{sid}").text
    assert "CANCELLED" in page and "cancelled by alice" in page and "Cancel this submission" not in page


def test_the_problem_page_shows_its_time_limits(site) -> None:
    page = site.client().get("/problems/axpy_dest").text
    assert "Time limit per run: test 300 s · benchmark 600 s · ranked 600 s." in page


def test_small_things_that_looked_broken(site) -> None:
    """Error pages know who is signed in; /problems and trailing slashes lead somewhere; token
    names over 64 characters and names differing from another only in case are refused aloud."""
    _, token = site.account("alice")
    alice = site.signed_in(token)
    missing = alice.get("/no/such/page")
    assert missing.status_code == 404 and "Sign in</a>" not in missing.text and ">alice</a>" in missing.text
    assert alice.get("/problems", follow_redirects=False).headers["location"] == "/#problems"
    slash = alice.get("/problems/axpy_dest/?x=1", follow_redirects=False)
    assert slash.status_code == 308 and slash.headers["location"] == "/problems/axpy_dest?x=1"
    assert alice.get("/problems/axpy_dest/").status_code == 200
    csrf = csrf_of(alice.get("/tokens").text)
    long = alice.post("/tokens", data={"name": "n" * 80, "expires_in_days": "", "csrf_token": csrf})
    assert "use at most 64" in long.text
    from gpuarena.errors import GpuarenaError
    from gpuarena.service.auth import add_user

    with site.db.write() as session, pytest.raises(GpuarenaError, match="mistaken for the existing 'alice'"):
        add_user(session, "Alice")


def test_submissions_page_filters_and_downloads(site) -> None:
    """All submissions with filters; "your submissions" on the problem page; a leaderboard and a
    user's results as CSV and JSON; a submission's record as JSON, the log only for its author."""
    import csv as csv_module
    import io
    import json

    _, alice_token = site.account("alice")
    _, bob_token = site.account("bob")
    alice, bob = site.signed_in(alice_token), site.signed_in(bob_token)
    first = _submit(alice)
    second = _submit(bob, mode="benchmark")
    _finish(site, first, "alice's secret log line", "wrong")
    everyone = site.client().get("/submissions").text
    assert f"#{first}" in everyone and f"#{second}" in everyone
    only_bob = site.client().get("/submissions?user=bob").text
    assert f"#{second}" in only_bob and f"#{first}<" not in only_bob
    failed = site.client().get("/submissions?status=WRONG_VALUES&device_kind=cpu&problem=axpy_dest").text
    assert f"#{first}" in failed and f"#{second}<" not in failed
    assert "no user named" in site.client().get("/submissions?user=nobody").text
    problem = alice.get("/problems/axpy_dest").text
    assert "Your submissions" in problem and f"#{first}" in problem and f"#{second}<" not in problem
    results = site.client().get("/results.csv?user=alice")
    assert results.headers["content-type"].startswith("text/csv")
    rows = list(csv_module.DictReader(io.StringIO(results.text)))
    assert [(int(r["id"]), r["status"]) for r in rows] == [(first, "WRONG_VALUES")]
    assert json.loads(site.client().get("/results.json?user=bob").text)[0]["id"] == second
    board = site.client().get("/leaderboard.csv?problem=axpy_dest&device_kind=cpu")
    assert (
        board.status_code == 200
        and board.text == "rank,user,score,score_low,score_high,tied_with_above,submission_id,achieved_at\n"
    )
    assert site.client().get("/leaderboard.json?problem=nope&device_kind=cpu").status_code == 404
    own = json.loads(alice.get(f"/submissions/{first}/record.json").text)
    assert own["evaluation"]["log"] == "alice's secret log line"
    public = json.loads(site.client().get(f"/submissions/{first}/record.json").text)
    assert public["evaluation"]["log"] == "" and public["log_hidden"]


def test_an_invite_link_makes_an_account_without_shell_access(site) -> None:
    """An organiser makes a link on /invites; a visitor opens it, picks a name, and is signed in
    with a new account whose token (shown once) works with the API; a used-up, withdrawn or
    unknown link says why; participants cannot make invites."""
    import re as re_module

    _, org_token = site.account("olga", "organiser")
    olga = site.signed_in(org_token)
    form = olga.get("/invites")
    assert form.status_code == 200 and "Make one" in form.text and 'value="organiser"' not in form.text
    made = olga.post(
        "/invites",
        data={"role": "participant", "uses": "1", "days": "7", "note": "course", "csrf_token": csrf_of(form.text)},
    )
    link = re_module.search(r'id="new-invite">([^<]+)<', made.text).group(1)
    path = link[link.index("/join/") :]
    visitor = site.client()
    opened = visitor.get(path)
    assert opened.status_code == 200 and "makes you a participant" in opened.text
    joined = visitor.post(path, data={"name": "newbie", "csrf_token": csrf_of(opened.text)})
    assert joined.status_code == 200 and ">newbie</a>" in joined.text  # signed in
    token = re_module.search(r'id="new-token">([^<]+)<', joined.text).group(1)
    me = site.client().get("/api/me", headers={"Authorization": f"Bearer {token}"})
    assert me.status_code == 200 and me.json()["name"] == "newbie" and me.json()["role"] == "participant"
    again = site.client().get(path)
    assert again.status_code == 400 and "used as many times as it allows" in again.text
    assert "not known here" in site.client().get("/join/inv_nope").text
    second = olga.post(
        "/invites",
        data={
            "role": "participant",
            "uses": "5",
            "days": "",
            "note": "",
            "csrf_token": csrf_of(olga.get("/invites").text),
        },
    )
    invite_id = re_module.findall(r'action="/invites/(\d+)/revoke"', second.text)[0]
    withdrawn_path = re_module.search(r'id="new-invite">[^<]*(/join/[^<]+)<', second.text).group(1)
    olga.post(f"/invites/{invite_id}/revoke", data={"csrf_token": csrf_of(second.text)})
    assert "withdrawn" in site.client().get(withdrawn_path).text
    _, token = site.account("pat")
    assert site.signed_in(token).get("/invites").status_code == 403
