"""The JSON API against a real database (SQLite and PostgreSQL): accounts, submissions, bad
input, rate limits, and the runner protocol with its leases."""

from __future__ import annotations

import datetime as dt
import json
import threading

from sqlalchemy import func, select, update
from tests.service.conftest import submission_body

from gpuarena.contracts.records import Evaluation, Status
from gpuarena.service.tables import (
    Job,
    LeaderboardEntry,
    Problem,
    Result,
    Runner,
    SolutionBlob,
    Submission,
    Token,
    User,
)


def _counts(api) -> tuple[int, int, int]:
    with api.db.read() as session:
        return tuple(session.scalar(select(func.count()).select_from(t)) for t in (Submission, Job, SolutionBlob))


def _evaluation(status: str = "PASSED", score: float | None = 1.5) -> dict:
    return Evaluation(
        status=Status(status), problem="axpy_dest", solution_hash="0" * 64, device="cpu", mode="ranked", score=score
    ).model_dump(mode="json")


def test_health_and_problems_need_no_token(api) -> None:
    health = api.http.get("/api/health").json()
    assert health["status"] == "ok" and health["database"] in ("sqlite", "postgresql")
    problems = api.http.get("/api/problems").json()
    assert [p["id"] for p in problems] == ["axpy_dest"]
    detail = api.http.get("/api/problems/axpy_dest").json()
    assert "def reference" in detail["reference"] and detail["version"] == 1
    assert "secret" not in str(detail).lower()
    assert api.http.get("/api/problems/level9/nope").status_code == 404
    assert "/api/submissions" in api.http.get("/openapi.json").json()["paths"]


def test_tokens_are_required_checked_revocable_and_expire(api) -> None:
    headers = api.user("alice")
    assert api.http.get("/api/me").status_code == 401
    assert api.http.get("/api/me", headers={"Authorization": "Bearer gpa_wrong"}).status_code == 401
    assert api.http.get("/api/me", headers=headers).json() == {"name": "alice", "role": "participant"}
    made = api.http.post("/api/tokens", json={"name": "laptop"}, headers=headers)
    assert made.status_code == 201
    second = {"Authorization": f"Bearer {made.json()['token']}"}
    listed = api.http.get("/api/tokens", headers=second).json()
    assert {t["name"] for t in listed} == {"test", "laptop"}
    assert all("hash" not in t and len(t["prefix"]) < 20 for t in listed)
    with api.db.read() as session:  # only the hash is stored
        assert made.json()["token"] not in {t.hash for t in session.scalars(select(Token))}
    revoked = api.http.delete(f"/api/tokens/{made.json()['info']['id']}", headers=headers)
    assert revoked.status_code == 200 and revoked.json()["revoked_at"]
    answer = api.http.get("/api/me", headers=second)
    assert answer.status_code == 401 and "revoked" in answer.json()["error"]
    with api.db.write() as session:
        session.execute(update(Token).values(expires_at=dt.datetime(2020, 1, 1)))
    answer = api.http.get("/api/me", headers=headers)
    assert answer.status_code == 401 and "expired" in answer.json()["error"]


def test_only_admins_create_users(api) -> None:
    participant, admin = api.user("p"), api.user("root", "admin")
    assert api.http.post("/api/users", json={"name": "x"}, headers=participant).status_code == 403
    made = api.http.post("/api/users", json={"name": "newbie"}, headers=admin)
    assert made.status_code == 201
    assert (
        api.http.get("/api/me", headers={"Authorization": f"Bearer {made.json()['token']}"}).json()["name"] == "newbie"
    )
    assert api.http.post("/api/users", json={"name": "newbie"}, headers=admin).status_code == 400
    assert api.http.post("/api/users", json={"name": "bad name!"}, headers=admin).status_code == 400


