"""The client commands (submit, standings, leaderboards, samples, bounties) talk to a server and
never import torch: it took 1.5-1.8 s of every such command on the 2-core machine (a problem
folder's id and the wire's packed problem came from modules that load problems)."""

from __future__ import annotations

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
