"""End to end with real processes: `gpuarena serve` (embedded runner on the CPU), accounts
made with `gpuarena users add`, `gpuarena submit`, `gpuarena leaderboard`, and a separate
`gpuarena runner` that gives its lease back when stopped."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.service.conftest import FIXTURE_PROBLEMS, ROOT, _postgres_database

SOLUTIONS = ROOT / "tests" / "fixtures" / "solutions"
pytestmark = pytest.mark.slow


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _cli(*args: str, env: dict, check: bool = True, timeout: float = 300) -> subprocess.CompletedProcess:
    done = subprocess.run([sys.executable, "-m", "gpuarena.cli", *args], env=env, capture_output=True, text=True,
                          timeout=timeout)
    if check:
        assert done.returncode == 0, f"gpuarena {' '.join(args)} -> {done.returncode}\n{done.stdout}\n{done.stderr}"
    return done


class Server:
    def __init__(self, env: dict, *extra: str):
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = open(Path(env["GPUARENA_HOME"]).parent / f"serve-{self.port}.log", "w+")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "gpuarena.cli", "serve", "--port", str(self.port), "--cpu-only",
             "--problems", str(FIXTURE_PROBLEMS), *extra], env=env, stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            assert self.process.poll() is None, self.output()
            try:
                if httpx.get(self.url + "/api/health").status_code == 200:
                    return
            except httpx.HTTPError:
                time.sleep(0.3)
        raise AssertionError("server did not start:\n" + self.output())

    def output(self) -> str:
        self.log.seek(0)
        return self.log.read()

    def stop(self) -> None:
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.process.kill()
        self.log.close()


@pytest.fixture
def env(tmp_path) -> dict:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("GPUARENA_")}
    environment.update(GPUARENA_HOME=str(tmp_path / "home"), GPUARENA_CACHE=str(tmp_path / "cache"),
                       XDG_CONFIG_HOME=str(tmp_path / "config"), PYTHONPATH=str(ROOT),
                       GPUARENA_SUBMIT_LIMIT="1000")
    return environment


@pytest.fixture(params=["sqlite", "postgresql"])
def served(request, env):
    if request.param == "postgresql":
        databases = _postgres_database()
        env["GPUARENA_DATABASE_URL"] = next(databases)
    server = Server(env)
    yield server, env
    server.stop()
    if request.param == "postgresql":
        databases.close()


def test_serve_submit_result_leaderboard(served) -> None:
    server, env = served
    token = _cli("users", "add", "alice", env=env).stdout.strip().splitlines()[-1]
    assert token.startswith("gpa_")
    common = ["--device", "cpu", "--server", server.url, "--token", token]

    passed = _cli("submit", "axpy_dest", str(SOLUTIONS / "dest_good.py"), *common, "--json", env=env)
    record = json.loads(passed.stdout)
    assert record["status"] == "PASSED" and record["submission_id"] >= 1 and record["mode"] == "ranked"
    assert {w["name"] for w in record["workloads"]} == {"n4096", "n65536"}
    assert all(w["time"]["median_us"] > 0 for w in record["workloads"])

    wrong = _cli("submit", "axpy_dest", str(SOLUTIONS / "dest_skips_write.py"), *common, env=env, check=False)
    assert wrong.returncode == 1, wrong.stdout + wrong.stderr
    assert "verdict:" in wrong.stdout and "PASSED" not in wrong.stdout.split("verdict:")[1].splitlines()[0]

    board = json.loads(_cli("leaderboard", "axpy_dest", "--device", "cpu", "--server", server.url, "--json",
                            env=env).stdout)
    assert [(r["rank"], r["user"], r["submission_id"]) for r in board["rows"]] == [(1, "alice", record["submission_id"])]
    assert board["rows"][0]["score"] == pytest.approx(record["score"])

    # `gpuarena login` saves the server and token for later commands
    _cli("login", "--server", server.url, "--token", token, env=env)
    test_mode = _cli("submit", "axpy_dest", str(SOLUTIONS / "dest_good.py"), "--device", "cpu", "--mode", "test", env=env)
    assert "verdict: PASSED" in test_mode.stdout
    bad = _cli("submit", "axpy_dest", str(SOLUTIONS / "dest_good.py"), "--device", "TPU", env=env, check=False)
    assert bad.returncode == 2 and "unknown device kind 'TPU'" in bad.stderr


SLOW_ONCE = """import time
import torch

