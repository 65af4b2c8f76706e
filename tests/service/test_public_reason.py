"""A verdict's reason as the public reads it: the exception's type, never the solution's words
(a COMPILE_ERROR quoted the source line, a RUNTIME_ERROR carried the exception's message, to
anonymous visitors while the code itself was hidden)."""

from __future__ import annotations

from tests.service.conftest import submission_body

from gpuarena.service.public_reason import public_reason


def test_the_solution_s_words_give_way_to_the_exception_s_type() -> None:
    syntax = '  File "sol.py", line 3\n    KEY = "hunter2" +\n                     ^\nSyntaxError: invalid syntax'
    assert public_reason("COMPILE_ERROR", syntax).startswith("SyntaxError (its message is the author's")
    shown = public_reason("RUNTIME_ERROR", "workload n4096: ValueError: secret_scale=0.731 is wrong")
    assert shown.startswith("workload n4096: ValueError (") and "0.731" not in shown
    nvcc = 'kernel.cu(12): error: identifier "magic_tile" is undefined'
    assert "magic_tile" not in public_reason("COMPILE_ERROR", nvcc)
    harness = "the worker was killed by SIGSEGV while calling solve() on n4096, trial 1"
    assert public_reason("RUNTIME_ERROR", harness) == harness  # the harness's own words quote no code
    wrong = "workload n4096: trial 1: output y: 3 of 4096 elements outside atol=1e-05"
    assert public_reason("WRONG_VALUES", wrong) == wrong


def test_the_author_reads_the_whole_reason_and_everyone_else_its_type(api) -> None:
    runner_headers, runner_id = api.runner()
    alice, bob = api.user("alice"), api.user("bob")
    sid = api.http.post("/api/submissions", json=submission_body(), headers=alice).json()["id"]
    job = api.http.post(
        "/api/runner/claim", json={"runner_id": runner_id, "device_kinds": ["cpu"]}, headers=runner_headers
    ).json()
    reason = "workload n4096: AssertionError: assert secret_table[7] == 0.25"
    evaluation = {
        "status": "RUNTIME_ERROR",
        "reason": reason,
        "problem": "axpy_dest",
        "solution_hash": "0" * 64,
        "device": "cpu",
        "mode": "ranked",
    }
    posted = api.http.post(
        f"/api/runner/jobs/{job['job_id']}/result",
        headers=runner_headers,
        json={"lease_token": job["lease_token"], "evaluation": evaluation},
    )
    assert posted.status_code == 200, posted.text
    mine = api.http.get(f"/api/submissions/{sid}", headers=alice).json()
    assert mine["reason"] == reason and mine["evaluation"]["reason"] == reason
    for who in (bob, {}):
        theirs = api.http.get(f"/api/submissions/{sid}", headers=who).json()
        assert "secret_table" not in str(theirs) and theirs["reason"].startswith("workload n4096: AssertionError (")
        listed = api.http.get("/api/submissions", headers=who).json()
        assert "secret_table" not in str(listed)
