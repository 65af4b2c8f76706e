"""The runner's device list (--devices, --devices-file) and its health check's verdicts."""

from __future__ import annotations

import subprocess
import sys

import pytest
from tests.service.conftest import ROOT

from gpuarena.contracts.device import pinning
from gpuarena.errors import GpuarenaError
from gpuarena.runner.devices import health_check, parse_devices


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


def _runner_process(tmp_path, *args: str, **env: str) -> subprocess.CompletedProcess:
    """`gpuarena runner` with a device list it refuses: it has read its token by then, and stops."""
    return subprocess.run(
        [sys.executable, "-m", "gpuarena.cli", "runner", "--server", "http://127.0.0.1:9", *args, "--devices", "tpu:0"],
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "HOME": str(tmp_path), **env},
    )


@pytest.mark.e2e
def test_a_runner_token_on_the_command_line_is_warned_about(tmp_path) -> None:
    """A token in argv shows in `ps` to every user of the host for as long as the runner runs:
    GPUARENA_TOKEN and --token-file do not, and --token says so."""
    typed = _runner_process(tmp_path, "--token", "gpa_x")
    assert typed.returncode == 2 and "shows the runner's token" in typed.stderr
    assert "GPUARENA_TOKEN" in typed.stderr and "--token-file" in typed.stderr
    from_env = _runner_process(tmp_path, GPUARENA_TOKEN="gpa_x")
    assert from_env.returncode == 2 and "'tpu:0' is not a device" in from_env.stderr
    assert "shows the runner's token" not in from_env.stderr
    token_file = tmp_path / "runner-token"
    token_file.write_text("gpa_x\n")
    from_file = _runner_process(tmp_path, "--token-file", str(token_file))
    assert from_file.returncode == 2 and "'tpu:0' is not a device" in from_file.stderr
    assert "shows the runner's token" not in from_file.stderr
    missing = _runner_process(tmp_path, "--token-file", str(tmp_path / "nowhere"))
    assert missing.returncode == 2 and "--token-file" in missing.stderr and "No such file" in missing.stderr
    both = _runner_process(tmp_path, "--token-file", str(token_file), "--token", "gpa_x")
    assert both.returncode == 2 and "not both" in both.stderr


@pytest.mark.e2e
def test_a_runner_reads_its_token_from_a_file(api, live, tmp_path) -> None:
    """The token in --token-file is the one the runner signs in with: it says hello and is online."""
    import signal
    import time

    headers = api.user("box", "runner")
    token_file = tmp_path / "runner-token"
    token_file.write_text(headers["Authorization"].removeprefix("Bearer ") + "\n")
    token_file.chmod(0o600)
    process = subprocess.Popen(
        [sys.executable, "-m", "gpuarena.cli", "runner", "--server", live, "--token-file", str(token_file)]
        + ["--name", "filed", "--devices", "cpu", "--no-prewarm", "--no-self-test"],
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "HOME": str(tmp_path)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 120
        while not any(r["name"] == "filed" for r in api.http.get("/api/runners", headers=headers).json()):
            assert process.poll() is None, process.communicate()[1]
            assert time.monotonic() < deadline, "the runner did not say hello"
            time.sleep(0.2)
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def test_a_second_server_on_a_taken_port_changes_nothing(settings, db) -> None:
    """A second `serve` on a taken port started its embedded runner first, which revoked the
    running server's runner token (all judging stopped), and only then failed to bind. Now the
    port is bound before anything else, and a taken one is said at once."""
    import socket

    from sqlalchemy import select

    from gpuarena.cli.serve import embedded_runner_token, serve
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
