"""The runner protocol's version and the job kind on the wire (issue 50), on a real database: a
runner that sends no version (today's runners, as they send it) gets exactly today's claim; a
runner of PROTOCOL_VERSION gets a typed job whose kind the service told (kernel, app, sample)
and runs it by that kind's entry (a real runner and its job processes, against a real server);
a runner newer than the server is refused with a message that says to upgrade the server."""

from __future__ import annotations

import threading
import time

import pytest
from tests.migration.helpers import tensor_app
from tests.service.conftest import FIXTURE_PROBLEMS, Api, submission_body
from tests.service.test_samples import honest, sample_body

from gpuarena.client import Client
from gpuarena.contracts.device import DeviceKind
from gpuarena.contracts.wire import PROTOCOL_VERSION, DeviceSlot
from gpuarena.migration.golden import make_writable, record
from gpuarena.migration.target import port_solution
from gpuarena.runner.agent import Runner, RunnerConfig
from gpuarena.runner_wire import TYPED_JOB, AppJob, ClaimedJob, KernelJob, SampleJob
from gpuarena.service.config import Settings

STACK_KIND = "cpu@numpy-port"
TODAYS_CLAIM = {
    "job_id",
    "lease_token",
    "lease_s",
    "submission_id",
    "device_kind",
    "mode",
    "seed",
    "problem",
    "solution",
}
"""The claimed job's fields as runners before issue 50 parse them (extra="forbid"), frozen here:
a field more on a legacy runner's claim would make it refuse every job."""


@pytest.fixture(scope="module")
def golden_root(tmp_path_factory):
    root = tmp_path_factory.mktemp("targets")
    record(tensor_app(root.parent / "reference-app", figure="100.0"), root / "migration" / "t", "cpu")
    yield root
    make_writable(root)


@pytest.fixture
def settings(database_url, tmp_path, golden_root) -> Settings:
    """The service fixtures' settings, with a migration target too (so all three kinds exist)."""
    return Settings(
        home=tmp_path / "home",
        database_url=database_url,
        problem_roots=[FIXTURE_PROBLEMS, golden_root],
        bundled_problems=False,
        submit_limit_per_minute=1000,
        max_in_flight=1000,
        lease_s=60,
    )


def hello(api: Api, headers: dict, name: str, kind: str, **protocol: int):
    """A runner's hello as raw JSON, as today's runner sends it (DeviceSlot.model_dump), plus protocol."""
    device = {
        "device": "cpu",
        "kind": kind,
        "name": "",
        "healthy": True,
        "reason": "",
        "vendor": "",
        "stack": DeviceKind.parse(kind).stack,
        "software": {},
    }
    body = {"name": name, "hostname": "host", "version": "0.1.0", "devices": [device], **protocol}
    return api.http.post("/api/runner/hello", json=body, headers=headers)


def claim(api: Api, headers: dict, runner_id: int, kind: str, **protocol: int):
    body = {"runner_id": runner_id, "device_kinds": [kind], "wait_s": 0.0, "device": "cpu", **protocol}
    return api.http.post("/api/runner/claim", json=body, headers=headers)


def submit_one_of_each(api: Api, tmp_path, alice: dict) -> dict[str, int]:
    """A kernel, a sample and a port queued by alice (their device kinds must be known: hello first)."""
    bodies = {
        "kernel": submission_body(),
        "sample": sample_body(honest(tmp_path, "honest", "alice")),
        "app": {
            "problem": "migration/t",
            "device_kind": STACK_KIND,
            "mode": "ranked",
            "solution": port_solution(tensor_app(tmp_path / "port", figure="100.0")).model_dump(mode="json"),
        },
    }
    ids = {}
    for kind, body in bodies.items():
        made = api.http.post("/api/submissions", json=body, headers=alice)
        assert made.status_code == 201, made.text
        ids[kind] = made.json()["id"]
    return ids


def runners(api: Api, **protocol: int) -> dict[str, tuple[dict, int]]:
    """A runner for the CPU and one for the port's stack, by the kind each claims."""
    found = {}
    for kind, name in (("cpu", "plain"), (STACK_KIND, "box")):
        headers = api.user(name + "-account", "runner")
        said = hello(api, headers, name, kind, **protocol)
        assert said.status_code == 200, said.text
        found[kind] = (headers, said.json()["runner_id"])
    return found


def claim_all(api: Api, tmp_path, **protocol: int) -> dict[int, dict]:
    """Every job claimed once, as the JSON the runner got, by submission id."""
    held = runners(api, **protocol)
    ids = submit_one_of_each(api, tmp_path, api.user("alice"))
    claimed = {}
    for kind, count in (("cpu", 2), (STACK_KIND, 1)):
        headers, runner_id = held[kind]
        for _ in range(count):
            got = claim(api, headers, runner_id, kind, **protocol)
            assert got.status_code == 200, got.text
            claimed[got.json()["submission_id"]] = got.json()
    assert set(claimed) == set(ids.values())
    return {sid: claimed[sid] for sid in ids.values()}


