"""The device backend: the CPU and NVIDIA GPUs are judged; a PyTorch built for another vendor
(it still answers to "cuda") is refused before a run starts, with the gap named; and the
backend is the interface every device-specific step of a run goes through."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import torch
from tests.conftest import EXAMPLES, judge

from gpuarena.contracts import messages
from gpuarena.contracts.records import Environment
from gpuarena.harness import supervisor as supervisor_module
from gpuarena.harness.device import backend as backend_module
from gpuarena.harness.device.backend import CPU, NVIDIA_PIECES, CpuBackend, UnsupportedDevice, backend_for
from gpuarena.harness.device.backend_base import ColdCaches, InputBudget
from gpuarena.harness.device.block import BlockSamples
from gpuarena.harness.device.timing import Timer
from gpuarena.harness.failure import RunFailure
from gpuarena.harness.judge import RunOptions, evaluate
from gpuarena.problems import resolve_problem
from gpuarena.solutions.loader import load_solution


def test_the_cpu_and_an_nvidia_build_have_their_backends(monkeypatch) -> None:
    assert backend_for(torch.device("cpu")) is CPU
    monkeypatch.setattr(torch.version, "cuda", "13.0")
    monkeypatch.setattr(torch.version, "hip", None, raising=False)
    nvidia = backend_for(torch.device("cuda"))
    assert (nvidia.name, nvidia.timer, nvidia.device_audit, nvidia.accelerator) == (
        "nvidia",
        "cupti-device-time",
        True,
        True,
    )


def test_a_rocm_build_is_refused_with_the_gap_named(monkeypatch) -> None:
    monkeypatch.setattr(torch.version, "hip", "6.2.41133", raising=False)
    with pytest.raises(UnsupportedDevice, match=r"built for ROCm \(HIP 6.2.41133\).*no ROCm backend yet"):
        backend_for(torch.device("cuda"))
    with pytest.raises(UnsupportedDevice, match="ROCm"):  # at the harness's door, before any worker starts
        evaluate(
            resolve_problem("level1/softmax"),
            load_solution(EXAMPLES / "softmax" / "pytorch.py"),
            RunOptions(device="cuda"),
        )


def test_a_build_without_cuda_that_answers_to_cuda_is_refused(monkeypatch) -> None:
    monkeypatch.setattr(torch.version, "hip", None, raising=False)
    monkeypatch.setattr(torch.version, "cuda", None)
    with pytest.raises(UnsupportedDevice, match="not built with CUDA"):
        backend_for(torch.device("cuda"))


# -- the backend is the interface the run goes through -----------------------------------------

HARNESS = Path(backend_module.__file__).parent.parent
GENERIC = sorted(
    p
    for p in HARNESS.rglob("*.py")
    if p.relative_to(HARNESS).as_posix()
    not in {m.strip() for k in NVIDIA_PIECES for m in k.split(",")} | {"device/backend.py", "device/backend_base.py"}
)


def _device_specific(tree: ast.AST) -> list[str]:
    """Where code reaches for CUDA itself or decides by the device's type."""
    found = []
    for node in ast.walk(tree):
        text = ast.unparse(node)
        if (
            isinstance(node, ast.Attribute)
            and text.startswith("torch.cuda")
            or "libcuda" in text
            and isinstance(node, ast.Constant)
        ):
            found.append(f"line {node.lineno}: {text}")
        elif isinstance(node, ast.Compare) and any(
            isinstance(side, ast.Attribute) and side.attr == "type" for side in (node.left, *node.comparators)
        ):
            found.append(f"line {node.lineno}: {text}")
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "startswith"
            and any(isinstance(a, ast.Constant) and str(a.value).startswith("cuda") for a in node.args)
        ):
            found.append(f"line {node.lineno}: {text}")
    return found


