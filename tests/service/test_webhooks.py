"""Webhooks (issue 17): a finished submission is POSTed, signed, to its author's webhooks; a
private address is refused unless the server allows it."""

from __future__ import annotations

import hashlib
import hmac
import http.server
import json
import threading
import time

import pytest
from tests.service.conftest import submission_body


class _Receiver(http.server.BaseHTTPRequestHandler):
    calls: list[tuple[dict, bytes]] = []

    def do_POST(self) -> None:  # http.server's name
        body = self.rfile.read(int(self.headers["Content-Length"]))
        _Receiver.calls.append((dict(self.headers), body))
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args) -> None:
        pass


def _wait_for(calls: list, n: int, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while len(calls) < n and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(calls) >= n, calls


@pytest.fixture
def receiver_url():
    """A real HTTP server on this machine taking webhook calls (into _Receiver.calls)."""
    receiver = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Receiver)
    threading.Thread(target=receiver.serve_forever, daemon=True).start()
    _Receiver.calls = []
    try:
        yield f"http://127.0.0.1:{receiver.server_address[1]}/hook"
    finally:
        receiver.shutdown()


def test_a_finished_submission_is_posted_signed_to_its_author_s_webhook(api, receiver_url) -> None:
    url = receiver_url
    runner_headers, runner_id = api.runner()
    alice, bob = api.user("alice"), api.user("bob")
    refused = api.http.post("/api/webhooks", json={"url": url}, headers=alice)
    assert refused.status_code == 400 and "private or local address" in refused.json()["error"]
    assert api.http.post("/api/webhooks", json={"url": "file:///etc/passwd"}, headers=alice).status_code == 400
    api.settings.webhooks_allow_private = True  # a closed network's server may allow them
    made = api.http.post("/api/webhooks", json={"url": url}, headers=alice)
    assert made.status_code == 201
    secret = made.json()["secret"]
    assert "secret" not in api.http.get("/api/webhooks", headers=alice).json()[0]

    mine = api.http.post("/api/submissions", json=submission_body(mode="test"), headers=alice).json()["id"]
    api.http.post("/api/submissions", json=submission_body(mode="test"), headers=bob)  # bob has no webhook
    job = api.http.post(
        "/api/runner/claim", json={"runner_id": runner_id, "device_kinds": ["cpu"]}, headers=runner_headers
    ).json()
    assert job["submission_id"] == mine
    evaluation = {
        "status": "PASSED",
        "problem": "axpy_dest",
        "solution_hash": "0" * 64,
        "device": "cpu",
        "mode": "test",
    }
    api.http.post(
        f"/api/runner/jobs/{job['job_id']}/result",
        headers=runner_headers,
        json={"lease_token": job["lease_token"], "evaluation": evaluation},
    )
    _wait_for(_Receiver.calls, 1)
    headers, body = _Receiver.calls[0]
    expected = "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
    assert headers["X-Gpuarena-Signature"] == expected
    sent = json.loads(body)
    assert sent["event"] == "submission.finished"
    assert (sent["submission"]["id"], sent["submission"]["status"]) == (mine, "PASSED")

    queued = api.http.post("/api/submissions", json=submission_body(mode="benchmark"), headers=alice).json()["id"]
    api.http.post(f"/api/submissions/{queued}/cancel", headers=alice)
    _wait_for(_Receiver.calls, 2)
    assert json.loads(_Receiver.calls[1][1])["submission"]["status"] == "CANCELLED"
    deadline = time.monotonic() + 5
    while api.http.get("/api/webhooks", headers=alice).json()[0]["last_status"] != "HTTP 200":
        assert time.monotonic() < deadline
        time.sleep(0.05)
    hook_id = made.json()["info"]["id"]
    assert api.http.delete(f"/api/webhooks/{hook_id}", headers=bob).status_code == 403
    assert api.http.delete(f"/api/webhooks/{hook_id}", headers=alice).status_code == 204
    assert len(_Receiver.calls) == 2


def test_a_submission_that_ends_as_error_is_posted_too(api, receiver_url) -> None:
    """Out of attempts (the harness failed on it every time), a submission ends as ERROR: its
    author is told, as for a verdict or a cancel."""
    runner_headers, runner_id = api.runner()
    alice = api.user("alice")
    api.settings.webhooks_allow_private = True
    assert api.http.post("/api/webhooks", json={"url": receiver_url}, headers=alice).status_code == 201
    mine = api.http.post("/api/submissions", json=submission_body(mode="test"), headers=alice).json()["id"]
    for attempt in range(3):
        job = api.http.post(
            "/api/runner/claim", json={"runner_id": runner_id, "device_kinds": ["cpu"]}, headers=runner_headers
        ).json()
        assert job["submission_id"] == mine
        api.http.post(
            f"/api/runner/jobs/{job['job_id']}/release",
            headers=runner_headers,
            json={"lease_token": job["lease_token"], "error": f"the harness crashed ({attempt})"},
        )
        if attempt < 2:
            time.sleep(0.3)
            assert _Receiver.calls == []  # back in the queue: nothing finished yet
    _wait_for(_Receiver.calls, 1)
    sent = json.loads(_Receiver.calls[0][1])["submission"]
    assert (sent["id"], sent["status"]) == (mine, "ERROR") and "gave up after 3 attempts" in sent["reason"]


def test_a_target_is_checked_again_when_it_is_called(api, receiver_url) -> None:
    """A target checked once, when it was made, could later resolve to a private address (a
    name whose record changed): each delivery resolves the host again, checks every address and
    posts to the address it checked. Here the target passed when made (private addresses were
    allowed then) and fails when called: it is not posted to, and the webhook says why."""
    runner_headers, runner_id = api.runner()
    alice = api.user("alice")
    api.settings.webhooks_allow_private = True
    made = api.http.post("/api/webhooks", json={"url": receiver_url}, headers=alice)
    assert made.status_code == 201
    api.settings.webhooks_allow_private = False  # the check at delivery now refuses 127.0.0.1
    mine = api.http.post("/api/submissions", json=submission_body(mode="test"), headers=alice).json()["id"]
    job = api.http.post(
        "/api/runner/claim", json={"runner_id": runner_id, "device_kinds": ["cpu"]}, headers=runner_headers
    ).json()
    assert job["submission_id"] == mine
    evaluation = {"status": "PASSED", "problem": "axpy_dest", "solution_hash": "0" * 64, "device": "cpu"}
    done = api.http.post(
        f"/api/runner/jobs/{job['job_id']}/result",
        headers=runner_headers,
        json={"lease_token": job["lease_token"], "evaluation": {**evaluation, "mode": "test"}},
    )
    assert done.status_code == 200, done.text
    deadline = time.monotonic() + 10
    while not (status := api.http.get("/api/webhooks", headers=alice).json()[0]["last_status"]):
        assert time.monotonic() < deadline, "the delivery was not recorded"
        time.sleep(0.05)
    assert status.startswith("not called") and "private or local address" in status
    assert _Receiver.calls == []

    # allowed again, the same target is called: through the address it was checked at, with
    # the URL's own host in the Host header
    api.settings.webhooks_allow_private = True
    queued = api.http.post("/api/submissions", json=submission_body(mode="benchmark"), headers=alice).json()["id"]
    api.http.post(f"/api/submissions/{queued}/cancel", headers=alice)
    _wait_for(_Receiver.calls, 1)
    headers, body = _Receiver.calls[0]
    assert json.loads(body)["submission"]["id"] == queued
    assert headers["Host"] == receiver_url.split("/")[2]