def test_bad_submissions_get_a_clear_4xx_and_write_nothing(api) -> None:
    api.runner()  # makes "cpu" a known device kind
    headers = api.user("alice")
    before = _counts(api)
    cases = [
        (dict(content=b"{not json", headers={**headers, "Content-Type": "application/json"}), 422, "JSON"),
        (dict(json={**submission_body(), "mode": "fastest"}), 422, "mode"),
        (dict(json={**submission_body(), "device_kind": 7}), 422, "device_kind"),
        (dict(json={k: v for k, v in submission_body().items() if k != "solution"}), 422, "solution"),
        (dict(json=submission_body(problem="level9/nope")), 404, "unknown problem"),
        (dict(json=submission_body(device_kind="B300")), 400, "unknown device kind"),
        (
            dict(
                json={
                    **submission_body(),
                    "solution": {
                        "name": "s",
                        "manifest": {"language": "pytorch", "entry_point": "missing.py:solve"},
                        "sources": {"sol.py": "x"},
                    },
                }
            ),
            422,
            "entry_point",
        ),
        (
            dict(json={**submission_body(), "solution": {**submission_body()["solution"], "hash": "ab" * 32}}),
            400,
            "hash",
        ),
        (
            dict(
                json={
                    **submission_body(),
                    "solution": {
                        "name": "s",
                        "manifest": {"language": "cuda", "entry_point": "f"},
                        "sources": {"k.cu": "x"},
                    },
                }
            ),
            400,
            "GPU",
        ),
        (dict(json=submission_body(source="x" * 3_000_000)), 413, "larger"),
        # refused at the door, like the web form does, never queued to fail on a runner
        (dict(json=submission_body(source="")), 422, "sol.py is empty"),
        (dict(json=submission_body(source="  \n")), 422, "sol.py is empty"),
        (
            dict(
                json={
                    **submission_body(),
                    "solution": {
                        "name": "s",
                        "manifest": {"language": "pytorch", "entry_point": "../../evil.py:solve"},
                        "sources": {"../../evil.py": "x"},
                    },
                }
            ),
            422,
            "'..' parts",
        ),
        (
            dict(
                json={
                    **submission_body(),
                    "solution": {
                        "name": "s",
                        "manifest": {"language": "pytorch", "entry_point": "/tmp/evil.py:solve"},
                        "sources": {"/tmp/evil.py": "x"},
                    },
                }
            ),
            422,
            "relative",
        ),
        (
            dict(
                json={
                    **submission_body(),
                    "solution": {
                        "name": "s",
                        "manifest": {"language": "pytorch", "entry_point": "solve"},
                        "sources": {"a.py": "x"},
                    },
                }
            ),
            422,
            "'file.py:function'",
        ),
        (dict(content=b'{"problem": "\xff"}', headers={**headers, "Content-Type": "application/json"}), 400, "UTF-8"),
        (dict(content=b"[" * 100_000, headers={**headers, "Content-Type": "application/json"}), 400, "nested"),
    ]
    for kwargs, status, words in cases:
        kwargs.setdefault("headers", headers)
        answer = api.http.post("/api/submissions", **kwargs)
        assert answer.status_code == status, (words, answer.status_code, answer.text[:300])
        assert words.lower() in answer.json()["error"].lower(), (words, answer.json()["error"])
        assert "function-after" not in answer.json()["error"] and "Value error" not in answer.json()["error"]
    assert _counts(api) == before


def test_upload_a_file(api) -> None:
    api.runner()
    headers = api.user("alice")
    source = submission_body()["solution"]["sources"]["sol.py"]
    made = api.http.post(
        "/api/submissions/upload",
        headers=headers,
        files={"file": ("axpy.py", source.encode())},
        data={"problem": "axpy_dest", "device_kind": "cpu", "mode": "test"},
    )
    assert made.status_code == 201, made.text
    assert made.json()["status"] == "QUEUED" and made.json()["mode"] == "test"
    bad = api.http.post(
        "/api/submissions/upload",
        headers=headers,
        files={"file": ("x.py", b"\xff\xfe")},
        data={"problem": "axpy_dest", "device_kind": "cpu"},
    )
    assert bad.status_code == 400 and "UTF-8" in bad.json()["error"]
    empty = api.http.post(
        "/api/submissions/upload",
        headers=headers,
        files={"file": ("x.py", b"")},
        data={"problem": "axpy_dest", "device_kind": "cpu"},
    )
    assert empty.status_code in (400, 422) and "x.py is empty" in empty.json()["error"], empty.text


def test_same_code_is_stored_once(api) -> None:
    api.runner()
    headers = api.user("alice")
    for mode in ("test", "benchmark", "ranked"):  # the same code in flight twice in one mode is refused
        assert api.http.post("/api/submissions", json=submission_body(mode=mode), headers=headers).status_code == 201
    assert _counts(api) == (3, 3, 1)


