"""Migration checks through the service, on a real database: a golden folder under a problem
root is a migration target; a port is submitted to it for a device kind that names a stack;
only a runner slot of that stack may claim it; the runner's check becomes the verdict, the
score and, in a ccf-migration contest, the judge's score and completeness the standings read.
Kernels and ports never cross."""

from __future__ import annotations

import datetime as dt

import pytest
from tests.migration.helpers import tensor_app
from tests.service.conftest import FIXTURE_PROBLEMS, Api, submission_body

from gpuarena.contracts.device import DeviceKind
from gpuarena.contracts.packed import PackedProblem
from gpuarena.migration.golden import make_writable, record
from gpuarena.migration.job import evaluate_app
from gpuarena.migration.target import port_solution
from gpuarena.service.catalog import sync_problems
from gpuarena.service.config import Settings
from gpuarena.service.db import Database
from gpuarena.service.migrate import upgrade
from gpuarena.solutions.model import Solution

NOW = dt.datetime.now(dt.UTC).replace(microsecond=0)
STACK_KIND = "cpu@numpy-port"


@pytest.fixture(scope="module")
def golden_root(tmp_path_factory):
    root = tmp_path_factory.mktemp("targets")
    record(tensor_app(root.parent / "reference-app", figure="100.0"), root / "migration" / "t", "cpu")
    yield root
    make_writable(root)


@pytest.fixture
def api(database_url, tmp_path, golden_root):
    settings = Settings(
        home=tmp_path / "home",
        database_url=database_url,
        problem_roots=[FIXTURE_PROBLEMS, golden_root],
        bundled_problems=False,
        submit_limit_per_minute=1000,
        max_in_flight=1000,
        lease_s=60,
    )
    upgrade(settings.database_url)
    database = Database(settings.database_url)
    sync_problems(database, settings.all_problem_roots())
    yield Api(settings, database)
    database.dispose()


def port_body(folder, problem: str = "migration/t", device_kind: str = STACK_KIND, **extra) -> dict:
    solution = port_solution(folder)
    return {
        "problem": problem,
        "device_kind": device_kind,
        "mode": "ranked",
        "solution": solution.model_dump(mode="json"),
        **extra,
    }


def hello(api: Api, name: str, kind: str) -> tuple[dict, int]:
    headers = api.user(name + "-account", "runner")
    reply = api.http.post(
        "/api/runner/hello",
        headers=headers,
        json={
            "name": name,
            "devices": [
                {
                    "device": "cpu",
                    "kind": kind,
                    "stack": DeviceKind.parse(kind).stack,
                    "software": {"python": "3.11", "numpy": "2"},
                }
            ],
        },
    )
    assert reply.status_code == 200, reply.text
    return headers, reply.json()["runner_id"]


def claim(api: Api, headers: dict, runner_id: int, kind: str):
    return api.http.post("/api/runner/claim", json={"runner_id": runner_id, "device_kinds": [kind]}, headers=headers)


def test_a_migration_target_is_listed_as_an_app_problem(api) -> None:
    apps = api.http.get("/api/problems", params={"kind": "app"}).json()
    assert [(p["id"], p["kind"], p["workloads"]) for p in apps] == [("migration/t", "app", [])]
    kernels = api.http.get("/api/problems", params={"kind": "kernel"}).json()
    assert kernels and all(p["kind"] == "kernel" for p in kernels)
    detail = api.http.get("/api/problems/migration/t").json()
    assert detail["spec"]["outputs"][0]["file"] == "y.npy" and 'name = "t"' in detail["reference"]
    page = api.http.get("/problems/migration/t")
    assert page.status_code == 200 and "Port the app t" in page.text and "y.npy" in page.text


def test_kernels_and_ports_never_cross_and_nothing_is_kept(api, tmp_path) -> None:
    hello(api, "box", STACK_KIND)
    hello(api, "plain", "cpu")
    alice = api.user("alice")
    port = tensor_app(tmp_path / "port")
    cases = [
        (port_body(port, problem="axpy_dest", device_kind="cpu"), "is a kernel problem, not a migration target"),
        ({**submission_body(problem="migration/t", device_kind=STACK_KIND)}, "is a migration target: submit a ported"),
        (port_body(port, mode="profile"), "a migration check has none"),
        (port_body(port, device_kind="cpu@other"), "unknown device kind 'cpu@other'"),
    ]
    for body, message in cases:
        answer = api.http.post("/api/submissions", json=body, headers=alice)
        assert answer.status_code in (400, 404, 422), answer.text
        assert message in answer.json()["error"], answer.text
    assert api.http.get("/api/submissions").json() == []


