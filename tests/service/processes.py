"""Real service processes for end-to-end tests: `gpuarena serve` on a free port and the CLI
run as a subprocess, as a user would run them."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
from tests.service.conftest import FIXTURE_PROBLEMS, ROOT

SOLUTIONS = ROOT / "tests" / "fixtures" / "solutions"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _cli(
    *args: str,
    env: dict,
    check: bool = True,
    timeout: float = 300,
    input: str | None = None,
) -> subprocess.CompletedProcess:
    done = subprocess.run(
        [sys.executable, "-m", "gpuarena.cli", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        input=input,
    )
    if check:
        assert done.returncode == 0, f"gpuarena {' '.join(args)} -> {done.returncode}\n{done.stdout}\n{done.stderr}"
    return done


class Server:
    def __init__(self, env: dict, *extra: str):
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = open(Path(env["GPUARENA_HOME"]).parent / f"serve-{self.port}.log", "w+")
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "gpuarena.cli",
                "serve",
                "--port",
                str(self.port),
                "--cpu-only",
                "--problems",
                str(FIXTURE_PROBLEMS),
                *extra,
            ],
            env=env,
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )
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


def _wait_for(predicate, timeout: float = 120, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)
