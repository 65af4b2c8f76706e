"""End to end with real processes: `gpuarena serve` (embedded runner on the CPU), accounts
made with `gpuarena users add`, `gpuarena submit`, `gpuarena leaderboard`, and a separate
`gpuarena runner` that gives its lease back when stopped."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from tests.service.conftest import ROOT
from tests.service.processes import SOLUTIONS, Server, _cli, _wait_for

pytestmark = pytest.mark.e2e


@pytest.mark.parametrize("served", ["sqlite"], indirect=True)  # one database each: see the seeds' test
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

    board = json.loads(
        _cli("leaderboard", "axpy_dest", "--device", "cpu", "--server", server.url, "--json", env=env).stdout
    )
    assert [(r["rank"], r["user"], r["submission_id"]) for r in board["rows"]] == [
        (1, "alice", record["submission_id"])
    ]
    assert board["rows"][0]["score"] == pytest.approx(record["score"])
    by_folder = json.loads(
        _cli(
            "leaderboard",
            str(ROOT / "tests" / "fixtures" / "problems" / "axpy_dest"),
            "--device",
            "cpu",
            "--server",
            server.url,
            "--json",
            env=env,
        ).stdout
    )
    assert by_folder["rows"] == board["rows"]  # a local problem folder names the server's problem

    # `gpuarena login` saves the server and token for later commands; a token piped in is read
    # without a warning, and http://host:port/ is the same server as http://host:port
    piped = _cli("login", "--server", server.url + "/", env=env, input=token + "\n")
    assert "signed in to" in piped.stdout and "Warning" not in piped.stderr, piped.stderr
    test_mode = _cli(
        "submit",
        "axpy_dest",
        str(SOLUTIONS / "dest_good.py"),
        "--device",
        "cpu",
        "--mode",
        "test",
        "--server",
        server.url + "/",
        env=env,
    )  # the saved token is found for the slashed address
    assert "verdict: PASSED" in test_mode.stdout
    boss = _cli("users", "add", "boss", "--role", "admin", env=env).stdout.strip().splitlines()[-1]
    link = _cli("invites", "create", "--server", server.url, "--token", boss, "--uses", "1", env=env).stdout.strip()
    joined = httpx.post(server.url + "/api/join", json={"code": link.rsplit("/join/", 1)[1], "name": "invited"})
    assert link.startswith(server.url + "/join/inv_") and joined.status_code == 201, joined.text
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


def test_a_stopped_runner_gives_its_job_back(env, tmp_path) -> None:
    server = Server(env, "--no-runner")
    try:
        alice = _cli("users", "add", "alice", env=env).stdout.split()[-1]
        runner_token = _cli("users", "add", "box", "--role", "runner", env=env).stdout.split()[-1]
        runner_env = {**env, "GPUARENA_SERVER": server.url, "GPUARENA_TOKEN": runner_token}

        def start_runner(name: str) -> subprocess.Popen:
            return subprocess.Popen(
                [sys.executable, "-m", "gpuarena.cli", "runner", "--name", name, "--device", "cpu"],
                env=runner_env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )

        first = start_runner("first")
        http = httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {alice}"})
        _wait_for(lambda: any(k["name"] == "cpu" for k in http.get("/api/device-kinds").json()), what="the runner")
        source = tmp_path / "slow_once.py"
        source.write_text(SLOW_ONCE)
        made = http.post(
            "/api/submissions/upload",
            files={"file": ("slow_once.py", source.read_bytes())},
            data={"problem": "axpy_dest", "device_kind": "cpu", "mode": "test"},
        )
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
                "--server",
                server.url,
                "--token",
                runner_token,
                "--health-interval",
                "0",
            ],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        http = httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {alice}"})
        _wait_for(lambda: any(k["name"] == "cpu" for k in http.get("/api/device-kinds").json()), what="the runner")
        source = (SOLUTIONS / "dest_good.py").read_bytes()

        def run_one() -> None:
            made = http.post(
                "/api/submissions/upload",
                files={"file": ("dest_good.py", source)},
                data={"problem": "axpy_dest", "device_kind": "cpu", "mode": "test"},
            )
            assert made.status_code == 201, made.text
            sid = made.json()["id"]
            _wait_for(lambda: http.get(f"/api/submissions/{sid}").json()["done"], what="the result")
            assert http.get(f"/api/submissions/{sid}").json()["status"] == "PASSED"

        run_one()
        _wait_for(lambda: len(_job_processes(runner.pid)) == 1, what="a job process started ahead")
        (ahead,) = _job_processes(runner.pid)
        run_one()
        _wait_for(
            lambda: len(_job_processes(runner.pid)) == 1 and ahead not in _job_processes(runner.pid),
            what="the process started ahead to run the job and a new one to wait",
        )
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


FINGERPRINTS = """import torch

