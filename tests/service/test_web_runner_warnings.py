"""The web forms that make a contest or a speed bounty say what the API's reply warns of: a device
kind no runner has been seen with (or none is online for). The page the form leads to shows the
warning once, to the one who made it; a later visit, or anyone else, sees the page as it is.

Before the fix, /contests/new and /bounties/new redirected to the new page without a word."""

from __future__ import annotations

import datetime as dt

from fastapi.testclient import TestClient
from tests.service.test_holdback import _signed_in
from tests.web.conftest import csrf_of

NOW = dt.datetime.now(dt.UTC).replace(microsecond=0)
NEVER_SEEN = "no runner of device kind &#39;B200&#39; has been seen yet"


def _contest_toml(slug: str, kind: str) -> str:
    return f"""slug = "{slug}"
title = "Kernels"
start = {(NOW - dt.timedelta(hours=1)).isoformat().replace("+00:00", "Z")}
end = {(NOW + dt.timedelta(hours=2)).isoformat().replace("+00:00", "Z")}
problems = ["axpy_dest"]
device_kinds = ["{kind}"]

[rule]
name = "fastest"
"""


def _post(client: TestClient, form_page: str, data: dict[str, str]) -> str:
    """Post a form with its page's CSRF token; the location it leads to."""
    token = csrf_of(client.get(form_page).text)
    done = client.post(form_page, data={**data, "csrf_token": token}, follow_redirects=False)
    assert done.status_code == 303, done.text
    return done.headers["location"]


def test_the_new_contest_page_warns_of_a_device_kind_no_runner_serves(api) -> None:
    api.runner()  # brings cpu, online now
    olga = _signed_in(api, api.user("olga", "organiser"))
    made = _post(olga, "/contests/new", {"spec": _contest_toml("later", "B200")})
    assert made == "/contests/later"
    page = olga.get(made).text
    assert 'id="runner-warnings"' in page and NEVER_SEEN in page
    assert NEVER_SEEN not in olga.get(made).text  # said once
    assert NEVER_SEEN not in api.http.get(made).text  # and to nobody else
    made = _post(olga, "/contests/new", {"spec": _contest_toml("now", "cpu")})
    assert 'id="runner-warnings"' not in olga.get(made).text  # the cpu runner said hello just now


def test_the_new_bounty_page_warns_of_a_device_kind_no_runner_serves(api) -> None:
    api.runner()
    org = _signed_in(api, api.user("org", "organiser"))
    form = {
        "title": "axpy 2x",
        "reward_amount": "100",
        "currency": "USD",
        "category": "speed",
        "problem": "axpy_dest",
        "target_over": "reference",
        "target_speedup": "2",
        "claim_days": "7",
    }
    made = _post(org, "/bounties/new", {**form, "device_kind": "B200"})
    page = org.get(made).text
    assert 'id="runner-warnings"' in page and NEVER_SEEN in page
    assert NEVER_SEEN not in org.get(made).text  # said once
    assert NEVER_SEEN not in api.http.get(made).text
    made = _post(org, "/bounties/new", {**form, "device_kind": "cpu"})
    assert 'id="runner-warnings"' not in org.get(made).text
    made = _post(org, "/bounties/new", {**form, "category": "bug", "title": "a bug"})
    assert 'id="runner-warnings"' not in org.get(made).text  # no device kind, nothing to warn of