def test_a_port_runs_only_on_its_stack_and_its_check_scores_the_contest(api, tmp_path) -> None:
    box_headers, box = hello(api, "box", STACK_KIND)
    plain_headers, plain = hello(api, "plain", "cpu")
    olga, alice, bob = api.user("olga", "organiser"), api.user("alice"), api.user("bob")
    made = api.http.post(
        "/api/contests",
        headers=olga,
        json={
            "slug": "port-it",
            "title": "Port it",
            "start": (NOW - dt.timedelta(hours=1)).isoformat(),
            "end": (NOW + dt.timedelta(hours=1)).isoformat(),
            "problems": ["migration/t"],
            "device_kinds": [STACK_KIND],
            "rule": {"name": "ccf-migration"},
        },
    )
    assert made.status_code == 201, made.text
    submitted = {}
    for who, name, values in ((alice, "alice", "[1.0, 2.0, 3.0]"), (bob, "bob", "[1.0, 2.0, 3.5]")):
        body = port_body(
            tensor_app(tmp_path / name, values=values, figure="100.0", extra_code=f"print('{name} port says hello')"),
            contest="port-it",
        )
        answer = api.http.post("/api/submissions", json=body, headers=who)
        assert answer.status_code == 201, answer.text
        submitted[name] = answer.json()["id"]

    assert claim(api, plain_headers, plain, "cpu").status_code == 204  # another stack's runner gets nothing
    for _ in submitted:
        job = claim(api, box_headers, box, STACK_KIND)
        assert job.status_code == 200, job.text
        job = job.json()
        record_ = evaluate_app(
            PackedProblem.model_validate(job["problem"]),
            Solution.model_validate(job["solution"]),
            "cpu",
            job["mode"],
            tmp_path / "cache",
        )
        posted = api.http.post(
            f"/api/runner/jobs/{job['job_id']}/result",
            headers=box_headers,
            json={"lease_token": job["lease_token"], "runner_id": box, "evaluation": record_.model_dump(mode="json")},
        )
        assert posted.status_code == 200, posted.text

    shown = {name: api.http.get(f"/api/submissions/{sid}", headers=olga).json() for name, sid in submitted.items()}
    assert shown["alice"]["status"] == "PASSED" and shown["alice"]["score"] >= 100
    assert shown["bob"]["status"] == "PASSED" and 60 <= shown["bob"]["score"] < 100
    assert shown["alice"]["evaluation"]["migration"]["outputs"][0]["matched"] is True
    entries = {e["submission_id"]: e for e in api.http.get("/api/contests/port-it/entries", headers=olga).json()}
    assert entries[submitted["alice"]]["judge_score"] == shown["alice"]["score"]
    assert entries[submitted["alice"]]["completeness"] == 1.0 and entries[submitted["bob"]]["completeness"] == 0.0
    standings = api.http.get("/api/contests/port-it/standings", headers=olga).json()["standings"]["rows"]
    assert [(r["contestant"], r["total"]) for r in standings] == [
        ("alice", shown["alice"]["score"]),
        ("bob", shown["bob"]["score"]),
    ]
    seen_by_bob = api.http.get(f"/api/submissions/{submitted['alice']}", headers=bob).json()["evaluation"]
    assert seen_by_bob["log"] == "" and seen_by_bob["migration"]["score"]["total"] == shown["alice"]["score"]
    assert seen_by_bob["migration"]["runs"] and all(
        r["stdout_tail"] == r["stderr_tail"] == "" for r in seen_by_bob["migration"]["runs"]
    )
    assert "alice port says hello" in shown["alice"]["evaluation"]["migration"]["runs"][0]["stdout_tail"]
    assert "alice port says hello" in shown["alice"]["evaluation"]["log"]
    page = api.http.get(f"/submissions/{submitted['bob']}", headers=olga)
    assert page.status_code == 200 and "Migration check" in page.text and "differs" in page.text
    runners = {r["name"]: r for r in api.http.get("/api/runners", headers=olga).json()}
    assert runners["box"]["devices"][0]["stack"] == "numpy-port"
    assert runners["box"]["devices"][0]["software"]["numpy"] == "2"