def test_rate_limit_holds_under_concurrency(api) -> None:
    api.runner()
    api.settings.submit_limit_per_minute = 5
    headers = api.user("alice")
    codes: list[int] = []

    def submit(i: int) -> None:  # distinct code: a copy of a submission in flight is refused before the limit
        body = submission_body(source=submission_body()["solution"]["sources"]["sol.py"] + f"# {i}\n")
        codes.append(api.http.post("/api/submissions", json=body, headers=headers).status_code)

    threads = [threading.Thread(target=submit, args=(i,)) for i in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(codes) == [201] * 5 + [429] * 11
    refused = api.http.post("/api/submissions", json=submission_body(), headers=headers)
    assert refused.status_code == 429 and int(refused.headers["Retry-After"]) >= 0
    assert _counts(api)[0] == 5
    other = api.user("bob")  # limits are per user
    assert api.http.post("/api/submissions", json=submission_body(), headers=other).status_code == 201


def test_runner_endpoints_need_a_runner_token(api) -> None:
    participant = api.user("alice")
    answer = api.http.post("/api/runner/hello", json={"name": "x", "devices": []}, headers=participant)
    assert answer.status_code == 403
    scoped = api.user("gpu-runner", "runner", device_kinds=["H100"])
    answer = api.http.post(
        "/api/runner/hello", json={"name": "x", "devices": [{"device": "cpu", "kind": "cpu"}]}, headers=scoped
    )
    assert answer.status_code == 403 and "H100" in answer.json()["error"]


def test_an_admin_token_cannot_act_as_a_runner_nor_receive_seeds(api) -> None:
    """Claiming hands out a ranked job's secret seed: runner tokens only, not an admin's, even
    for a runner the admin's account holds (one registered before this rule, say)."""
    api.runner()  # cpu is a kind a runner serves, so alice may submit for it
    admin = api.user("root", "admin")
    hello = {"name": "admin-box", "devices": [{"device": "cpu", "kind": "cpu"}]}
    answer = api.http.post("/api/runner/hello", json=hello, headers=admin)
    assert answer.status_code == 403 and "runner token" in answer.json()["error"]
    with api.db.write() as session:
        root = session.scalar(select(User).where(User.name == "root"))
        assert root is not None
        held = Runner(user_id=root.id, name="admin-box", device_kinds=["cpu"], devices=hello["devices"])
        session.add(held)
        session.flush()
        runner_id = held.id
    sid = api.http.post("/api/submissions", json=submission_body(mode="ranked"), headers=api.user("alice")).json()["id"]
    claim = {"runner_id": runner_id, "device_kinds": ["cpu"]}
    answer = api.http.post("/api/runner/claim", json=claim, headers=admin)
    assert answer.status_code == 403 and "seed" not in answer.text
    beat = api.http.post("/api/runner/heartbeat", json={"runner_id": runner_id}, headers=admin)
    assert beat.status_code == 403
    with api.db.read() as session:
        job = session.scalar(select(Job).where(Job.submission_id == sid))
        assert job is not None and job.state == "queued" and job.runner_id is None
    result = {"lease_token": "f" * 32, "evaluation": _evaluation(score=1.0)}
    assert api.http.post(f"/api/runner/jobs/{job.id}/result", json=result, headers=admin).status_code == 403


def test_claim_result_exactly_once_and_leaderboard(api) -> None:
    runner_headers, runner_id = api.runner()
    alice, bob = api.user("alice"), api.user("bob")
    ids = [
        api.http.post("/api/submissions", json=submission_body(mode=mode), headers=who).json()["id"]
        for who, mode in ((alice, "ranked"), (alice, "ranked"), (bob, "ranked"), (bob, "benchmark"))
    ]
    claimed = []
    while (
        answer := api.http.post(
            "/api/runner/claim", json={"runner_id": runner_id, "device_kinds": ["cpu"]}, headers=runner_headers
        )
    ).status_code == 200:
        claimed.append(answer.json())
    # each once; fair between users (alice, bob, alice, bob), oldest first within a turn
    assert [c["submission_id"] for c in claimed] == [ids[0], ids[2], ids[1], ids[3]]
    with api.db.read() as session:
        stored = {job.submission_id: job.seed for job in session.scalars(select(Job))}
    seeds = [c["seed"] for c in claimed]
    # every ranked job has a seed of its own, drawn by the server and kept with the job; the
    # benchmark run has none (the public seed)
    assert seeds[3] is None and all(isinstance(s, int) for s in seeds[:3]) and len(set(seeds[:3])) == 3
    assert seeds == [stored[c["submission_id"]] for c in claimed]
    for field in ("seed", "secret_seed"):  # nobody else is shown it
        assert field not in api.http.get(f"/api/submissions/{ids[0]}", headers=alice).text
    assert api.http.get(f"/api/submissions/{ids[0]}").json()["status"] == "RUNNING"

    scores = dict(zip(ids, [1.2, 2.5, 1.7, 9.0]))
    for job in claimed:
        body = {"lease_token": job["lease_token"], "evaluation": _evaluation(score=scores[job["submission_id"]])}
        first = api.http.post(f"/api/runner/jobs/{job['job_id']}/result", json=body, headers=runner_headers)
        assert first.json() == {"accepted": True, "duplicate": False}
        again = api.http.post(f"/api/runner/jobs/{job['job_id']}/result", json=body, headers=runner_headers)
        assert again.json() == {"accepted": True, "duplicate": True}
    forged = {"lease_token": "f" * 32, "evaluation": _evaluation(score=99.0)}
    answer = api.http.post(f"/api/runner/jobs/{claimed[0]['job_id']}/result", json=forged, headers=runner_headers)
    assert answer.status_code == 409
    other_runner_headers, _ = api.runner("r2")
    answer = api.http.post(
        f"/api/runner/jobs/{claimed[0]['job_id']}/result",
        json={"lease_token": claimed[0]["lease_token"], "evaluation": _evaluation(score=50.0)},
        headers=other_runner_headers,
    )
    assert answer.status_code == 403
    with api.db.read() as session:
        assert session.scalar(select(func.count()).select_from(Result)) == 4

    board = api.http.get("/api/leaderboard", params={"problem": "axpy_dest", "device_kind": "cpu"}).json()
    assert [(r["rank"], r["user"], r["score"]) for r in board["rows"]] == [(1, "alice", 2.5), (2, "bob", 1.7)]
    detail = api.http.get(f"/api/submissions/{ids[1]}").json()
    assert detail["status"] == "PASSED" and detail["done"] and detail["evaluation"]["score"] == 2.5


def test_a_failing_result_does_not_enter_the_leaderboard(api) -> None:
    runner_headers, runner_id = api.runner()
    api.http.post("/api/submissions", json=submission_body(), headers=api.user("alice"))
    job = api.http.post(
        "/api/runner/claim", json={"runner_id": runner_id, "device_kinds": ["cpu"]}, headers=runner_headers
    ).json()
    api.http.post(
        f"/api/runner/jobs/{job['job_id']}/result",
        headers=runner_headers,
        json={"lease_token": job["lease_token"], "evaluation": _evaluation("WRONG_VALUES", None)},
    )
    with api.db.read() as session:
        assert session.scalar(select(func.count()).select_from(LeaderboardEntry)) == 0


def test_expired_lease_requeues_then_gives_up(api) -> None:
    runner_headers, runner_id = api.runner()
    api.settings.lease_s = 0.2
    api.settings.max_attempts = 2
    sid = api.http.post("/api/submissions", json=submission_body(), headers=api.user("alice")).json()["id"]
    claim = {"runner_id": runner_id, "device_kinds": ["cpu"], "wait_s": 3}
    first = api.http.post("/api/runner/claim", json=claim, headers=runner_headers).json()
    beat = api.http.post(
        "/api/runner/heartbeat",
        headers=runner_headers,
        json={"runner_id": runner_id, "leases": {str(first["job_id"]): first["lease_token"]}},
    )
    assert beat.json() == {"lost": [], "preempted": []}
    second = api.http.post("/api/runner/claim", json=claim, headers=runner_headers).json()  # after expiry
    assert second["job_id"] == first["job_id"] and second["lease_token"] != first["lease_token"]
    late = api.http.post(
        f"/api/runner/jobs/{first['job_id']}/result",
        headers=runner_headers,
        json={"lease_token": first["lease_token"], "evaluation": _evaluation()},
    )
    assert late.status_code == 409
    beat = api.http.post(
        "/api/runner/heartbeat",
        headers=runner_headers,
        json={"runner_id": runner_id, "leases": {str(first["job_id"]): first["lease_token"]}},
    )
    assert beat.json() == {"lost": [first["job_id"]], "preempted": []}
    third = api.http.post("/api/runner/claim", json={**claim, "wait_s": 1}, headers=runner_headers)
    assert third.status_code == 204  # out of attempts: failed, not re-queued
    detail = api.http.get(f"/api/submissions/{sid}").json()
    assert detail["status"] == "ERROR" and "gave up after 2 attempts" in detail["reason"]


def test_release_on_shutdown_does_not_count_as_an_attempt(api) -> None:
    runner_headers, runner_id = api.runner()
    sid = api.http.post("/api/submissions", json=submission_body(), headers=api.user("alice")).json()["id"]
    claim = {"runner_id": runner_id, "device_kinds": ["cpu"]}
    for _ in range(5):
        job = api.http.post("/api/runner/claim", json=claim, headers=runner_headers).json()
        answer = api.http.post(
            f"/api/runner/jobs/{job['job_id']}/release",
            headers=runner_headers,
            json={"lease_token": job["lease_token"]},
        )
        assert answer.status_code == 200
    assert api.http.get(f"/api/submissions/{sid}").json()["status"] == "QUEUED"
    job = api.http.post("/api/runner/claim", json=claim, headers=runner_headers).json()
    api.http.post(
        f"/api/runner/jobs/{job['job_id']}/release",
        headers=runner_headers,
        json={"lease_token": job["lease_token"], "error": "harness crashed"},
    )
    with api.db.read() as session:
        job_row = session.scalar(select(Job))
        assert (job_row.attempts, job_row.state, job_row.last_error) == (1, "queued", "harness crashed")


def test_events_stream_ends_with_done(api) -> None:
    runner_headers, runner_id = api.runner()
    sid = api.http.post("/api/submissions", json=submission_body(), headers=api.user("alice")).json()["id"]
    job = api.http.post(
        "/api/runner/claim", json={"runner_id": runner_id, "device_kinds": ["cpu"]}, headers=runner_headers
    ).json()
    api.http.post(
        f"/api/runner/jobs/{job['job_id']}/result",
        headers=runner_headers,
        json={"lease_token": job["lease_token"], "evaluation": _evaluation()},
    )
    from gpuarena.client import parse_events

    with api.http.stream("GET", f"/api/submissions/{sid}/events") as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        events = list(parse_events(response.iter_lines()))
    assert [e for e, _ in events] == ["status", "done"]
    assert events[0][1]["status"] == "PASSED"
    assert api.http.get("/api/submissions/999/events").status_code == 404


def test_code_is_shown_to_its_author_and_admins_only(api) -> None:
    """An organiser account sees code only through a contest it organises
    (test_contests_api.py): the role is not global."""
    api.runner()
    alice, bob, organiser = api.user("alice"), api.user("bob"), api.user("org", "organiser")
    admin = api.user("root", "admin")
    sid = api.http.post("/api/submissions", json=submission_body(), headers=alice).json()["id"]
    assert "sol.py" in api.http.get(f"/api/submissions/{sid}/code", headers=alice).json()
    assert api.http.get(f"/api/submissions/{sid}/code", headers=admin).status_code == 200
    assert api.http.get(f"/api/submissions/{sid}/code", headers=organiser).status_code == 403
    assert api.http.get(f"/api/submissions/{sid}/code", headers=bob).status_code == 403
    with api.db.write() as session:
        session.execute(update(Problem).values(solutions_public=True))
    assert api.http.get(f"/api/submissions/{sid}/code", headers=bob).status_code == 200


def test_values_the_database_refuses_get_a_4xx_and_write_nothing(api) -> None:
    """Ids beyond 64 bits, NUL characters (PostgreSQL refuses them in text), lone surrogates
    and durations beyond any calendar: a 4xx that says what is wrong, never a 500."""
    runner_headers, runner_id = api.runner()
    headers = api.user("alice")
    before = _counts(api)
    huge = 2**70
    for method, path, kwargs in [
        ("GET", f"/api/submissions/{huge}", {}),
        ("GET", f"/api/submissions/{huge}/events", {}),
        ("DELETE", f"/api/tokens/{huge}", {}),
        ("GET", "/api/leaderboard?problem=axpy%00&device_kind=cpu", {}),
        ("GET", "/api/problems/axpy%00", {}),
        ("POST", "/api/submissions", {"json": submission_body(problem="axpy\x00")}),
        (
            "POST",
            "/api/submissions",
            {
                "content": json.dumps(submission_body(source="x = '\ud800'\n")),  # escaped
                "headers": {**headers, "Content-Type": "application/json"},
            },
        ),
        ("POST", "/api/tokens", {"json": {"expires_in_days": 1e12}}),
        (
            "POST",
            "/api/runner/claim",
            {"json": {"runner_id": huge, "device_kinds": ["cpu"]}, "headers": runner_headers},
        ),
        (
            "POST",
            "/api/runner/heartbeat",
            {"json": {"runner_id": runner_id, "leases": {str(huge): "x"}}, "headers": runner_headers},
        ),
    ]:
        kwargs.setdefault("headers", headers)
        answer = api.http.request(method, path, **kwargs)
        assert 400 <= answer.status_code < 500, (path, answer.status_code, answer.text[:300])
        assert answer.json()["error"], path
    assert _counts(api) == before


def test_api_errors_are_json_with_an_error_message(api) -> None:
    headers = api.user("alice")
    answer = api.http.get("/api/no-such-thing")
    assert answer.status_code == 404 and "no such API endpoint" in answer.json()["error"]
    answer = api.http.post(
        "/api/submissions/upload",
        content=b"garbage",
        headers={**headers, "Content-Type": "multipart/form-data; boundary=zz"},
    )
    assert answer.status_code == 400 and answer.json()["error"]
    answer = api.http.post(
        "/api/submissions",
        content=b"[" * 100_000 + b"]" * 100_000,
        headers={**headers, "Content-Type": "application/json"},
    )
    assert 400 <= answer.status_code < 500 and answer.json()["error"]


def test_the_answer_to_a_submission_is_what_was_stored(api) -> None:
    api.runner()
    made = api.http.post("/api/submissions", json=submission_body(mode="test"), headers=api.user("alice"))
    assert made.status_code == 201, made.text
    stored = api.http.get(f"/api/submissions/{made.json()['id']}").json()
    assert {key: stored[key] for key in made.json()} == made.json()
    assert made.json()["user"] == "alice" and made.json()["problem"] == "axpy_dest" and not made.json()["done"]


LOG = (
    '  File "/tmp/gpuarena-run-x1y2z3w4/work/solution/sol.py", line 3, in solve\n'
    '    KEY = "sk-secret-in-the-code"\n'
    '  File "/opt/conda/lib/python3.11/site-packages/torch/_tensor.py", line 41\n'
    "ValueError: boom on judge-7\n"
)


def _finished(api, sid: int, record: dict, runner=None) -> None:
    """Claim the job and post `record` for it, as a runner does."""
    runner_headers, runner_id = runner or api.runner()
    job = api.http.post(
        "/api/runner/claim", json={"runner_id": runner_id, "device_kinds": ["cpu"]}, headers=runner_headers
    ).json()
    assert job["submission_id"] == sid
    posted = api.http.post(
        f"/api/runner/jobs/{job['job_id']}/result",
        json={"lease_token": job["lease_token"], "evaluation": record},
        headers=runner_headers,
    )
    assert posted.status_code == 200, posted.text


def test_a_submission_s_log_is_its_author_s_and_admins_only(api) -> None:
    """What a solution printed, and tracebacks quoting its hidden code, are private; the public
    sees status, the reason's exception type and timings (API, events and page), until the
    solutions are made public. An organiser of no contest it was entered in is the public."""
    from gpuarena.client import parse_events

    runner = api.runner()
    alice, bob, boss, olga = (
        api.user("alice"),
        api.user("bob"),
        api.user("boss", "admin"),
        api.user("olga", "organiser"),
    )
    sid = api.http.post("/api/submissions", json=submission_body(mode="benchmark"), headers=alice).json()["id"]
    record = _evaluation(status="RUNTIME_ERROR", score=None)
    record.update(
        reason="ValueError: boom",
        log=LOG,
        environment={
            "device": "cpu",
            "device_name": "cpu",
            "hostname": "judge-7",
            "torch_version": "x",
            "python_version": "3.11",
            "cpu_model": "x",
        },
    )
    _finished(api, sid, record, runner)

    for who in (None, bob, olga):
        shown = api.http.get(f"/api/submissions/{sid}", headers=who or {}).json()
        assert shown["log_hidden"] is True and shown["evaluation"]["log"] == ""
        assert "sk-secret" not in json.dumps(shown) and "judge-7" not in json.dumps(shown)
        assert shown["evaluation"]["status"] == "RUNTIME_ERROR" and "boom" not in json.dumps(shown)
        assert shown["evaluation"]["reason"].startswith("ValueError (its message is the author's")
        with api.http.stream("GET", f"/api/submissions/{sid}/events", headers=who or {}) as response:
            events = list(parse_events(response.iter_lines()))
        assert events[0][1]["status"] == "RUNTIME_ERROR" and "sk-secret" not in json.dumps(events)
    page = api.http.get(f"/submissions/{sid}")
    assert page.status_code == 200 and "sk-secret" not in page.text and "judge-7" not in page.text
    assert "The log is the author" in page.text

    for who in (alice, boss):
        shown = api.http.get(f"/api/submissions/{sid}", headers=who).json()
        assert shown["evaluation"]["reason"] == "ValueError: boom"
        assert shown["log_hidden"] is False and "sk-secret-in-the-code" in shown["evaluation"]["log"]
        assert shown["evaluation"]["environment"]["hostname"] == "judge-7"  # who judged it: theirs to know
        # ... but the log names no host, and no folder of the machine that judged it
        assert 'File "<run>/work/solution/sol.py", line 3' in shown["evaluation"]["log"]
        assert '"<site-packages>/torch/_tensor.py"' in shown["evaluation"]["log"]
        assert "boom on <host>" in shown["evaluation"]["log"] and "judge-7" not in shown["evaluation"]["log"]

    with api.db.read() as session:  # redacted before it was stored, not only when shown
        stored = session.scalar(select(Result.evaluation).where(Result.submission_id == sid))
    assert "/opt/conda" not in stored["log"] and "gpuarena-run-x1y2z3w4" not in stored["log"]
    assert "judge-7" not in stored["log"]

    with api.db.write() as session:  # once the problem's solutions are public, so are the logs
        session.execute(update(Problem).values(solutions_public=True))
    shown = api.http.get(f"/api/submissions/{sid}").json()
    assert shown["log_hidden"] is False and "sk-secret-in-the-code" in shown["evaluation"]["log"]


def test_a_runner_s_error_becomes_a_reason_without_its_paths(api) -> None:
    """A job process that crashed is released with its last lines; when the job gives up they
    become the submission's public reason: without the runner's paths and name."""
    runner_headers, runner_id = api.runner()
    api.http.post(
        "/api/runner/hello",
        headers=runner_headers,
        json={"name": "r1", "hostname": "gpu-box-3", "devices": [{"device": "cpu", "kind": "cpu"}]},
    )
    sid = api.http.post("/api/submissions", json=submission_body(), headers=api.user("alice")).json()["id"]
    with api.db.write() as session:
        session.execute(update(Job).values(max_attempts=1))
    job = api.http.post(
        "/api/runner/claim", json={"runner_id": runner_id, "device_kinds": ["cpu"]}, headers=runner_headers
    ).json()
    error = (
        'the harness exited with 1: File "/home/ops/venv/lib/python3.11/site-packages/gpuarena/x.py", '
        "line 9\nOSError: /srv/gpuarena-cache on gpu-box-3 is full"
    )
    released = api.http.post(
        f"/api/runner/jobs/{job['job_id']}/release",
        json={"lease_token": job["lease_token"], "error": error},
        headers=runner_headers,
    )
    assert released.status_code == 200, released.text
    shown = api.http.get(f"/api/submissions/{sid}").json()
    assert shown["status"] == "ERROR" and "gave up after 1 attempts" in shown["reason"]
    assert "/home/ops" not in shown["reason"] and "gpu-box-3" not in shown["reason"]
    assert '"<site-packages>/gpuarena/x.py"' in shown["reason"] and "on <host> is full" in shown["reason"]
    listed = api.http.get("/api/submissions").json()
    assert listed[0]["reason"] == shown["reason"]


def test_each_attempt_of_a_ranked_job_draws_a_fresh_seed(api) -> None:
    """A job re-queued (its runner lost, its device failed) is judged again on inputs and checked
    calls no earlier attempt saw: a solution that learned something from the first attempt, or
    crashed it on purpose to see the inputs again, gains nothing."""
    runner_headers, runner_id = api.runner()
    api.http.post("/api/submissions", json=submission_body(), headers=api.user("alice"))
    claim = {"runner_id": runner_id, "device_kinds": ["cpu"]}
    seeds = []
    for _ in range(2):
        job = api.http.post("/api/runner/claim", json=claim, headers=runner_headers).json()
        seeds.append(job["seed"])
        api.http.post(
            f"/api/runner/jobs/{job['job_id']}/release",
            headers=runner_headers,
            json={"lease_token": job["lease_token"], "error": "device cpu failed its health check"},
        )
    job = api.http.post("/api/runner/claim", json=claim, headers=runner_headers).json()
    seeds.append(job["seed"])
    assert all(isinstance(seed, int) for seed in seeds) and len(set(seeds)) == 3


def test_a_solution_whose_harness_died_on_a_healthy_device_is_not_run_again(api) -> None:
    """The harness died without a record while the device stayed healthy: the solution may be
    what killed it, so it ends as ERROR with the reason at once, not re-run up to three times."""
    runner_headers, runner_id = api.runner()
    sid = api.http.post("/api/submissions", json=submission_body(), headers=api.user("alice")).json()["id"]
    claim = {"runner_id": runner_id, "device_kinds": ["cpu"]}
    job = api.http.post("/api/runner/claim", json=claim, headers=runner_headers).json()
    released = api.http.post(
        f"/api/runner/jobs/{job['job_id']}/release",
        headers=runner_headers,
        json={"lease_token": job["lease_token"], "error": "the harness exited with -7", "harness_failed": True},
    )
    assert released.status_code == 200
    assert api.http.post("/api/runner/claim", json={**claim, "wait_s": 1}, headers=runner_headers).status_code == 204
    shown = api.http.get(f"/api/submissions/{sid}").json()
    assert shown["status"] == "ERROR" and "the harness exited with -7" in shown["reason"]


def test_a_ranked_job_queued_without_a_seed_gets_one_at_its_claim(api) -> None:
    """Jobs queued before migration 0004 have no seed: the claim draws one and keeps it with
    the job (the seed a verdict came from stays on record), instead of a seed shared by all."""
    runner_headers, runner_id = api.runner()
    alice = api.user("alice")
    ids = [api.http.post("/api/submissions", json=submission_body(), headers=alice).json()["id"] for _ in range(2)]
    with api.db.write() as session:
        session.execute(update(Job).values(seed=None))
    claimed = [
        api.http.post(
            "/api/runner/claim", json={"runner_id": runner_id, "device_kinds": ["cpu"]}, headers=runner_headers
        ).json()
        for _ in ids
    ]
    with api.db.read() as session:
        stored = {job.submission_id: job.seed for job in session.scalars(select(Job))}
    assert [c["seed"] for c in claimed] == [stored[i] for i in ids]
    assert all(isinstance(stored[i], int) for i in ids) and stored[ids[0]] != stored[ids[1]]


def test_a_runner_s_hostname_is_shown_to_admins_and_its_own_account_only(api) -> None:
    """Which machines judge a contest is an address to aim at: other users see runners
    (name, kinds, jobs) but not their hostnames."""
    runner_headers = api.user("gpu-box-account", "runner")
    runner_id = api.http.post(
        "/api/runner/hello",
        json={"name": "box", "hostname": "gpu-box-7.internal", "devices": [{"device": "cpu", "kind": "cpu"}]},
        headers=runner_headers,
    ).json()["runner_id"]
    hostname = api.http.get("/api/runners", headers=runner_headers).json()[0]["hostname"]
    assert hostname == "gpu-box-7.internal"  # the runner's own account sees it
    admin = api.user("root-admin", "admin")
    assert api.http.get("/api/runners", headers=admin).json()[0]["hostname"] == hostname
    seen = api.http.get("/api/runners", headers=api.user("alice")).json()
    assert [r["id"] for r in seen] == [runner_id] and seen[0]["hostname"] == ""


def test_one_runner_finishing_one_job_at_a_time_alternates_between_users(api) -> None:
    """Fair order with one runner (a laptop's `serve`): alice queues three, bob one after
    them; as each job finishes, the next claim goes to the user served longest ago, so bob
    runs second, not last (found on a fresh clone: his job waited behind all of alice's)."""
    runner_headers, runner_id = api.runner()
    alice, bob = api.user("alice"), api.user("bob")
    ids = [
        api.http.post("/api/submissions", json=submission_body(mode="test"), headers=who).json()["id"]
        for who in (alice, alice, alice, bob)
    ]
    assert api.http.get(f"/api/submissions/{ids[3]}").json()["queue_position"] == 2  # alice's first, then bob's
    order = []
    while (
        answer := api.http.post(
            "/api/runner/claim", json={"runner_id": runner_id, "device_kinds": ["cpu"]}, headers=runner_headers
        )
    ).status_code == 200:
        job = answer.json()
        order.append(job["submission_id"])
        if len(order) == 1:  # bob's is next while alice's first runs
            assert api.http.get(f"/api/submissions/{ids[3]}").json()["queue_position"] == 1
        body = {"lease_token": job["lease_token"], "evaluation": _evaluation()}
        assert (
            api.http.post(f"/api/runner/jobs/{job['job_id']}/result", json=body, headers=runner_headers).status_code
            == 200
        )
    assert order == [ids[0], ids[3], ids[1], ids[2]]