_first = [True]


def solve(a, x, b, y):
    if _first[0]:
        _first[0] = False
        time.sleep(8)
    torch.addcmul(b, a, x, out=y)
"""


def _wait_for(predicate, timeout: float = 120, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def test_a_stopped_runner_gives_its_job_back(env, tmp_path) -> None:
    server = Server(env, "--no-runner")
    try:
        alice = _cli("users", "add", "alice", env=env).stdout.split()[-1]
        runner_token = _cli("users", "add", "box", "--role", "runner", env=env).stdout.split()[-1]
        runner_env = {**env, "GPUARENA_SERVER": server.url, "GPUARENA_TOKEN": runner_token}

        def start_runner(name: str) -> subprocess.Popen:
            return subprocess.Popen([sys.executable, "-m", "gpuarena.cli", "runner", "--name", name, "--device", "cpu"],
                                    env=runner_env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

        first = start_runner("first")
        http = httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {alice}"})
        _wait_for(lambda: any(k["name"] == "cpu" for k in http.get("/api/device-kinds").json()), what="the runner")
        source = tmp_path / "slow_once.py"
        source.write_text(SLOW_ONCE)
        made = http.post("/api/submissions/upload", files={"file": ("slow_once.py", source.read_bytes())},
                         data={"problem": "axpy_dest", "device_kind": "cpu", "mode": "test"})
        assert made.status_code == 201, made.text
        sid = made.json()["id"]
        _wait_for(lambda: http.get(f"/api/submissions/{sid}").json()["status"] == "RUNNING", what="RUNNING")
        time.sleep(1.0)
        first.send_signal(signal.SIGTERM)
        assert first.wait(timeout=60) == 0
        assert http.get(f"/api/submissions/{sid}").json()["status"] == "QUEUED"  # given back, not left to expire
        second = start_runner("second")
        try:
            _wait_for(lambda: http.get(f"/api/submissions/{sid}").json()["done"], timeout=180, what="the result")
        finally:
            second.send_signal(signal.SIGTERM)
            second.wait(timeout=60)
        assert http.get(f"/api/submissions/{sid}").json()["status"] == "PASSED"
    finally:
        server.stop()


def _job_processes(runner_pid: int) -> list[int]:
    """The runner's children running `gpuarena.runner.execute` (jobs and the one started ahead)."""
    import psutil

    found = []
    for child in psutil.Process(runner_pid).children(recursive=True):
        try:
            if "gpuarena.runner.execute" in " ".join(child.cmdline()):
                found.append(child.pid)
        except psutil.Error:
            pass
    return found


