"""Scale-out and runner trust against a real database (SQLite and PostgreSQL): token scopes,
results bound to the runner and lease that claimed the job, idempotent submissions, drained
devices in the runners API, a restarted runner's jobs re-queued, the migration chain."""

from __future__ import annotations

import http.server
import json
import threading
import time

import httpx
from sqlalchemy import func, select, update
from tests.service.conftest import GOOD, submission_body
from typer.testing import CliRunner

from gpuarena.cli.app import app
from gpuarena.contracts.records import Evaluation, Status
from gpuarena.service.migrate import current
from gpuarena.service.tables import Job, Result, Submission


def _evaluation(score: float) -> dict:
    return Evaluation(
        status=Status.PASSED, problem="axpy_dest", solution_hash="0" * 64, device="cpu", mode="ranked", score=score
    ).model_dump(mode="json")


def _hello(api, headers: dict, name: str, devices: list[dict]) -> int:
    reply = api.http.post("/api/runner/hello", json={"name": name, "devices": devices}, headers=headers)
    assert reply.status_code == 200, reply.text
    return reply.json()["runner_id"]


def _claim(api, headers: dict, runner_id: int, kinds: list[str], device: str = "") -> dict | None:
    answer = api.http.post(
        "/api/runner/claim", json={"runner_id": runner_id, "device_kinds": kinds, "device": device}, headers=headers
    )
    assert answer.status_code in (200, 204), answer.text
    return answer.json() if answer.status_code == 200 else None


def _expire_all(api) -> None:
    with api.db.write() as session:
        session.execute(update(Job).where(Job.state == "leased").values(lease_expires_at=Job.queued_at))


def test_migrations_reach_the_latest_revision(db, database_url) -> None:
    from alembic.script import ScriptDirectory

    from gpuarena.service.migrate import alembic_config

    head = ScriptDirectory.from_config(alembic_config(database_url)).get_current_head()
    assert head is not None and head >= "0008"  # 0008: held results, kept leaderboard rows
    assert current(database_url) == head


def test_scoped_token_cannot_claim_or_report_other_kinds(api) -> None:
    api.runner("cpu-box")  # makes cpu a known kind
    api.http.post("/api/submissions", json=submission_body(), headers=api.user("alice"))
    scoped = api.user("h100-box", "runner", device_kinds=["H100"])
    runner_id = _hello(api, scoped, "h100-box", [{"device": "cuda:0", "kind": "H100"}])
    answer = api.http.post("/api/runner/claim", json={"runner_id": runner_id, "device_kinds": ["cpu"]}, headers=scoped)
    assert answer.status_code == 403
    assert "scoped to device kinds H100" in answer.json()["error"] and "not serve cpu" in answer.json()["error"]
    beat = api.http.post(
        "/api/runner/heartbeat",
        headers=scoped,
        json={"runner_id": runner_id, "devices": [{"device": "cpu", "kind": "cpu"}]},
    )
    assert beat.status_code == 403
    assert _claim(api, scoped, runner_id, ["H100"]) is None  # in scope: allowed, nothing queued for H100
    with api.db.read() as session:
        assert session.scalar(select(Job.state)) == "queued"


