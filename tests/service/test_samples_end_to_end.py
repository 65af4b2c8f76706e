"""Dataset samples end to end with real processes, as docs/dataset.md ("Samples through the
service") walks through them: `gpuarena serve`, a separate `gpuarena runner` on the CPU that
checks each sample in its job process, `gpuarena sample submit` of an honest, a duplicate and
a broken sample into a ccf-dataset contest, `gpuarena sample review` by its organizer, the
contest's standings, and `gpuarena dataset pull` giving a problem root `gpuarena check` passes."""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import sys

import httpx
import pytest
from tests.service.processes import Server, _cli, _wait_for
from tests.service.test_samples import broken, duplicate, honest

from gpuarena.dataset.sample_pack import SAMPLES_SLUG

pytestmark = pytest.mark.e2e


def flat(text: str) -> str:
    """Output as one line (the console wraps long lines)."""
    return " ".join(text.split())


def test_samples_submitted_checked_reviewed_ranked_and_pulled(env, tmp_path) -> None:
    server = Server(env, "--no-runner")
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
                "--device",
                "cpu",
                "--budget",
                "0.1",
                "--health-interval",
                "0",
                "--server",
                server.url,
                "--token",
                tokens["box"],
            ],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )

        def as_(name: str, *args: str, check: bool = True) -> subprocess.CompletedProcess:
            return _cli(*args, "--server", server.url, "--token", tokens[name], env=env, check=check)

        now = dt.datetime.now(dt.UTC).replace(microsecond=0)
        contest = tmp_path / "contest.toml"
        contest.write_text(
            f'slug = "data"\ntitle = "Samples"\nstart = {(now - dt.timedelta(hours=1)).isoformat()}\n'
            f'end = {(now + dt.timedelta(hours=1)).isoformat()}\nproblems = ["{SAMPLES_SLUG}"]\n'
            'device_kinds = ["cpu"]\n\n[rule]\nname = "ccf-dataset"\n'
        )
        http = httpx.Client(base_url=server.url)
        _wait_for(lambda: any(k["name"] == "cpu" for k in http.get("/api/device-kinds").json()), what="the runner")
        as_("olga", "contest", "create", str(contest))

        def submit(name: str, folder) -> tuple[int, dict]:
            done = as_(name, "sample", "submit", str(folder), "--contest", "data", "--json", check=False)
            shown = json.loads(done.stdout)
            return done.returncode, shown

        ok = submit("alice", honest(tmp_path, "honest", "alice"))
        dup = submit("bob", duplicate(tmp_path, "bob"))
        bad = submit("bob", broken(tmp_path, "bob"))
        assert ok[0] == 0 and ok[1]["status"] == "ok" and ok[1]["score"] > 0, ok
        assert dup[0] == 1 and dup[1]["status"] == "duplicate", dup
        assert bad[0] == 1 and bad[1]["status"] == "broken", bad
        assert any("WRONG_VALUES" in e for e in bad[1]["report"]["errors"])

        refused = as_("olga", "sample", "review", str(bad[1]["id"]), "--accept", check=False)
        assert refused.returncode == 2 and "only a sample whose check was ok can be accepted" in flat(refused.stderr)
        not_organizer = as_("bob", "sample", "review", str(ok[1]["id"]), "--accept", check=False)
        assert not_organizer.returncode == 2 and "may not review" in flat(not_organizer.stderr)
        as_("olga", "sample", "review", str(ok[1]["id"]), "--accept", "--comment", "thanks")
        as_("olga", "sample", "review", str(dup[1]["id"]), "--reject", "--comment", "already in the dataset")
        shown = flat(as_("bob", "sample", "show", str(dup[1]["id"])).stdout)
        assert "rejected by olga: already in the dataset" in shown and "repeats level1/softmax" in shown

        standings = json.loads(as_("olga", "contest", "standings", "data", "--json").stdout)["standings"]["rows"]
        assert [(r["contestant"], r["total"]) for r in standings] == [("alice", 1), ("bob", 0)]
        assert standings[0]["figures"]["sample score"] == pytest.approx(ok[1]["score"])

        pulled = tmp_path / "pulled"
        _cli("dataset", "pull", "--server", server.url, "-o", str(pulled), env=env)
        assert json.loads((pulled / "samples.json").read_text())["samples"][0]["problem"] == "level1/rms_scale"
        _cli("check", str(pulled), env=env)  # exit 0: every problem passes
    finally:
        if runner is not None:
            runner.terminate()
            runner.wait(timeout=60)
        server.stop()