_calls = [0]


def solve(a, x, b, y):
    # an honest answer that tells its author which inputs it saw (the first calls of each workload)
    _calls[0] += 1
    if _calls[0] <= 40:
        print("inputs", a.numel(), f"{float(a.double().sum()):.12e}", f"{float(x.double().sum()):.12e}")
    torch.addcmul(b, a, x, out=y)
"""


def _fingerprints(record: dict) -> set[str]:
    return {line for line in record["log"].splitlines() if line.startswith("inputs ")}


# One database each for the longer flows (the queue's and the API's semantics run on both in the
# service lane): both took 4.5 minutes of CI's two cores for the same processes twice.
@pytest.mark.parametrize("served", ["postgresql"], indirect=True)
def test_ranked_jobs_get_their_own_seeds(served, tmp_path) -> None:
    """Issue 16: every ranked job draws its own seed when queued, kept with the job, and the
    runner judges with it: two ranked runs of one problem see none of the same inputs, where
    two benchmark runs share the public seed's correctness inputs."""
    from sqlalchemy import create_engine, text

    server, env = served
    token = _cli("users", "add", "alice", env=env).stdout.strip().splitlines()[-1]
    common = ["--device", "cpu", "--server", server.url, "--token", token, "--json"]
    source = tmp_path / "fingerprints.py"
    source.write_text(FINGERPRINTS)
    records = {
        mode: [
            json.loads(_cli("submit", "axpy_dest", str(source), *common, "--mode", mode, env=env).stdout)
            for _ in range(2)
        ]
        for mode in ("ranked", "benchmark")
    }
    assert all(r["status"] == "PASSED" for runs in records.values() for r in runs), records

    url = env.get("GPUARENA_DATABASE_URL", f"sqlite:///{env['GPUARENA_HOME']}/gpuarena.db")
    engine = create_engine(url.replace("postgresql://", "postgresql+psycopg://", 1))
    with engine.connect() as db:
        seeds = dict(db.execute(text("SELECT submission_id, seed FROM jobs")).all())
    engine.dispose()
    ranked = [seeds[r["submission_id"]] for r in records["ranked"]]
    assert all(isinstance(s, int) for s in ranked) and ranked[0] != ranked[1]
    assert [seeds[r["submission_id"]] for r in records["benchmark"]] == [None, None]

    first, second = (_fingerprints(r) for r in records["ranked"])
    assert first and second and not first & second, "two ranked jobs saw the same inputs"
    public = [_fingerprints(r) for r in records["benchmark"]]
    assert public[0] & public[1], "benchmark runs no longer share the public seed's inputs"
    for record in records["ranked"]:  # the seed is nowhere in what the author is shown
        shown = httpx.get(
            f"{server.url}/api/submissions/{record['submission_id']}", headers={"Authorization": f"Bearer {token}"}
        ).text
        assert str(seeds[record["submission_id"]]) not in shown