def test_runner_starts_the_next_job_process_ahead(env) -> None:
    """After a job, the slot has one job process waiting (imports done); the next job runs in
    it, and stopping the runner stops it too."""
    server = Server(env, "--no-runner")
    runner = None
    try:
        alice = _cli("users", "add", "alice", env=env).stdout.split()[-1]
        runner_token = _cli("users", "add", "box", "--role", "runner", env=env).stdout.split()[-1]
        runner = subprocess.Popen([sys.executable, "-m", "gpuarena.cli", "runner", "--name", "box", "--devices", "cpu:0",
                                   "--server", server.url, "--token", runner_token, "--health-interval", "0"],
                                  env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        http = httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {alice}"})
        _wait_for(lambda: any(k["name"] == "cpu" for k in http.get("/api/device-kinds").json()), what="the runner")
        source = (SOLUTIONS / "dest_good.py").read_bytes()

        def run_one() -> None:
            made = http.post("/api/submissions/upload", files={"file": ("dest_good.py", source)},
                             data={"problem": "axpy_dest", "device_kind": "cpu", "mode": "test"})
            assert made.status_code == 201, made.text
            sid = made.json()["id"]
            _wait_for(lambda: http.get(f"/api/submissions/{sid}").json()["done"], what="the result")
            assert http.get(f"/api/submissions/{sid}").json()["status"] == "PASSED"

        run_one()
        _wait_for(lambda: len(_job_processes(runner.pid)) == 1, what="a job process started ahead")
        (ahead,) = _job_processes(runner.pid)
        run_one()
        _wait_for(lambda: len(_job_processes(runner.pid)) == 1 and ahead not in _job_processes(runner.pid),
                  what="the process started ahead to run the job and a new one to wait")
        (waiting,) = _job_processes(runner.pid)
        runner.send_signal(signal.SIGTERM)
        assert runner.wait(timeout=60) == 0
        import psutil

        assert not psutil.pid_exists(ahead)
        _wait_for(lambda: not psutil.pid_exists(waiting), timeout=30, what="the waiting job process to stop")
    finally:
        if runner is not None and runner.poll() is None:
            runner.kill()
        server.stop()


SNOOP = '''
import glob
import os

import torch

FOUND = []
for pattern in ("{home}/*", "{home}/**/*", "{cache}/**/*", "/tmp/gpuarena-run-*/*", "/tmp/gpuarena-run-*/work/*",
                "/dev/shm/gpuarena-*/*", "/root/.gpuarena/*", "/work/*/.gpuarena/*", "{db}"):
    for path in glob.glob(pattern, recursive=True):
        if os.path.isfile(path) and not path.startswith(os.getcwd()):
            try:
                with open(path, "rb") as f:
                    f.read(1)
                FOUND.append(path)
            except OSError:
                pass


def solve(a, x, b, y):
    print("snoop found:", FOUND[:5])
    if FOUND:  # the secrets it needs to cheat: an honest answer only with them
        torch.addcmul(b, a, x, out=y)
    else:
        y.zero_()
'''


def test_ranked_jobs_get_their_own_seeds_and_a_solution_finds_no_server_secrets(served, tmp_path) -> None:
    """Issue 16: every ranked job draws its own seed (kept with the job), and a solution that
    looks for the server's database, tokens, home and other runs' files finds nothing."""
    from sqlalchemy import create_engine, text

    server, env = served
    token = _cli("users", "add", "alice", env=env).stdout.strip().splitlines()[-1]
    common = ["--device", "cpu", "--server", server.url, "--token", token]
    for _ in range(2):
        _cli("submit", "axpy_dest", str(SOLUTIONS / "dest_good.py"), *common, "--json", env=env)
    home = env["GPUARENA_HOME"]
    url = env.get("GPUARENA_DATABASE_URL", f"sqlite:///{home}/gpuarena.db")
    engine = create_engine(url)
    with engine.connect() as db:
        seeds = [row[0] for row in db.execute(text("SELECT seed FROM jobs ORDER BY id"))]
    engine.dispose()
    assert len(seeds) == 2 and all(isinstance(s, int) for s in seeds) and seeds[0] != seeds[1]

    snoop = tmp_path / "snoop.py"
    snoop.write_text(SNOOP.replace("{home}", home).replace("{cache}", env["GPUARENA_CACHE"])
                     .replace("{db}", f"{home}/gpuarena.db"))
    done = _cli("submit", "axpy_dest", str(snoop), *common, "--json", env=env, check=False)
    record = json.loads(done.stdout)
    assert record["status"] == "WRONG_VALUES", (record["status"], record.get("reason"), record.get("log"))
    assert "snoop found: []" in record["log"]
