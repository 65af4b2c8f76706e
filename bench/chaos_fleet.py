"""The processes of a bench that runs the service for real: `gpuarena` commands, API servers
and runners started (and killed with SIGKILL and started again), waited on until healthy or
online, and the machine they ran on.

Split from chaos.py, which re-exports these names: job_latency.py and multi_gpu.py import
them from there (`from chaos import CLI, ROOT, cli, free_port, machine, wait_healthy`).
"""

from __future__ import annotations

import os
import platform
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CLI = [sys.executable, "-m", "gpuarena.cli"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Proc:
    """A process the test can kill with SIGKILL and start again with the same arguments."""

    def __init__(self, name: str, argv: list[str], env: dict, logs: Path):
        self.name, self.argv, self.env, self.logs = name, argv, env, logs
        self.process: subprocess.Popen | None = None
        self.starts = 0

    def start(self) -> None:
        self.starts += 1
        log = open(self.logs / f"{self.name}.log", "a")
        log.write(f"\n=== start {self.starts} at {time.time():.3f}\n")
        log.flush()
        self.process = subprocess.Popen(self.argv, env=self.env, stdout=log, stderr=subprocess.STDOUT)
        log.close()

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def kill(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.process.wait()

    def stop(self) -> int | None:
        if not self.alive():
            return None
        assert self.process is not None
        self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.process.kill()
            return self.process.wait()


def wait_healthy(url: str, timeout: float = 120, process: subprocess.Popen | None = None) -> None:
    """Wait for the server's health check; fail at once if its process has exited."""
    import httpx

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            raise SystemExit(f"{url}: the server exited with {process.returncode} before it became healthy")
        try:
            if httpx.get(url + "/api/health", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise SystemExit(f"{url} did not become healthy in {timeout} s")


def wait_runners(url: str, count: int, timeout: float = 300) -> None:
    import httpx

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        kinds = {k["name"]: k for k in httpx.get(url + "/api/device-kinds", timeout=10).json()}
        if kinds.get("cpu", {}).get("runners_online", 0) >= count:
            return
        time.sleep(0.3)
    raise SystemExit(f"{count} runners did not come online in {timeout} s")


def cli(env: dict, *args: str) -> str:
    done = subprocess.run([*CLI, *args], env=env, capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        raise SystemExit(f"gpuarena {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}")
    return done.stdout


def machine() -> dict:
    cpu = ""
    try:
        cpu = next(line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return {
        "hostname": socket.gethostname(),
        "cpus": os.cpu_count(),
        "cpu": cpu,
        "python": platform.python_version(),
        "platform": platform.platform(),
    }
