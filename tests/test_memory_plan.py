"""A workload's memory is planned before it starts (issue 47): the plan's terms, the sets it
lowers, and a workload that cannot fit ends with a reason (Status.ERROR, no verdict on the
solution) before any timing, as does the supervisor running out of memory while it draws."""

from __future__ import annotations

import itertools
import re

import pytest
import torch

from conftest import EXAMPLES, judge
from gpuarena.harness import held_memory, memory_plan
from gpuarena.harness.compare import CHUNK
from gpuarena.harness.device.backend import CPU, CpuBackend, host_meminfo
from gpuarena.harness.measure import CHECKED_PER_BLOCK
from gpuarena.harness.memory_plan import CHUNK_ARRAYS, GIB, fit, plan, refusal
from gpuarena.harness.session import WorkloadSession

MIB = 1 << 20


def test_the_timed_plan_counts_every_term():
    p = plan(100 * MIB, 50 * MIB, 4, 100 * GIB, 100 * GIB, timed=True, twins=2, output_elements=1000, scratch=MIB)
    assert p.phase == "timing" and p.n_sets == 4
    assert p.terms == {
        "sets": 400 * MIB,
        "destinations": 200 * MIB,
        "private copies": 500 * MIB,  # one per set, and the draw that replaces one
        "reference outputs": 50 * MIB,
        "commit copies": CHECKED_PER_BLOCK * 50 * MIB,
        "twins' destinations": 2 * 5 * 50 * MIB,
        "supervisor's temporaries": MIB,
        "worker's temporaries": MIB,  # the solution's own, in the worker on the same device: the reference's again
        "comparison chunks": CHUNK_ARRAYS * 8 * 1000,
        "worker's outputs": 50 * MIB,
    }
    assert p.peak == sum(p.terms.values())
    assert p.headroom == 5 * GIB  # 5% of the total
    assert p.fits


def test_the_worker_is_charged_the_reference_s_temporaries_not_the_drawing_s():
    """The supervisor draws again in the timed rounds, so its temporaries are the larger of the
    draw's and the reference call's; the worker draws nothing (stop 70: a bf16 expert tensor drawn
    in float32 put 42.90 GiB on the worker's side of DeepSeek-V3's plan)."""
    p = plan(GIB, GIB, 1, 200 * GIB, 200 * GIB, scratch=40 * GIB, worker_scratch=2 * GIB)
    assert p.terms["supervisor's temporaries"] == 40 * GIB and p.terms["worker's temporaries"] == 2 * GIB
    assert plan(GIB, GIB, 1, 200 * GIB, 200 * GIB, scratch=3 * GIB).terms["worker's temporaries"] == 3 * GIB


@pytest.mark.harness
def test_the_plan_reads_the_drawing_s_and_the_call_s_temporaries_apart(monkeypatch):
    """Measured where the device counts them (CUDA's allocator; 0 on the host): the first reading
    is the draw's, the second the reference call's, and the refusal names both terms."""
    readings = itertools.cycle([8 * GIB, GIB])  # each workload's draw, then its reference's call
    monkeypatch.setattr(memory_plan, "scratch", lambda device: next(readings))
    monkeypatch.setattr(memory_plan, "free_memory", lambda device: (64 * MIB, 2 * GIB))
    record = judge("level1/softmax", SOFTMAX, mode="benchmark", workloads=SMALL)
    assert record.workloads, record.reason
    reason = record.workloads[0].reason
    assert record.status == "ERROR" and reason.startswith("too large for cpu"), reason
    assert "supervisor's temporaries 8.00 GiB" in reason and "worker's temporaries 1.00 GiB" in reason, reason


def test_an_untimed_plan_is_the_correctness_trials_alone():
    p = plan(100, 50, 1, GIB, GIB, timed=False, worker_outputs=False)
    assert p.phase == "correctness"
    assert p.terms["drawn inputs"] == 200 and p.terms["reference outputs"] == 100
    assert p.terms["worker's outputs"] == 0  # the destination convention: the worker writes the shared buffers
    assert p.terms["comparison chunks"] == CHUNK_ARRAYS * 8 * CHUNK  # no size given: a whole chunk
    assert "private copies" not in p.terms and "twins' destinations" not in p.terms
    assert p.headroom == memory_plan.HEADROOM_LEAST


def test_fewer_sets_where_fewer_fit_and_none_where_one_does_not():
    def planned(free: int):
        return lambda n: plan(GIB, GIB, n, free, 100 * GIB, twins=1, output_elements=1 << 28)

    wide = fit(8, planned(1000 * GIB))
    assert wide.n_sets == 8 and wide.fits
    lowered = fit(8, planned(30 * GIB))
    assert 1 < lowered.n_sets < 8 and lowered.fits
    assert not plan(GIB, GIB, lowered.n_sets + 1, 30 * GIB, 100 * GIB, twins=1, output_elements=1 << 28).fits
    none = fit(8, planned(5 * GIB))
    assert none.n_sets == 1 and not none.fits


def test_the_refusal_names_the_bytes_needed_and_the_memory_free():
    p = plan(GIB, GIB, 1, 3 * GIB, 80 * GIB, twins=3)
    assert not p.fits
    reason = refusal(p, torch.device("cuda:0"))
    assert reason.startswith("too large for cuda:0: even with one input set")
    assert f"{p.peak / GIB:.2f} GiB" in reason and "3.00 GiB of 80.00 GiB is free" in reason
    assert "twins' destinations" in reason and "no verdict on the solution" in reason


