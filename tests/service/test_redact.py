"""The service takes host details out of logs and reasons (service/redact.py), on real text:
tracebacks made here, a run folder made the way the supervisor makes it, and a log as a
runner on another machine (conda under /opt, a home folder, its own host name) sends it."""

from __future__ import annotations

import shutil
import socket
import sys
import tempfile
import time
import traceback
from pathlib import Path

import pytest
import torch

from gpuarena.contracts.records import Evaluation
from gpuarena.service.redact import redact, redact_evaluation, remember_service

REMOTE_LOG = """\
building solution 7f3a9c…
Traceback (most recent call last):
  File "/tmp/gpuarena-run-q8w2e7rt/work/solution/sol.py", line 12, in solve
    y.copy_(torch.nn.functional.pad(x, (1,), mode="bogus"))
  File "/opt/conda/envs/judge/lib/python3.11/site-packages/torch/nn/functional.py", line 5096, in pad
    return torch._C._nn.pad(input, pad, mode, value)
NotImplementedError: Unrecognised padding mode bogus
triton cache: /home/judge/.triton/cache/4b1e/kernel.ptx and /root/.cache/torch_extensions/py311_cu121
shared tensors in /dev/shm/gpuarena-9kd2lq0s/t3 on gpu-node-17.cluster.example (gpu-node-17)
json: /usr/lib/python3.11/json/decoder.py
"""


def _traceback_of(source: str, where: Path) -> str:
    """A real traceback of `source` run from a file at `where`."""
    where.write_text(source)
    try:
        exec(compile(where.read_text(), str(where), "exec"), {"torch": torch})
    except Exception:  # any error: its traceback is the example
        return traceback.format_exc()
    raise AssertionError("the example was meant to fail")


def test_a_traceback_made_here_loses_the_install_and_run_paths() -> None:
    run = Path(tempfile.mkdtemp(prefix="gpuarena-run-"))  # as the supervisor makes its run folder
    try:
        text = _traceback_of('torch.nn.functional.pad(torch.zeros(3), (1,), mode="bogus")\n', run / "sol.py")
    finally:
        shutil.rmtree(run)
    site = str(Path(torch.__file__).parents[1])
    assert site in text and str(run) in text  # the example really carries them
    shown = redact(text)
    assert site not in shown and str(run) not in shown and sys.prefix not in shown
    assert '<site-packages>/torch/nn/functional.py", line' in shown
    assert 'File "<run>/sol.py", line 1' in shown and "Unrecognised padding mode bogus" in shown


def test_a_remote_runner_s_log_loses_its_layout_and_host_name() -> None:
    shown = redact(REMOTE_LOG, ["gpu-node-17.cluster.example"])
    for leak in (
        "/opt/conda",
        "/home/judge",
        "/root/",
        "gpuarena-run-q8w2e7rt",
        "gpuarena-9kd2lq0s",
        "gpu-node-17",
        "/usr/lib/python3.11",
    ):
        assert leak not in shown, leak
    assert 'File "<run>/work/solution/sol.py", line 12, in solve' in shown
    assert 'File "<site-packages>/torch/nn/functional.py", line 5096, in pad' in shown
    assert "~/.triton/cache/4b1e/kernel.ptx" in shown and "~/.cache/torch_extensions/py311_cu121" in shown
    assert "<run>/t3 on <host> (<host>)" in shown and "<python>/lib/json/decoder.py" in shown
    assert 'y.copy_(torch.nn.functional.pad(x, (1,), mode="bogus"))' in shown  # the code line itself stays
    assert redact(shown, ["gpu-node-17.cluster.example"]) == shown  # a second pass changes nothing


def test_the_service_s_data_folder_database_and_host_name_go(tmp_path) -> None:
    home = tmp_path / "srv-home"
    remember_service(home, f"sqlite:///{tmp_path / 'db' / 'gpuarena.db'}")
    remember_service(home, "postgresql+psycopg://arena:hunter2-pw@db.internal:5432/arena")
    text = (
        f"open {home}/admin-token; db at {tmp_path}/db/gpuarena.db; "
        "url postgresql+psycopg://arena:hunter2-pw@db.internal:5432/arena; "
        f"judged on {socket.gethostname()}."
    )
    shown = redact(text)
    assert str(home) not in shown and str(tmp_path) not in shown and "hunter2" not in shown
    assert "<data>/admin-token" in shown and "<data>/gpuarena.db" in shown and "url <database>;" in shown
    assert f"judged on {socket.gethostname()}." not in shown and "judged on <host>." in shown


@pytest.mark.parametrize(
    "text",
    [
        "output y: 3 of 64000 elements outside atol=1e-05; worst at [3, 4]",
        "RUNTIME_ERROR: solve() raised ValueError: shapes 1/2 and 3/4 differ (see torch/nn/functional.py)",
        "<site-packages>/torch/x.py and <run>/sol.py and ~/.cache",
        "worker in cgroup /sys/fs/cgroup/root.slice/gpuarena.scope; 12/34 calls checked",
        "",
    ],
)
def test_text_without_host_details_is_left_alone(text: str) -> None:
    assert redact(text) == text


def test_hostile_text_is_redacted_in_linear_time() -> None:
    """The log is the solution's to write: path-like junk of the largest request the service
    takes (2 MB) must not stall it (a backtracking pattern takes minutes on this)."""
    for junk in ("/tmp" * 500_000, "/tmp/" * 400_000 + "x", "/a" * 1_000_000, "/home/" * 330_000):
        started = time.perf_counter()
        redact(junk, ["gpu-node-17"])
        assert time.perf_counter() - started < 3.0, junk[:20]


def test_a_record_is_redacted_everywhere_but_its_hostname_field() -> None:
    record = Evaluation(
        status="RUNTIME_ERROR",
        reason="solve() raised in /tmp/gpuarena-run-ab12cd34/work/sol.py",
        problem="axpy_dest",
        solution_hash="0" * 64,
        device="cpu",
        mode="ranked",
        log=REMOTE_LOG,
        workloads=[{"name": "n4096", "status": "RUNTIME_ERROR", "reason": "at /home/judge/x.py on gpu-node-17"}],
        environment={
            "device": "cpu",
            "device_name": "cpu",
            "hostname": "gpu-node-17.cluster.example",
            "torch_version": "2",
            "python_version": "3.11",
            "cpu_model": "x",
            "worker_containment": "bubblewrap; cgroup /home/judge/cg",
        },
    )
    shown = redact_evaluation(record)
    text = shown.model_dump_json()
    assert "gpu-node-17" not in text.replace('"hostname":"gpu-node-17.cluster.example"', "")
    assert "/home/judge" not in text and "gpuarena-run-ab12cd34" not in text
    assert shown.reason == "solve() raised in <run>/work/sol.py" and shown.workloads[0].reason == "at ~/x.py on <host>"
    assert shown.environment is not None and shown.environment.hostname == "gpu-node-17.cluster.example"
    assert shown.environment.worker_containment == "bubblewrap; cgroup ~/cg"