def test_a_result_is_bound_to_the_runner_and_lease_that_claimed_it(api) -> None:
    headers = api.user("fleet", "runner")  # one account, two runner processes
    first = _hello(api, headers, "box-1", [{"device": "cpu", "kind": "cpu"}])
    second = _hello(api, headers, "box-2", [{"device": "cpu", "kind": "cpu"}])
    api.http.post("/api/submissions", json=submission_body(), headers=api.user("alice"))
    job = _claim(api, headers, first, ["cpu"], device="cpu")
    # the other runner, even with the right lease token, may not post it
    answer = api.http.post(
        f"/api/runner/jobs/{job['job_id']}/result",
        headers=headers,
        json={"lease_token": job["lease_token"], "evaluation": _evaluation(3.0), "runner_id": second},
    )
    assert answer.status_code == 409 and f"leased to runner {first}" in answer.json()["error"]
    # the lease expires and the second runner takes the job over
    _expire_all(api)
    taken = _claim(api, headers, second, ["cpu"], device="cpu")
    assert taken["job_id"] == job["job_id"] and taken["lease_token"] != job["lease_token"]
    stale = api.http.post(
        f"/api/runner/jobs/{job['job_id']}/result",
        headers=headers,
        json={"lease_token": job["lease_token"], "evaluation": _evaluation(9.0), "runner_id": first},
    )
    assert stale.status_code == 409 and f"leased to runner {second}, not runner {first}" in stale.json()["error"]
    stale = api.http.post(
        f"/api/runner/jobs/{job['job_id']}/result",
        headers=headers,
        json={"lease_token": job["lease_token"], "evaluation": _evaluation(9.0)},
    )
    assert stale.status_code == 409 and "no longer valid" in stale.json()["error"]
    fresh = api.http.post(
        f"/api/runner/jobs/{job['job_id']}/result",
        headers=headers,
        json={"lease_token": taken["lease_token"], "evaluation": _evaluation(2.0), "runner_id": second},
    )
    assert fresh.json() == {"accepted": True, "duplicate": False}
    # the stale lease's result after the job is done: still refused, nothing overwritten
    late = api.http.post(
        f"/api/runner/jobs/{job['job_id']}/result",
        headers=headers,
        json={"lease_token": job["lease_token"], "evaluation": _evaluation(9.0)},
    )
    assert late.status_code == 409 and "no longer valid" in late.json()["error"]
    with api.db.read() as session:
        results = list(session.scalars(select(Result)))
        assert [(r.runner_id, r.score) for r in results] == [(second, 2.0)]
        assert session.scalar(select(Submission.score)) == 2.0
    detail = api.http.get(f"/api/submissions/{job['submission_id']}").json()
    assert (detail["runner"], detail["runner_device"], detail["attempts"]) == ("box-2", "cpu", 2)


def test_same_client_key_makes_one_submission(api) -> None:
    api.runner()
    alice, bob = api.user("alice"), api.user("bob")
    body = {**submission_body(), "client_key": "batch-1-0"}
    ids = []

    def post() -> None:
        answer = api.http.post("/api/submissions", json=body, headers=alice)
        assert answer.status_code == 201, answer.text
        ids.append(answer.json()["id"])

    threads = [threading.Thread(target=post) for _ in range(6)]  # retries racing through the servers
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(ids)) == 1 and len(ids) == 6
    with api.db.read() as session:
        assert session.scalar(select(func.count()).select_from(Submission)) == 1
        assert session.scalar(select(func.count()).select_from(Job)) == 1
    assert api.http.post("/api/submissions", json=body, headers=bob).json()["id"] != ids[0]  # keys are per user
    other = api.http.post("/api/submissions", json={**body, "mode": "test"}, headers=alice)
    assert other.status_code == 400 and "client_key 'batch-1-0' was used" in other.json()["error"]
    listed = api.http.get("/api/submissions", params={"ids": f"{ids[0]},999"}).json()
    assert [s["id"] for s in listed] == [ids[0]]
    assert api.http.get("/api/submissions", params={"ids": "1;drop"}).status_code == 422


def test_drained_device_is_reported_and_claims_nothing(api) -> None:
    headers = api.user("gpu-host", "runner")
    devices = [
        {"device": "cuda:0", "kind": "H100"},
        {"device": "cuda:1", "kind": "H100"},
        {"device": "cpu", "kind": "cpu"},
    ]
    runner_id = _hello(api, headers, "gpu-host", devices)
    api.http.post("/api/submissions", json=submission_body(device_kind="cpu"), headers=api.user("alice"))
    job = _claim(api, headers, runner_id, ["cpu"], device="cpu")
    devices[1].update(healthy=False, reason="cuda:1: the health check (a tiny CUDA op) failed: CUDA error")
    devices[2].update(healthy=False, reason="cpu disappeared")
    beat = api.http.post(
        "/api/runner/heartbeat",
        headers=headers,
        json={"runner_id": runner_id, "leases": {str(job["job_id"]): job["lease_token"]}, "devices": devices},
    )
    assert beat.json() == {"lost": [], "preempted": []}
    assert api.http.get("/api/runners").status_code == 401
    (info,) = api.http.get("/api/runners", headers=headers).json()
    assert (info["name"], info["online"], info["device_kinds"], info["running"]) == (
        "gpu-host",
        True,
        ["H100"],
        [job["job_id"]],
    )
    health = {d["device"]: (d["healthy"], d["reason"]) for d in info["devices"]}
    assert health["cuda:0"] == (True, "") and health["cuda:1"][0] is False and "CUDA error" in health["cuda:1"][1]
    assert health["cpu"] == (False, "cpu disappeared")
    answer = api.http.post("/api/runner/claim", json={"runner_id": runner_id, "device_kinds": ["cpu"]}, headers=headers)
    assert answer.status_code == 403 and "no healthy device of kind cpu" in answer.json()["error"]