def test_running_out_of_memory_is_told_apart():
    assert memory_plan.out_of_memory(torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 6.00 GiB"))
    assert memory_plan.out_of_memory(MemoryError())
    assert memory_plan.out_of_memory(RuntimeError("DefaultCPUAllocator: can't allocate memory: you tried to ..."))
    assert memory_plan.out_of_memory(RuntimeError("cuMemCreate failed: CUDA error 2 (out of memory)"))
    assert not memory_plan.out_of_memory(RuntimeError("shape mismatch"))
    assert not memory_plan.out_of_memory(ValueError("out of memory"))


def test_the_host_s_free_memory_is_read():
    free, total = memory_plan.free_memory(torch.device("cpu"))
    assert 0 < free <= total
    free, total = host_meminfo()
    assert 0 < free <= total


SOFTMAX = EXAMPLES / "softmax" / "pytorch.py"
SMALL = ["small-64x1000"]


@pytest.mark.harness
def test_a_workload_that_cannot_fit_says_so_before_it_starts(monkeypatch):
    monkeypatch.setattr(memory_plan, "free_memory", lambda device: (64 * MIB, 2 * GIB))
    record = judge("level1/softmax", SOFTMAX, mode="benchmark", workloads=SMALL)
    assert record.status == "ERROR", record.reason
    workload = record.workloads[0]
    assert workload.status == "ERROR"
    assert workload.reason.startswith("too large for cpu: even with one input set the supervisor needs")
    assert "0.06 GiB of 2.00 GiB is free" in workload.reason
    assert workload.trials == 0 and workload.time is None  # nothing ran: no trial, no timing
    assert "too large for cpu" in record.log


@pytest.mark.harness
def test_fewer_sets_where_fewer_fit(monkeypatch):
    rows, cols = 64, 1000
    in_bytes = out_bytes = rows * cols * 4
    total = 2 * GIB
    two = plan(in_bytes, out_bytes, 2, 0, total, twins=1, output_elements=rows * cols)
    # room for two sets and not three (the first trial's inputs and outputs are counted back in)
    free = two.peak + two.headroom - in_bytes - out_bytes
    monkeypatch.setattr(memory_plan, "free_memory", lambda device: (free, total))
    record = judge("level1/softmax", SOFTMAX, mode="benchmark", workloads=SMALL, budget_s=0.2)
    assert record.status == "PASSED", record.reason
    wanted = re.search(r"small-64x1000: 2 input set\(s\), not (\d+)", record.log)
    assert wanted and int(wanted.group(1)) >= 8, record.log[-2000:]
    assert record.workloads[0].time is not None


@pytest.mark.harness
def test_running_out_of_memory_in_the_reference_is_a_reason_not_a_crash(monkeypatch):
    def out_of_memory(self, inputs, seed=None):
        raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 6.00 GiB")

    monkeypatch.setattr(WorkloadSession, "reference", out_of_memory)
    record = judge("level1/softmax", SOFTMAX, workloads=SMALL)
    assert record.status == "ERROR", record.reason
    reason = record.workloads[0].reason
    assert reason.startswith("the supervisor ran out of memory on cpu running the reference (OutOfMemoryError: ")
    assert "Tried to allocate 6.00 GiB" in reason and "free after it" in reason
    assert record.workloads[0].trials == 0


HOLDER = """
import torch

HELD = torch.ones({n}, dtype=torch.uint8)  # kept for the whole run, every page touched


def solve(x):
    return torch.softmax(x, dim=-1)
"""


@pytest.mark.harness
def test_a_solution_that_holds_the_memory_its_workload_needs_is_rejected(monkeypatch, tmp_path):
    # the same shortage as above, but the worker keeps 768 MiB past a (lowered) allowance of
    # 512: read from outside, it is the solution's doing, and so a verdict, not ERROR
    monkeypatch.setattr(memory_plan, "free_memory", lambda device: (64 * MIB, 2 * GIB))
    monkeypatch.setattr(CpuBackend, "worker_allowance", 512 * MIB)
    holder = tmp_path / "holder.py"
    holder.write_text(HOLDER.format(n=768 * MIB))
    record = judge("level1/softmax", holder, mode="benchmark", workloads=SMALL)
    assert record.status == "REJECTED", record.reason
    reason = record.workloads[0].reason
    assert reason.startswith("the solution's process holds "), reason
    assert "more than the 0.50 GiB a worker may keep for itself" in reason
    assert "too large for cpu" in reason and "read from outside the worker" in reason
    # the honest solution, under the same shortage and allowance, is still the machine's problem
    honest = judge("level1/softmax", SOFTMAX, mode="benchmark", workloads=SMALL)
    assert honest.status == "ERROR", honest.reason
    assert "the worker holds 0." in honest.workloads[0].reason


def test_whose_shortage_it_is():
    short = plan(MIB, MIB, 1, 0, 2 * GIB)  # needs peak + headroom, none free
    need = short.peak + short.headroom
    drawn = memory_plan.Drawn(reason="too large", plan=short)
    allowance = GIB
    assert not held_memory.solution_took_it(None, allowance, drawn)  # unreadable: not blamed
    assert not held_memory.solution_took_it(allowance, allowance, drawn)  # within its allowance
    assert not held_memory.solution_took_it(allowance + need - 1, allowance, drawn)  # would not have fit anyway
    assert held_memory.solution_took_it(allowance + need, allowance, drawn)
    # out of memory before a plan: any holding past the allowance is the solution's
    assert held_memory.solution_took_it(allowance + 1, allowance, memory_plan.Drawn(reason="ran out"))


def test_a_process_s_private_memory_is_read_from_proc():
    import os

    mine = CPU.held_by({os.getpid()})
    assert mine is not None and mine > 10 * MIB  # this interpreter with torch loaded
    assert CPU.held_by({2**22 + 12345}) is None  # no such process
