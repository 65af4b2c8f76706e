"""Web fixtures: a real `gpuarena serve` (SQLite in a temporary home, embedded CPU runner) and
Debian's Chromium driven by Playwright; plus helpers shared by the page tests."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "tests" / "artifacts"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--headless",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def csrf_of(html: str) -> str:
    """The CSRF token a page's forms carry."""
    found = re.search(r'name="csrf_token" value="([^"]+)"', html)
    assert found, "the page has no form with a CSRF token"
    return found.group(1)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Served:
    url: str
    env: dict[str, str]
    home: Path
    process: subprocess.Popen
    log: Path

    def cli(self, *args: str) -> str:
        done = subprocess.run(
            [sys.executable, "-m", "gpuarena.cli", *args], env=self.env, capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 0, f"gpuarena {' '.join(args)}: {done.stdout}\n{done.stderr}"
        return done.stdout

    def user(self, name: str, role: str = "participant") -> str:
        """Make an account with `gpuarena users add`; returns its token."""
        return self.cli("users", "add", name, "--role", role).strip().splitlines()[-1]


@pytest.fixture(scope="session")
def server(tmp_path_factory) -> Iterator[Served]:
    """One server for all web tests (starting one costs seconds: torch imports, problem sync)."""
    tmp = tmp_path_factory.mktemp("web")
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUARENA_")}
    env.update(
        GPUARENA_HOME=str(tmp / "home"),
        GPUARENA_CACHE=str(tmp / "cache"),
        XDG_CONFIG_HOME=str(tmp / "config"),
        PYTHONPATH=str(ROOT),
        GPUARENA_SUBMIT_LIMIT="1000",
        GPUARENA_MAX_IN_FLIGHT="1000",
        GPUARENA_RUNNER_SELF_TEST="0",  # the languages' self-tests: tests/test_language_check.py
        GPUARENA_RUNNER_BUDGET="0.1",  # the jobs' timing: enough rounds for every bound, not a ranking's
    )
    port = _free_port()
    log = tmp / "serve.log"
    with open(log, "w") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "gpuarena.cli", "serve", "--port", str(port), "--cpu-only"],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    served = Served(url=f"http://127.0.0.1:{port}", env=env, home=tmp / "home", process=process, log=log)
    deadline = time.monotonic() + 120
    try:
        while True:
            assert process.poll() is None, log.read_text()
            assert time.monotonic() < deadline, "server did not start:\n" + log.read_text()
            try:  # ready once the embedded runner has brought the cpu device kind
                kinds = httpx.get(served.url + "/api/device-kinds").json()
                if any(k["name"] == "cpu" and k["runners_online"] for k in kinds):
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.3)
        yield served
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()


@pytest.fixture(scope="session")
def browser():
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: apt-get install -y chromium (scripts/test.sh does it)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


@pytest.fixture(scope="session", autouse=True)
def artifacts() -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    return ARTIFACTS
