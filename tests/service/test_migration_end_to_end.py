"""A migration contest end to end with real processes, as docs/migration.md walks through it:
`gpuarena app record` makes the golden record of examples/apps/mlp_reference, `gpuarena serve`
publishes it as a migration target, `gpuarena runner --stack numpy-port` offers the CPU with that
stack, an organizer opens a ccf-migration contest on it, and contestants submit the numpy port
and its broken twin with `gpuarena submit`; the standings rank them by the check's points."""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import sys

import httpx
import pytest
from tests.service.conftest import ROOT
from tests.service.processes import Server, _cli, _wait_for

from gpuarena.migration.golden import make_writable

pytestmark = pytest.mark.e2e
APPS = ROOT / "examples" / "apps"
KIND = "cpu@numpy-port"


def test_ports_submitted_to_a_migration_contest_run_on_their_stack(env, tmp_path) -> None:
    targets = tmp_path / "targets"
    _cli("app", "record", str(APPS / "mlp_reference"), "-o", str(targets / "migration" / "mlp"), env=env)
    server = Server(env, "--no-runner", "--problems", str(targets))
    runner = None
    try:
        tokens = {
            name: _cli("users", "add", name, "--role", role, env=env).stdout.split()[-1]
            for name, role in (
                ("olga", "organiser"),
                ("alice", "participant"),
                ("bob", "participant"),
                ("box", "runner"),
            )
        }
        runner = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "gpuarena.cli",
                "runner",
                "--name",
                "box",
                "--devices",
                "cpu:0",
                "--stack",
                "numpy-port",
                "--server",
                server.url,
                "--token",
                tokens["box"],
                "--health-interval",
                "0",
            ],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        http = httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {tokens['olga']}"})
        _wait_for(lambda: any(k["name"] == KIND for k in http.get("/api/device-kinds").json()), what="the runner")
        (slot,) = [r for r in http.get("/api/runners").json() if r["name"] == "box"][0]["devices"]
        assert slot["kind"] == KIND and slot["stack"] == "numpy-port" and slot["software"]["numpy"]
        assert [p["id"] for p in http.get("/api/problems", params={"kind": "app"}).json()] == ["migration/mlp"]

        now = dt.datetime.now(dt.UTC).replace(microsecond=0)
        contest = tmp_path / "contest.toml"
        contest.write_text(
            f'slug = "port-mlp"\ntitle = "Port the MLP"\nstart = {(now - dt.timedelta(hours=1)).isoformat()}\n'
            f'end = {(now + dt.timedelta(hours=1)).isoformat()}\nproblems = ["migration/mlp"]\n'
            f'device_kinds = ["{KIND}"]\norganizers = ["olga"]\n\n[rule]\nname = "ccf-migration"\n'
        )
        _cli("contest", "create", str(contest), "--server", server.url, "--token", tokens["olga"], env=env)

        def submit(name: str, port: str) -> dict:
            done = _cli(
                "submit",
                "migration/mlp",
                str(APPS / port),
                "--device",
                KIND,
                "--contest",
                "port-mlp",
                "--json",
                "--server",
                server.url,
                "--token",
                tokens[name],
                env=env,
                check=False,
            )
            return json.loads(done.stdout)

        alice, bob = submit("alice", "mlp_port"), submit("bob", "mlp_port_broken")
        assert alice["status"] == "PASSED" and alice["score"] >= 100, alice["reason"]
        assert bob["status"] == "PASSED" and 60 < bob["score"] < 100, bob["reason"]
        assert [o["matched"] for o in alice["migration"]["outputs"]] == [True] * 4
        assert not all(o["matched"] for o in bob["migration"]["outputs"])
        assert http.get(f"/api/submissions/{alice['submission_id']}").json()["runner"] == "box"

        shown = json.loads(
            _cli(
                "contest", "standings", "port-mlp", "--server", server.url, "--token", tokens["olga"], "--json", env=env
            ).stdout
        )
        assert [(r["contestant"], r["total"]) for r in shown["standings"]["rows"]] == [
            ("alice", alice["score"]),
            ("bob", bob["score"]),
        ]
    finally:
        if runner is not None:
            runner.terminate()
            runner.wait(timeout=60)
        server.stop()
        make_writable(targets)