SNOOP = r'''
import glob
import os
import time

import torch

SECRETS = {secrets!r}
"""Where the service keeps what a solution must never read: its home (database, admin token,
web secret, the runner's work folder), the saved login, the caches, and the defaults."""
OWN_RUN = next((part for part in os.getcwd().split("/") if part.startswith("gpuarena-run-")), "-")
FOUND = []


def _note(path):
    if OWN_RUN in path or path.startswith(os.getcwd()) or not os.path.isfile(path):
        return
    try:
        with open(path, "rb") as f:
            FOUND.append((path, f.read(40)))
    except OSError:
        pass


for folder in SECRETS:
    for path in glob.glob(folder + "/**", recursive=True):
        _note(path)
for pattern in ("/tmp/gpuarena-run-*/**", "/dev/shm/gpuarena-*/**", "/var/tmp/gpuarena-*/**"):
    for path in glob.glob(pattern, recursive=True):  # other jobs' inputs and files
        _note(path)
deadline = time.monotonic() + 5
for top in ("/tmp", "/dev/shm", "/var/tmp", {checkout!r}):
    for root, dirs, files in os.walk(top):
        if root.count("/") > 8 or time.monotonic() > deadline:
            dirs[:] = []
        # the checkout's tools and their caches (mypy keeps SQLite files): not the service's data
        dirs[:] = [d for d in dirs if d not in (".git", ".venv", "node_modules", ".mypy_cache", ".ruff_cache")]
        for name in files:
            if name.endswith((".db", ".sqlite")) or name in ("admin-token", "credentials.json", "web-secret.key"):
                _note(os.path.join(root, name))
for entry in glob.glob("/proc/[0-9]*"):  # other processes' environments and command lines
    if entry.rsplit("/", 1)[1] == str(os.getpid()):
        continue
    for what in ("environ", "cmdline"):
        try:
            with open(entry + "/" + what, "rb") as f:
                data = f.read()
        except OSError:
            continue
        if b"GPUARENA_HOME" in data or b"gpa_" in data or any(s.encode() in data for s in SECRETS):
            FOUND.append((entry + "/" + what, data[:40]))
for key, value in os.environ.items():
    if key in ("GPUARENA_TOKEN", "GPUARENA_DATABASE_URL") or any(s in value for s in SECRETS):
        FOUND.append(("env " + key, value[:40]))


def solve(a, x, b, y):
    print("snoop found:", len(FOUND), FOUND[:20])
    if FOUND:  # what a cheat would need to know: an honest answer only with it
        torch.addcmul(b, a, x, out=y)
    else:
        y.zero_()
'''


@pytest.fixture(params=["serve.sh", "checkout-on-pythonpath"])
def deployed(request) -> Iterator[tuple[Server, dict, list[str]]]:
    """A server laid out as scripts/serve.sh lays it out: its home in the checkout (not under
    /tmp, which the worker never sees), made with `mkdir -p` (mode 0755) before the first
    command, an admin token file in it, and a saved login; run with the environment serve.sh
    gives it (no PYTHONPATH), and with the checkout on PYTHONPATH (then the sandbox shows the
    worker the whole checkout, the data folder in it included: its mode must keep it out)."""
    base = ROOT / ".gpuarena" / f"e2e-snoop-{os.getpid()}-{secrets.token_hex(4)}"
    home, config, cache = base / "home", base / "config", base / "cache"
    environment = {k: v for k, v in os.environ.items() if not k.startswith("GPUARENA_") and k != "PYTHONPATH"}
    environment.update(
        GPUARENA_HOME=str(home),
        GPUARENA_CACHE=str(cache),
        XDG_CONFIG_HOME=str(config),
        GPUARENA_SUBMIT_LIMIT="1000",
        GPUARENA_MAX_IN_FLIGHT="1000",
        GPUARENA_RUNNER_SELF_TEST="0",  # the languages' self-tests: tests/test_language_check.py
        GPUARENA_RUNNER_BUDGET="0.1",  # the jobs' timing: enough rounds for every bound, not a ranking's
    )
    if request.param == "checkout-on-pythonpath":
        environment["PYTHONPATH"] = str(ROOT)
    decoys = [
        Path(tempfile.mkdtemp(prefix="gpuarena-run-")),
        Path(tempfile.mkdtemp(prefix="gpuarena-", dir="/dev/shm")),
    ]
    for decoy in decoys:  # another job's run folder and shared inputs, as they are while it runs
        (decoy / "inputs.bin").write_bytes(b"another job's inputs")
    server = None
    try:
        home.mkdir(parents=True)
        admin = _cli("users", "add", "admin", "--role", "admin", env=environment).stdout.strip().splitlines()[-1]
        (home / "admin-token").write_text(admin + "\n")
        (home / "admin-token").chmod(0o600)
        server = Server(environment)
        _cli("login", "--server", server.url, "--token", admin, env=environment)
        assert (config / "gpuarena" / "credentials.json").is_file()
        secret_places = [
            str(home),
            str(config),
            str(Path.home() / ".gpuarena"),
            str(Path.home() / ".config" / "gpuarena"),
            *map(str, decoys),
        ]
        yield server, environment, secret_places
    finally:
        if server is not None:
            server.stop()
        for folder in [base, *decoys]:
            shutil.rmtree(folder, ignore_errors=True)
        try:
            base.parent.rmdir()  # the checkout's .gpuarena/, if this test made it
        except OSError:
            pass


