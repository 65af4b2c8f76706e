"""Real processes: two `gpuarena serve --no-runner` servers over one PostgreSQL database with
runners reaching them, `gpuarena batch` across them; and a multi-device runner (fake devices
on the CPU, given with --devices-file) that drains a device failing its health check and one
that disappears."""

from __future__ import annotations

import csv
import json
import signal
import subprocess
import sys
import time

import httpx
import pytest
from tests.service.conftest import _postgres_database, submission_body
from tests.service.processes import SOLUTIONS, Server, _cli, _wait_for

from gpuarena.client import Client

pytestmark = pytest.mark.e2e


def _runner(env: dict, name: str, server: str, token: str, *extra: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "gpuarena.cli", "runner", "--name", name, "--server", server, "--token", token, *extra],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def _stop(process: subprocess.Popen) -> int:
    process.send_signal(signal.SIGTERM)
    try:
        return process.wait(timeout=60)
    except subprocess.TimeoutExpired:
        process.kill()
        return process.wait()


def test_two_api_servers_over_one_postgres(env, tmp_path) -> None:
    databases = _postgres_database()
    env["GPUARENA_DATABASE_URL"] = next(databases)
    env["GPUARENA_SUBMIT_LIMIT"] = "5"
    a = Server(env, "--no-runner")
    b = Server(env, "--no-runner")
    runners: list[subprocess.Popen] = []
    try:
        alice = _cli("users", "add", "alice", env=env).stdout.split()[-1]
        box = _cli("users", "add", "box", "--role", "runner", env=env).stdout.split()[-1]
        # a host with two worker slots that knows both servers, and a one-slot host that knows only B
        runners.append(_runner(env, "host-1", f"{a.url},{b.url}", box, "--devices", "cpu:0,cpu:1"))
        runners.append(_runner(env, "host-2", b.url, box, "--devices", "cpu"))
        on_a = httpx.Client(base_url=a.url, headers={"Authorization": f"Bearer {alice}"})
        on_b = httpx.Client(base_url=b.url, headers={"Authorization": f"Bearer {alice}"})
        _wait_for(
            lambda: {r["name"] for r in on_a.get("/api/runners").json() if r["online"]} == {"host-1", "host-2"},
            what="both runners, seen through A",
        )

        # a batch through both servers: 2 solutions x 2 repeats, spread over every worker
        done = _cli(
            "batch",
            "--problem",
            "axpy_dest",
            "--solution",
            str(SOLUTIONS / "dest_good.py"),
            "--solution",
            str(SOLUTIONS / "dest_skips_write.py"),
            "--device",
            "cpu",
            "--repeat",
            "2",
            "--server",
            f"{a.url},{b.url}",
            "--token",
            alice,
            "--out",
            str(tmp_path / "results"),
            env=env,
        )
        assert "4 submissions" in done.stdout
        with open(tmp_path / "results.csv") as f:
            rows = list(csv.DictReader(f))
        assert len(rows) == 4 and all(r["submission_id"] for r in rows)
        verdicts = {(r["solution"].rsplit("/", 1)[-1], r["status"]) for r in rows}
        assert verdicts == {("dest_good.py", "PASSED"), ("dest_skips_write.py", "WRONG_VALUES")}
        table = json.loads((tmp_path / "results.json").read_text())
        assert table["jobs"] == 4 and table["summary"] == {"PASSED": 2, "WRONG_VALUES": 2}
        assert all(r["evaluation"]["status"] == r["status"] for r in table["rows"])
        assert len({(r["runner"], r["runner_device"]) for r in rows}) >= 2  # more than one worker took jobs

        # submitted through A; followed (server-sent events), read and ranked through B
        made = on_a.post("/api/submissions", json=submission_body(source=(SOLUTIONS / "dest_good.py").read_text()))
        assert made.status_code == 201, made.text
        sid = made.json()["id"]
        statuses = [update["status"] for update in Client(b.url).watch(sid)]
        assert statuses[-1] == "PASSED"
        detail = on_b.get(f"/api/submissions/{sid}").json()
        assert detail["evaluation"]["status"] == "PASSED" and detail["runner"] in ("host-1", "host-2")
        board_a = on_a.get("/api/leaderboard", params={"problem": "axpy_dest", "device_kind": "cpu"}).json()
        board_b = on_b.get("/api/leaderboard", params={"problem": "axpy_dest", "device_kind": "cpu"}).json()
        assert board_a == board_b and [(r["user"], r["submission_id"]) for r in board_b["rows"]] == [("alice", sid)]

        runners_b = {r["name"]: r for r in on_b.get("/api/runners").json()}
        assert sum(r["jobs_done"] for r in runners_b.values()) == 5
        assert {d["device"] for d in runners_b["host-1"]["devices"]} == {"cpu:0", "cpu:1"}
        for process in runners:
            assert _stop(process) == 0
        runners.clear()

        # the rate limit (5 a minute, fixed windows) is counted in the database: 5 submissions
        # through A use it up on B too
        carol = {"Authorization": f"Bearer {_cli('users', 'add', 'carol', env=env).stdout.split()[-1]}"}
        if time.time() % 60 > 45:  # all six requests in one window
            time.sleep(61 - time.time() % 60)
        for _ in range(5):
            assert on_a.post("/api/submissions", json=submission_body(), headers=carol).status_code == 201
        refused = on_b.post("/api/submissions", json=submission_body(), headers=carol)
        assert refused.status_code == 429 and "at most 5" in refused.json()["error"]
    finally:
        for process in runners:
            assert _stop(process) == 0
        a.stop()
        b.stop()
        databases.close()