def test_a_restarted_runner_gets_its_old_jobs_requeued(api) -> None:
    headers, runner_id = api.runner("box")
    alice = api.user("alice")
    sids = [api.http.post("/api/submissions", json=submission_body(), headers=alice).json()["id"] for _ in range(2)]
    held = _claim(api, headers, runner_id, ["cpu"])
    assert held["submission_id"] == sids[0]
    # the runner process dies and starts again: its hello puts the job back at once
    assert _hello(api, headers, "box", [{"device": "cpu", "kind": "cpu"}]) == runner_id
    with api.db.read() as session:
        job = session.get(Job, held["job_id"])
        assert (job.state, job.lease_token, job.attempts) == ("queued", None, 1)
        assert "box restarted" in job.last_error
    again = _claim(api, headers, runner_id, ["cpu"])
    assert again["job_id"] == held["job_id"]  # oldest first: the job it lost


class _LosesTheAnswer(http.server.BaseHTTPRequestHandler):
    """A server in front of the real one that passes a POST on and drops its answer: the
    submission is made, and the client hears only that the connection closed."""

    upstream = ""
    bodies: list[dict] = []

    def do_POST(self) -> None:  # http.server's name
        body = self.rfile.read(int(self.headers["Content-Length"]))
        _LosesTheAnswer.bodies.append(json.loads(body))
        httpx.post(
            _LosesTheAnswer.upstream + self.path,
            content=body,
            headers={"Authorization": self.headers["Authorization"], "Content-Type": "application/json"},
        )
        self.close_connection = True  # no status line: the answer is lost

    def log_message(self, *args) -> None:
        pass


def test_gpuarena_submit_retries_a_lost_answer_with_its_key_and_makes_one_submission(
    api, live, tmp_path, monkeypatch
) -> None:
    """`gpuarena submit` sends an idempotency key of its own (one per invocation) and retries a
    POST whose answer was lost with the same key (through the next server): one submission."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    api.runner()
    alice = api.user("alice")
    _LosesTheAnswer.upstream, _LosesTheAnswer.bodies = live, []
    front = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _LosesTheAnswer)
    threading.Thread(target=front.serve_forever, daemon=True).start()
    solution = tmp_path / "sol.py"
    solution.write_text(GOOD)

    def cancel_it() -> None:  # nothing runs it here: its author cancels it, which ends the follow
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            with api.db.read() as session:
                made = session.scalar(select(Submission.id))
            if made is not None:
                api.http.post(f"/api/submissions/{made}/cancel", headers=alice)
                return
            time.sleep(0.1)

    canceller = threading.Thread(target=cancel_it)
    canceller.start()
    try:
        token = alice["Authorization"].removeprefix("Bearer ")
        done = CliRunner().invoke(
            app,
            ["submit", "axpy_dest", str(solution), "--device", "cpu", "--mode", "test"]
            + ["--server", f"http://127.0.0.1:{front.server_address[1]},{live}", "--token", token],
        )
    finally:
        canceller.join()
        front.shutdown()
    assert done.exit_code == 1, done.output  # CANCELLED: not PASSED, and not a failed submit
    assert "trying again" in done.output and "CANCELLED" in done.output
    (first,) = _LosesTheAnswer.bodies
    with api.db.read() as session:
        (made,) = session.scalars(select(Submission)).all()  # the retry made no second one
    assert first["client_key"].startswith("submit-") and made.client_key == first["client_key"]
