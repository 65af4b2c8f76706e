"""A profile on the submission page, in a real browser: the per-kernel table and the roofline
plot of a profile recorded on an H200 (tests/fixtures/profile-triton-H200.json, from
`gpuarena run --mode profile`), shown to the author and hidden from everyone else, like the log."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import httpx
import pytest
from tests.web.test_browser import SOFTMAX, _sign_in, _watch_errors
from tests.web.test_contest_pages import _wait_done

pytestmark = pytest.mark.e2e
RECORDED = Path(__file__).resolve().parents[1] / "fixtures" / "profile-triton-H200.json"


def _with_recorded_profile(server, submission_id: int) -> dict:
    """The submission's stored record, given the recorded profile (no GPU here to make one)."""
    profile = json.loads(RECORDED.read_text())
    with sqlite3.connect(server.home / "gpuarena.db") as db:
        (text,) = db.execute("SELECT evaluation FROM results WHERE submission_id = ?", (submission_id,)).fetchone()
        evaluation = json.loads(text) | {"profile": profile}
        db.execute("UPDATE results SET evaluation = ? WHERE submission_id = ?", (json.dumps(evaluation), submission_id))
    return profile


def test_the_author_sees_the_profile_table_and_roofline_others_do_not(server, browser) -> None:
    token = server.user("prof-author")
    body = {
        "problem": "level1/softmax",
        "device_kind": "cpu",
        "mode": "test",
        "solution": {
            "name": "sm",
            "manifest": {"language": "pytorch", "entry_point": "sm.py:solve"},
            "sources": {"sm.py": SOFTMAX},
        },
    }
    made = httpx.post(f"{server.url}/api/submissions", json=body, headers={"Authorization": f"Bearer {token}"})
    assert made.status_code == 201, made.text
    sid = made.json()["id"]
    _wait_done(server, [sid])
    profile = _with_recorded_profile(server, sid)

    context = browser.new_context(base_url=server.url)
    errors = _watch_errors(context)
    page = _sign_in(context, server, token, f"/submissions/{sid}")
    rows = page.locator("table.profile tbody tr")
    kernels = profile["solution_profile"]["kernels"] + profile["reference_profile"]["kernels"]
    assert rows.count() == len(kernels) == 2
    first = rows.first.inner_text()
    assert "solution" in first and "softmax_single_pass" in first and "long_scoreboard" in first
    assert f"{kernels[0]['duration_us']:.2f}" in first
    figure = page.locator("figure.roofline svg")
    assert figure.count() == 1 and figure.locator("circle").count() == 2 + 2  # two kernels, two legend dots
    assert "TFLOP/s" in figure.text_content()
    assert not errors

    anonymous = browser.new_context(base_url=server.url).new_page()
    anonymous.goto(f"/submissions/{sid}")
    assert anonymous.locator("table.profile").count() == 0
    assert httpx.get(f"{server.url}/api/submissions/{sid}").json()["evaluation"]["profile"] is None


def test_profile_mode_is_refused_on_a_cpu_device_kind(server) -> None:
    token = server.user("prof-cpu")
    body = {
        "problem": "level1/softmax",
        "device_kind": "cpu",
        "mode": "profile",
        "solution": {
            "name": "sm",
            "manifest": {"language": "pytorch", "entry_point": "sm.py:solve"},
            "sources": {"sm.py": SOFTMAX},
        },
    }
    made = httpx.post(f"{server.url}/api/submissions", json=body, headers={"Authorization": f"Bearer {token}"})
    assert made.status_code == 400 and "choose a GPU device kind" in made.text