def test_runner_drains_a_failing_and_a_vanished_device(env, tmp_path) -> None:
    server = Server(env, "--no-runner")
    try:
        alice = _cli("users", "add", "alice", env=env).stdout.split()[-1]
        box = _cli("users", "add", "box", "--role", "runner", env=env).stdout.split()[-1]
        listing = tmp_path / "devices.txt"
        # two workers on the CPU and a GPU that is not there: its tiny CUDA op must fail
        listing.write_text("cpu:0\ncpu:1\ncuda:63=FakeGPU\n")
        runner = _runner(env, "host", server.url, box, "--devices-file", str(listing), "--health-interval", "0.5")
        http = httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {alice}"})

        def devices() -> dict[str, dict]:
            found = [r for r in http.get("/api/runners").json() if r["name"] == "host"]
            return {d["device"]: d for d in found[0]["devices"]} if found else {}

        _wait_for(lambda: len(devices()) == 3, what="the runner's hello")
        seen = devices()
        assert seen["cuda:63"]["healthy"] is False and "tiny CUDA op" in seen["cuda:63"]["reason"]
        assert seen["cpu:0"]["healthy"] and seen["cpu:1"]["healthy"]
        assert [r["device_kinds"] for r in http.get("/api/runners").json()] == [["cpu"]]

        listing.write_text("cpu:0\ncuda:63=FakeGPU\n")  # cpu:1 disappears
        _wait_for(lambda: not devices()["cpu:1"]["healthy"], timeout=30, what="cpu:1 drained")
        assert "disappeared" in devices()["cpu:1"]["reason"] and devices()["cpu:0"]["healthy"]

        sids = [http.post("/api/submissions", json=submission_body(mode="test")).json()["id"] for _ in range(2)]
        _wait_for(lambda: all(http.get(f"/api/submissions/{s}").json()["done"] for s in sids), what="the results")
        details = [http.get(f"/api/submissions/{s}").json() for s in sids]
        assert [(d["status"], d["runner_device"]) for d in details] == [("PASSED", "cpu:0")] * 2
        assert _stop(runner) == 0
    finally:
        server.stop()
