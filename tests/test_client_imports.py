"""The client commands (submit, standings, leaderboards, samples, bounties) talk to a server and
never import torch: it took 1.5-1.8 s of every such command on the 2-core machine (a problem
folder's id and the wire's packed problem came from modules that load problems). Nor does the
server: it reads problem files, and torch's import was 1.3 s of its start-up (problem.toml's
dtypes were torch's objects)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from gpuarena.bundled import bundled_root

ROOT = Path(__file__).resolve().parents[1]
UNREACHABLE = "http://127.0.0.1:9"
"""Nothing listens there: each command fails at once, after all its imports."""

COMMANDS = [
    [
        "submit",
        str(bundled_root() / "level1" / "softmax"),
        str(ROOT / "examples" / "softmax" / "pytorch.py"),
        "--device",
        "cpu",
    ],
    ["leaderboard", "level1/softmax", "--device", "cpu"],
    ["contest", "standings", "rehearsal"],
    ["sample", "submit", str(ROOT / "tests" / "dataset" / "samples" / "rms_scale")],
    ["bounty", "list"],
]


@pytest.mark.quick
@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c[:2]) if c[0] != "submit" else "submit")
def test_a_client_command_never_imports_torch(command):
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "gpuarena", *command, "--server", UNREACHABLE]
        + (["--token", "t"] if command[0] in ("submit", "sample") else []),
        capture_output=True,
        text=True,
        timeout=120,
    )
    imported = {line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines() if line.startswith("import time:")}
    assert "gpuarena.cli.entry" in imported and done.returncode != 0, done.stderr[-2000:]
    assert "torch" not in imported, [m for m in imported if m.startswith("gpuarena")]


SERVER_START = """
import sys
from gpuarena.cli.serve import prepare
from gpuarena.service.app import create_app
from gpuarena.service.config import Settings
from gpuarena.service.tables import Problem
from sqlalchemy import func, select
settings = Settings.from_env()
db = prepare(settings)
create_app(settings, db)
import gpuarena.runner.agent
with db.read() as session:
    print(session.scalar(select(func.count()).select_from(Problem)))
print("torch" in sys.modules)
"""


@pytest.mark.service  # a database, and the embedded runner's code
def test_the_server_reads_its_problems_and_starts_without_torch(tmp_path):
    """What `gpuarena serve` does before it listens: the database made, the bundled problems read
    into it, the app and the embedded runner's code imported."""
    done = subprocess.run(
        [sys.executable, "-c", SERVER_START],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "GPUARENA_HOME": str(tmp_path), "GPUARENA_DATABASE_URL": ""},
    )
    assert done.returncode == 0, done.stderr[-2000:]
    problems, torch_imported = done.stdout.split()
    # the bundled problems and the samples' own (dataset/sample_pack.py)
    assert int(problems) == len(list(bundled_root().rglob("problem.toml"))) + 1 and torch_imported == "False"