def test_nothing_nvidia_specific_is_assumed_outside_the_backend() -> None:
    """The supervisor, the worker, the session, the timer and the rest ask the run's backend;
    only the NVIDIA backend's own modules (backend.NVIDIA_PIECES) touch CUDA."""
    assert {"supervisor.py", "worker.py", "session.py", "timing.py", "measure.py", "started.py"} <= {
        p.name for p in GENERIC
    }
    offending = {p.name: where for p in GENERIC if (where := _device_specific(ast.parse(p.read_text())))}
    assert offending == {}
    # and the scan does find what it looks for
    assert _device_specific(
        ast.parse("if device.type == 'cuda' or name.startswith('cuda'):\n    torch.cuda.synchronize(device)")
    ) == [
        "line 1: device.type == 'cuda'",
        "line 1: name.startswith('cuda')",
        "line 2: torch.cuda.synchronize",
        "line 2: torch.cuda",
    ]


class RecordingCaches(ColdCaches):
    eviction = "a stand-in sweep"

    def __init__(self, log: list[str]):
        self.log = log

    def evict(self) -> None:
        self.log.append("evict")

    def settle(self) -> None:
        self.log.append("settle")


class RecordingBackend(CpuBackend):
    """The CPU, with every step the run asks of its backend written down: what a third
    vendor's backend would be called for."""

    name = "recording"

    def __init__(self) -> None:
        self.log: list[str] = []

    def activate(self, device: torch.device) -> None:
        self.log.append("activate")

    def synchronize(self, device: torch.device) -> None:
        self.log.append("sync")

    def timing_method(self, asked: str | None, image: bytes | None = None) -> str:
        self.log.append("timing_method")
        return super().timing_method(asked, image)

    def cold_caches(self, device: torch.device, icache: bool, image: bytes | None) -> ColdCaches:
        self.log.append("cold_caches")
        return RecordingCaches(self.log)

    def input_budget(self, device: torch.device) -> InputBudget:
        self.log.append("input_budget")
        return InputBudget(1 << 20, 3)

    def describe(self, device: torch.device, state: dict | None = None) -> Environment:
        self.log.append("describe")
        return super().describe(device, state).model_copy(update={"device_name": "a stand-in device"})

    def finish(self, env: Environment | None, device: torch.device) -> None:
        self.log.append("finish")


def test_the_timer_takes_every_device_step_from_its_backend() -> None:
    backend = RecordingBackend()
    timer = Timer(torch.device("cpu"), backend=backend)
    assert (timer.method, timer.eviction) == ("cpu-perf-counter", "a stand-in sweep")
    backend.log.clear()
    timer.run_block(lambda i: backend.log.append("call"), 2)
    assert backend.log == ["evict", "settle", "sync", "call", "sync"] * 2
    backend.log.clear()
    timer.run_block(lambda i: backend.log.append("call"), 1, evict=False)  # the audit's block: no sweep
    assert backend.log == ["settle", "sync", "call", "sync"]

    class OwnMethod(RecordingBackend):
        def time_block(self, timer, call, n, prepare, after) -> BlockSamples:
            return BlockSamples(device_ns=[7] * n, e2e_ns=[9] * n, method="the device's own")

    assert Timer(torch.device("cpu"), backend=OwnMethod()).run_block(lambda i: None, 2) == BlockSamples(
        device_ns=[7, 7], e2e_ns=[9, 9], method="the device's own"
    )


@pytest.mark.harness
def test_the_supervisor_goes_through_the_backend(monkeypatch) -> None:
    """A whole run judged with a stand-in backend: the run's device steps are its."""
    backend = RecordingBackend()
    monkeypatch.setattr(supervisor_module, "backend_for", lambda device: backend)
    record = judge("level1/softmax", EXAMPLES / "softmax" / "pytorch.py", mode="benchmark", workloads=["small-64x1000"])
    assert record.status.value == "PASSED", record.reason
    assert record.environment.device_name == "a stand-in device"
    assert record.environment.timer_eviction == "a stand-in sweep"
    steps = set(backend.log)
    assert {
        "activate",
        "describe",
        "timing_method",
        "cold_caches",
        "input_budget",
        "evict",
        "settle",
        "sync",
        "finish",
    } <= steps
    assert backend.log.index("activate") < backend.log.index("describe") < backend.log.index("cold_caches")
    assert backend.log[-1] == "finish"


