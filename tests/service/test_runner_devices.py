"""The runner's device list (--devices, --devices-file) and its health check's verdicts."""

from __future__ import annotations

import subprocess
import sys

import pytest
from tests.service.conftest import ROOT

from gpuarena.errors import GpuarenaError
from gpuarena.runner.devices import health_check, parse_devices, pinning


def test_device_lists() -> None:
    slots = parse_devices("cpu:0, cpu:1=fake-gpu\n# a comment\ncuda:5=H100")
    assert [(s.device, s.kind, s.healthy) for s in slots] == [
        ("cpu:0", "cpu", True),
        ("cpu:1", "fake-gpu", True),
        ("cuda:5", "H100", True),
    ]
    assert pinning(slots[2]) == ("cuda", {"CUDA_VISIBLE_DEVICES": "5", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"})
    assert pinning(slots[1]) == ("cpu", {})
    for bad, words in (
        ("gpu0", "not a device"),
        ("cpu,cpu", "listed twice"),
        ("cuda:63", "give its kind as cuda:63=KIND"),
    ):
        with pytest.raises(GpuarenaError, match=words):
            parse_devices(bad)


def test_health_check_verdicts() -> None:
    cpu, gone = parse_devices("cpu:0,cpu:1")
    assert health_check(cpu, {"cpu:0"}) == ""
    assert "cpu:1 disappeared" in health_check(gone, {"cpu:0"})


@pytest.mark.e2e
def test_runner_refuses_a_bad_device_list(tmp_path) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "gpuarena.cli",
            "runner",
            "--server",
            "http://127.0.0.1:9",
            "--token",
            "gpa_x",
            "--devices",
            "tpu:0",
        ],
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "HOME": str(tmp_path)},
    )
    assert done.returncode == 2 and "'tpu:0' is not a device" in done.stderr


def test_a_second_server_on_a_taken_port_changes_nothing(settings, db) -> None:
    """A second `serve` on a taken port started its embedded runner first, which revoked the
    running server's runner token (all judging stopped), and only then failed to bind. Now the
    port is bound before anything else, and a taken one is said at once."""
    import socket

    from sqlalchemy import select

    from gpuarena.service.server import embedded_runner_token, serve
    from gpuarena.service.tables import Token

    running = socket.socket()
    running.bind(("127.0.0.1", 0))
    running.listen()
    port = running.getsockname()[1]
    try:
        label = f"embedded@127.0.0.1:{port}"
        embedded_runner_token(db, label)  # the running server's own runner
        with pytest.raises(GpuarenaError, match="is another gpuarena server running there"):
            serve(settings, "127.0.0.1", port, with_runner=True, runner_gpus=False)
        with db.read() as session:
            tokens = list(session.scalars(select(Token).where(Token.name == label)))
        assert len(tokens) == 1 and tokens[0].revoked_at is None
    finally:
        running.close()
