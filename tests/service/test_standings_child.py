"""The standings child of a server process (service/standings_process.py) leaves with its server,
even one killed outright, which never shuts its pool down."""

from __future__ import annotations

import subprocess
import sys
import time

import psutil
import pytest

SERVER = """
import os, sys
from gpuarena.service import standings_process
print(standings_process._executor().submit(os.getpid).result(timeout=120), flush=True)
sys.stdin.read()
"""


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


@pytest.mark.e2e
def test_the_standings_child_leaves_with_a_server_killed_outright() -> None:
    server = subprocess.Popen([sys.executable, "-c", SERVER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None
        child = int(server.stdout.readline())
        assert not _gone(child)
    finally:
        server.kill()
        server.wait()
    deadline = time.monotonic() + 30
    while not _gone(child) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _gone(child), "the standings child outlived its server"