def test_input_sets_fill_the_budget_and_reach_a_few_where_there_is_room():
    """count_sets: the budget's sets up to its most; large sets stretch into the room up to
    FEW_SETS (so the rounds stop with the device audit's)."""
    from gpuarena.harness.session import FEW_SETS, count_sets

    gib = 1 << 30
    gpu = InputBudget(2 * gib, 16, room=12 * gib)
    assert count_sets(gpu, 512 << 20) == 4 + 1 == FEW_SETS  # 4 in the budget, one more from the room
    assert count_sets(gpu, gib) == FEW_SETS  # a 65536 x 2048 float32 softmax: was 2
    assert count_sets(InputBudget(2 * gib, 16, room=3 * gib), gib) == 3  # as many as the room holds
    assert count_sets(InputBudget(2 * gib, 16), 3 * gib) == 2  # never fewer than two
    assert count_sets(gpu, 64 << 20) == count_sets(gpu, 1000) == 16  # the cap
    assert count_sets(InputBudget(256 << 20, 8), 1000) == 8


def test_small_sets_on_a_gpu_are_many_so_a_request_outweighs_its_fixed_costs():
    """A GPU's budget (NvidiaBackend.input_budget) takes 64 sets where they are small, as many
    as fill SMALL_SETS_BYTES: GPU MODE's vectoradd at 1024 x 1024 (4 MiB a set) gets 64 calls a
    request instead of 16, and a request streams its sets past L2 without the sweeps."""
    from gpuarena.harness.device.nvidia import SMALL_SETS_BYTES
    from gpuarena.harness.session import count_sets

    gib, mib = 1 << 30, 1 << 20
    gpu = InputBudget(2 * gib, 16, room=12 * gib, block_bytes=SMALL_SETS_BYTES, many=64)
    assert count_sets(gpu, 4 * mib) == count_sets(gpu, 1000) == 64
    assert count_sets(gpu, 8 * mib) == 32 and count_sets(gpu, 16 * mib) == count_sets(gpu, 64 * mib) == 16
    assert count_sets(gpu, gib) == 5  # large sets as before


def test_small_sets_on_the_host_are_many_so_a_blocks_first_call_weighs_little():
    """The CPU's budget asks for blocks of 8 MiB of small sets, up to 64: the worker's first
    call after waking costs 50-250 µs more on the 2-core VM, and a block's mean counts it."""
    from gpuarena.harness.device.backend import CPU
    from gpuarena.harness.session import count_sets

    cpu = CPU.input_budget(torch.device("cpu"))
    assert count_sets(cpu, 3 << 10) == 64  # a 1 x 256 RMSNorm's set: the most
    assert count_sets(cpu, 200 << 10) == 40  # 100 x 256: 8 MiB of them
    assert count_sets(cpu, 2 << 20) == count_sets(cpu, 16 << 20) == 8  # large sets: the usual budget
    assert count_sets(cpu, 200 << 20) == 2


def test_the_supervisor_chooses_the_timing_method_and_a_worker_that_cannot_follow_fails_the_machine() -> None:
    """The method for both sides is the supervisor's (its options, then the backend): the
    worker's harness says what its timer does in its `prepare` reply, before any solution code
    runs; a worker that cannot time that way is the machine's failure, and never changes the
    method the reference is timed with."""
    problem = resolve_problem("level1/softmax")
    solution = load_solution(EXAMPLES / "softmax" / "pytorch.py")
    supervisor = supervisor_module.Supervisor(problem, solution, RunOptions(device="cpu"))
    assert supervisor._timer(messages.Prepared(method="cpu-perf-counter")).method == "cpu-perf-counter"
    for said in (messages.Prepared(method="cuda-sync-wallclock"), messages.Prepared()):
        with pytest.raises(RunFailure) as failed:
            supervisor._timer(said)
        assert failed.value.status == "RUNTIME_ERROR"
        assert "cannot time with cpu-perf-counter" in failed.value.reason