def test_a_solution_finds_no_server_secrets(deployed, tmp_path) -> None:
    """Issue 16: a solution that looks for the server's database, tokens, web secret, home
    and cache, other jobs' run folders and shared inputs, other processes' environments and
    its own environment finds nothing it can read (the worker's sandbox)."""
    server, env, secret_places = deployed
    token = _cli("users", "add", "alice", env=env).stdout.strip().splitlines()[-1]
    common = ["--device", "cpu", "--server", server.url, "--token", token]
    _cli("submit", "axpy_dest", str(SOLUTIONS / "dest_good.py"), *common, env=env)  # a job before: its traces
    snoop = tmp_path / "snoop.py"
    snoop.write_text(SNOOP.replace("{secrets!r}", repr(secret_places)).replace("{checkout!r}", repr(str(ROOT))))
    done = _cli("submit", "axpy_dest", str(snoop), *common, "--json", env=env, check=False)
    record = json.loads(done.stdout)
    assert "snoop found: 0 []" in record["log"], record["log"][-4000:]
    assert record["status"] == "WRONG_VALUES", (record["status"], record.get("reason"))
    # with --json the verdict's reason is in the log too, not only in the JSON on stdout
    assert f"submission {record['submission_id']}: WRONG_VALUES: {record['reason']}" in done.stderr, done.stderr


LOOPS_FOREVER = "def solve(a, x, b, y):\n    while True:\n        pass\n"


@pytest.mark.parametrize("served", ["sqlite"], indirect=True)  # one database: see the seeds' test
def test_an_infinite_loop_is_cancelled_and_the_next_user_goes_on(served, tmp_path) -> None:
    """One runner, one user's `while True: pass`: the next user's job waits in the queue with
    its position shown, the author cancels, the runner kills the job within seconds, the next
    job runs; `gpuarena submit` piped to a file printed each change."""
    server, env = served
    tokens = {name: _cli("users", "add", name, env=env).stdout.strip().splitlines()[-1] for name in ("ann", "bob")}
    loop = tmp_path / "loop.py"
    loop.write_text(LOOPS_FOREVER)
    common = ["--device", "cpu", "--mode", "test", "--server", server.url]
    ann = subprocess.Popen(
        [sys.executable, "-m", "gpuarena.cli", "submit", "axpy_dest", str(loop), *common, "--token", tokens["ann"]],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    api = httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {tokens['bob']}"})
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        mine = api.get("/api/submissions", params={"user": "ann"}).json()
        if mine and mine[0]["status"] == "RUNNING":
            break
        time.sleep(0.2)
    else:
        raise AssertionError(f"ann's job never started: {mine}")
    looping = mine[0]["id"]
    bob = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gpuarena.cli",
            "submit",
            "axpy_dest",
            str(SOLUTIONS / "dest_good.py"),
            *common,
            "--token",
            tokens["bob"],
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    while not (waiting := api.get("/api/submissions", params={"user": "bob"}).json()):
        time.sleep(0.2)
    assert api.get(f"/api/submissions/{waiting[0]['id']}").json()["queue_position"] == 1
    time.sleep(2)
    cancelled = _cli("cancel", str(looping), "--server", server.url, "--token", tokens["ann"], env=env)
    assert "CANCELLED (cancelled by ann)" in cancelled.stdout
    started = time.monotonic()
    bob_out, bob_err = bob.communicate(timeout=240)
    assert bob.returncode == 0 and "verdict: PASSED" in bob_out, bob_out + bob_err
    assert time.monotonic() - started < 120  # the loop was killed, not left to its 600 s limit
    ann_out, ann_err = ann.communicate(timeout=60)
    assert ann.returncode == 1 and "CANCELLED" in ann_out
    assert f"submission {looping}: RUNNING" in ann_err  # progress lines without a terminal
    assert f"gpuarena cancel {looping}" in ann_err
