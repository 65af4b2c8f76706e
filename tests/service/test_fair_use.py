"""Fair use of the runners (issue 17): fair order between users, the queue position, at most
a few submissions in flight per user, and cancel (queued:
out of the queue; running: the runner loses the lease and stops it; the result is refused)."""

from __future__ import annotations

from tests.service.conftest import GOOD, submission_body


def _body(i: int, **kwargs) -> dict:
    return submission_body(source=GOOD + f"# variant {i}\n", **kwargs)


def _claim(api, headers, runner_id) -> dict | None:
    answer = api.http.post("/api/runner/claim", json={"runner_id": runner_id, "device_kinds": ["cpu"]}, headers=headers)
    assert answer.status_code in (200, 204), answer.text
    return answer.json() if answer.status_code == 200 and answer.content and answer.json() else None


def test_one_user_s_many_jobs_do_not_starve_another_s_one(api) -> None:
    runner_headers, runner_id = api.runner()
    ann, bob = api.user("ann"), api.user("bob")
    ann_ids = [
        api.http.post("/api/submissions", json=_body(i, mode="test"), headers=ann).json()["id"] for i in range(5)
    ]
    bob_id = api.http.post("/api/submissions", json=_body(99, mode="test"), headers=bob).json()["id"]
    positions = [api.http.get(f"/api/submissions/{i}").json()["queue_position"] for i in ann_ids + [bob_id]]
    assert positions == [1, 3, 4, 5, 6, 2]  # bob's one job goes second, not sixth
    order = [job["submission_id"] for job in iter(lambda: _claim(api, runner_headers, runner_id), None)]
    assert order == [ann_ids[0], bob_id, *ann_ids[1:]]
    assert api.http.get(f"/api/submissions/{bob_id}").json()["queue_position"] is None  # no longer queued


def test_too_many_in_flight_are_refused(api) -> None:
    api.runner()
    ann = api.user("ann")
    api.settings.max_in_flight = limit = 4
    made = [api.http.post("/api/submissions", json=_body(i), headers=ann).status_code for i in range(limit + 1)]
    assert made == [201] * limit + [429]
    refused = api.http.post("/api/submissions", json=_body(500), headers=ann)
    assert refused.status_code == 429 and "the limit is" in refused.json()["error"] and "Retry-After" in refused.headers
    assert api.http.post("/api/submissions", json=_body(0), headers=api.user("bob")).status_code == 201  # per user
    assert api.http.post("/api/submissions", json=_body(0), headers=api.user("root", "admin")).status_code == 201


def test_cancel_a_queued_and_a_running_submission(api) -> None:
    runner_headers, runner_id = api.runner()
    ann, bob, admin = api.user("ann"), api.user("bob"), api.user("root", "admin")
    running = api.http.post("/api/submissions", json=_body(1, mode="test"), headers=ann).json()["id"]
    queued = api.http.post("/api/submissions", json=_body(2, mode="test"), headers=ann).json()["id"]
    job = _claim(api, runner_headers, runner_id)
    assert job["submission_id"] == running

    not_yours = api.http.post(f"/api/submissions/{queued}/cancel", headers=bob)
    assert not_yours.status_code == 403 and "only its author or an admin" in not_yours.json()["error"]
    gone = api.http.post(f"/api/submissions/{queued}/cancel", headers=ann)
    assert gone.status_code == 200 and gone.json()["status"] == "CANCELLED" and gone.json()["done"]
    assert _claim(api, runner_headers, runner_id) is None  # out of the queue

    stopped = api.http.post(f"/api/submissions/{running}/cancel", headers=admin)
    assert stopped.status_code == 200 and stopped.json()["reason"] == "cancelled by root"
    beat = api.http.post(
        "/api/runner/heartbeat",
        headers=runner_headers,
        json={"runner_id": runner_id, "leases": {str(job["job_id"]): job["lease_token"]}},
    )
    assert beat.status_code == 200 and job["job_id"] in beat.json()["lost"]  # the runner stops it
    late = api.http.post(
        f"/api/runner/jobs/{job['job_id']}/result",
        headers=runner_headers,
        json={
            "lease_token": job["lease_token"],
            "evaluation": {
                "status": "PASSED",
                "problem": "axpy_dest",
                "solution_hash": "0" * 64,
                "device": "cpu",
                "mode": "test",
            },
        },
    )
    assert late.status_code == 409, late.text
    assert api.http.get(f"/api/submissions/{running}").json()["status"] == "CANCELLED"
    twice = api.http.post(f"/api/submissions/{running}/cancel", headers=ann)
    assert twice.status_code == 400 and "already finished (CANCELLED)" in twice.json()["error"]


def test_the_in_flight_cap_holds_against_simultaneous_submissions(api) -> None:
    """30 submissions at once from one user: on PostgreSQL each transaction counted the others'
    uncommitted rows as absent, and 30, 27 and 17 were accepted against a cap of 5. The user's
    row is locked from the count to the commit."""
    import threading

    api.runner()
    ann = api.user("ann")
    api.settings.max_in_flight = limit = 5
    answers: list[int] = []
    start = threading.Barrier(30)

    def submit(i: int) -> None:
        start.wait()
        answers.append(api.http.post("/api/submissions", json=_body(1000 + i), headers=ann).status_code)

    threads = [threading.Thread(target=submit, args=(i,)) for i in range(30)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(answers) == [201] * limit + [429] * (30 - limit)
    listed = api.http.get("/api/submissions", params={"user": "ann"}).json()
    assert len(listed) == limit
