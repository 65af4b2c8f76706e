"""Runner fairness end to end (issue 46, item 10): a real `gpuarena serve` with its embedded
runner (one CPU slot), one user's infinite loop that nobody cancels, another user's job behind
it. The loop is pre-empted at the runner's heartbeat (the runner kills its process), the waiting
job runs and passes, and the loop goes back to the queue, its attempt not counted."""

from __future__ import annotations

import httpx
import pytest
from tests.service.conftest import submission_body
from tests.service.processes import SOLUTIONS, _cli, _wait_for

LOOPS_FOREVER = "def solve(a, x, b, y):\n    while True:\n        pass\n"


@pytest.fixture
def env(env: dict) -> dict:
    env["GPUARENA_PREEMPT_AFTER_S"] = "3"  # a loop is stopped once another user's job waited 3 s
    return env


@pytest.mark.parametrize("served", ["sqlite"], indirect=True)  # the queue's preemption on both: test_preemption.py
def test_an_uncancelled_infinite_loop_is_preempted_for_another_users_job(served) -> None:
    server, env = served
    tokens = {name: _cli("users", "add", name, env=env).stdout.strip().splitlines()[-1] for name in ("ann", "bob")}
    ann, bob = (
        httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {tokens[name]}"}, timeout=30)
        for name in ("ann", "bob")
    )
    loop = ann.post("/api/submissions", json=submission_body(mode="test", source=LOOPS_FOREVER)).json()["id"]
    _wait_for(lambda: ann.get(f"/api/submissions/{loop}").json()["status"] == "RUNNING", 120, "the loop to start")
    good = (SOLUTIONS / "dest_good.py").read_text()
    waiting = bob.post("/api/submissions", json=submission_body(mode="test", source=good)).json()["id"]

    def done() -> bool:
        return bool(bob.get(f"/api/submissions/{waiting}").json()["done"])

    _wait_for(done, 240, "bob's job to run while ann's loop was never cancelled")
    assert bob.get(f"/api/submissions/{waiting}").json()["status"] == "PASSED"
    looped = ann.get(f"/api/submissions/{loop}").json()
    assert looped["status"] in ("QUEUED", "RUNNING") and looped["evaluation"] is None
    assert looped["attempts"] <= 1  # pre-empted: no attempt counted (1: it runs again now)
    runners = httpx.get(f"{server.url}/api/health").json()
    assert runners["queued"] + runners["running"] == 1  # the loop only, once
    cancelled = ann.post(f"/api/submissions/{loop}/cancel").json()
    assert cancelled["status"] == "CANCELLED"