def test_a_legacy_runner_gets_todays_claim_for_every_kind(api, tmp_path) -> None:
    for job in claim_all(api, tmp_path).values():  # no protocol sent, as today's runners do
        assert set(job) == TODAYS_CLAIM, sorted(job)
        assert ClaimedJob.model_validate(job).job_id == job["job_id"]


def test_a_new_runner_gets_each_job_typed_by_its_kind(api, tmp_path) -> None:
    jobs = list(claim_all(api, tmp_path, protocol=PROTOCOL_VERSION).values())
    assert [job["kind"] for job in jobs] == ["kernel", "sample", "app"]
    typed = [TYPED_JOB.validate_python(job) for job in jobs]
    assert [type(job) for job in typed] == [KernelJob, SampleJob, AppJob]
    assert typed[0].problem.id == "axpy_dest" and typed[2].problem.id == "migration/t"
    assert "golden.json" in typed[2].problem.files
    assert typed[1].solution.manifest.language == "sample"
    with pytest.raises(ValueError, match="kind"):  # a legacy runner's model would refuse it
        ClaimedJob.model_validate(jobs[0])


def test_a_runner_newer_than_the_server_is_refused(api, tmp_path) -> None:
    newer = PROTOCOL_VERSION + 1
    headers = api.user("future-account", "runner")
    refused = hello(api, headers, "future", "cpu", protocol=newer)
    assert refused.status_code == 400, refused.text
    message = refused.json()["error"]
    assert f"runner protocol {newer}" in message and f"only up to {PROTOCOL_VERSION}" in message
    assert "upgrade the server first" in message
    assert [r["name"] for r in api.http.get("/api/runners", headers=api.user("olga", "admin")).json()] == []

    runner_id = hello(api, headers, "future", "cpu", protocol=PROTOCOL_VERSION).json()["runner_id"]
    made = api.http.post("/api/submissions", json=submission_body(), headers=api.user("alice"))
    refused = claim(api, headers, runner_id, "cpu", protocol=newer)
    assert refused.status_code == 400 and refused.json()["error"] == message, refused.text
    shown = api.http.get(f"/api/submissions/{made.json()['id']}").json()
    assert shown["status"] == "QUEUED", shown  # the refused claim leased nothing
    assert claim(api, headers, runner_id, "cpu", protocol=PROTOCOL_VERSION).json()["kind"] == "kernel"


# one database: the typed claims are the tests above, on both; what runs here is the runner's
@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_a_new_runner_runs_each_kind_by_its_entry(api, live, tmp_path) -> None:
    """A real runner (gpuarena.runner.agent) against a real server: each job runs in a real job
    process by the entry of the kind the claim carried, and its result is what that entry makes."""
    token = api.user("box-account", "runner")["Authorization"].split()[1]
    slots = [
        DeviceSlot(device="cpu:0", kind="cpu"),
        DeviceSlot(device="cpu:1", kind=STACK_KIND, stack="numpy-port"),
    ]
    config = RunnerConfig(
        name="box", slots=slots, work_dir=tmp_path / "runner", health_interval_s=0, prewarm=False, budget_s=0.1
    )
    runner = Runner(Client(live, token), config)
    thread = threading.Thread(target=runner.run, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 60
        while {k["name"] for k in api.http.get("/api/device-kinds").json()} < {"cpu", STACK_KIND}:
            assert time.monotonic() < deadline and thread.is_alive(), "the runner did not say hello"
            time.sleep(0.2)
        alice = api.user("alice")
        ids = submit_one_of_each(api, tmp_path, alice)
        deadline = time.monotonic() + 400
        shown: dict[str, dict] = {}
        while len(shown) < len(ids):
            assert time.monotonic() < deadline and thread.is_alive(), f"not all done: {shown}"
            for kind, sid in ids.items():
                answer = api.http.get(f"/api/submissions/{sid}", headers=alice)
                if answer.json()["done"]:
                    shown[kind] = answer.json()
            time.sleep(0.5)
    finally:
        runner.stop()
        thread.join(timeout=60)
    reasons = "\n".join(f"{k}: {s['status']}: {s['reason']}" for k, s in shown.items())  # whole, not cut
    assert all(s["status"] == "PASSED" for s in shown.values()), reasons
    # run_kernel judged the kernel on the problem's workloads; run_app checked the port
    # against its golden run; run_sample wrote the sample's report beside its record
    assert shown["kernel"]["evaluation"]["workloads"] and shown["kernel"]["evaluation"]["migration"] is None
    assert shown["app"]["evaluation"]["migration"]["outputs"][0]["matched"] is True
    assert api.http.get(f"/api/samples/{ids['sample']}").json()["status"] == "ok"
