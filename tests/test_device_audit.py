"""The device audit's parts that run without a GPU: its thresholds, the sampler's protocol
(against a stand-in process speaking it), and the build's refusal without a CUDA toolkit.
The sampler's build is tested in test_cupti_build.py; the sampler itself and the audit end to end run on an NVIDIA GPU (tests/gpu, the red-team's
fake_results/patched_reply_function)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from conftest import EXAMPLES, SOLUTIONS, judge
from gpuarena.contracts import messages
from gpuarena.harness.device import device_audit
from gpuarena.harness.device.backend import CpuBackend
from gpuarena.harness.device.device_audit import DeviceSampler, SamplerError, Window

STAND_IN = """#!{python}
import json, sys
traffic = sys.argv[5] if len(sys.argv) > 5 else ""
chosen = "dram__bytes_read.sum" if "dram__bytes_read.sum" in traffic.split(",") else ""
print(json.dumps({{"ready": True, "chip": "TEST", "traffic": chosen, "traffic_error": "" if chosen else "not here"}}),
      flush=True)
sampling, marks = False, 0
for line in sys.stdin:
    command = line.strip()
    if command == "quit":
        break
    if command == "start":
        if sampling:
            print(json.dumps({{"error": "start while sampling"}}), flush=True)
            sys.exit(1)
        sampling, marks = True, 0
        print(json.dumps({{"started": True}}), flush=True)
    elif command in ("mark", "stop"):
        if not sampling:
            print(json.dumps({{"error": command + " without start"}}), flush=True)
            sys.exit(1)
        marks += command == "mark"
        sampling = command == "mark"
        if marks > {good_marks}:
            print(json.dumps({{"error": "cuptiPmSamplingDecodeData: CUPTI_ERROR_OUT_OF_MEMORY"}}), flush=True)
            if {dies}:
                sys.exit(1)
            continue
        # cumulative, as the real one: 4000 ns busy and 10000 ns of span more at every mark
        print(json.dumps({{"busy_ns": 4000 * marks, "span_ns": 10000 * marks, "samples": 3 * marks,
                          "overflow": 0, "read_bytes": 5e6 * marks if chosen else -1}}), flush=True)
"""


def _plain(request: messages.Time) -> bool:
    """A timed block of the rounds: no warm-up calls, the caches swept, no kernel profiler."""
    return not request.warmup and request.evict and request.kernel_library is None


def stand_in(tmp_path: Path, good_marks: int = 100, dies: bool = False) -> Path:
    path = tmp_path / "sampler"
    path.write_text(STAND_IN.format(python=sys.executable, good_marks=good_marks, dies=dies))
    path.chmod(0o755)
    return path


def test_a_claim_under_the_margin_of_what_the_gpu_saw_is_understated():
    assert device_audit.understated(1.5, 4.66)  # patched_reply_function on an H100
    assert not device_audit.understated(2.05, 1.46)  # the Triton softmax example on the same workload
    floor = device_audit.FLOOR_US  # the counters' own scatter on kernels of a few µs
    assert not device_audit.understated(0.7 * (10.0 - floor), 10.0)
    assert device_audit.understated(0.69 * (10.0 - floor), 10.0)


def test_what_the_audit_adds_to_the_reference_is_allowed_to_the_solution():
    # the Triton example on square-8192 (H100): 85 µs claimed, 107 observed without the sweep;
    # a solution twice as fast with the same write-backs would fail without the allowance
    assert device_audit.understated(42.0, 64.0)
    assert not device_audit.understated(42.0, 64.0, inflation_us=device_audit.inflation(130.0, 108.0))
    assert device_audit.inflation(130.0, 108.0) == 22.0
    assert device_audit.inflation(1.2, 2.0) == 0.0  # the counters may read under CUPTI: never a penalty
    assert device_audit.inflation(None, 2.0) == 0.0 and device_audit.inflation(3.0, None) == 0.0
    # a forged claim stays caught where the reference's calls gain little (patched_reply_function)
    assert device_audit.understated(1.5, 3.98, inflation_us=device_audit.inflation(2.3, 2.1))
    assert device_audit.understated(1.0, 10.0, inflation_us=20.0) is False  # all of it allowed: nothing to check


def test_the_observed_figure_s_error_is_allowed_for():
    """The audit judges a small difference of large busy times (the harness's sweeps): the
    error of the medians, from their spread, is taken off before the check."""
    assert device_audit.median_error([1.0]) == 0.0 and device_audit.median_error([5.0] * 8) == 0.0
    assert 0 < device_audit.median_error([10, 11, 9, 10, 12, 8, 10, 10]) < 1
    assert device_audit.median_error([10] * 5 + [1000] * 3) == 0  # fewer than half cannot move it
    # an honest Triton softmax on an H100, judged on 2 requests: 2.11 claimed, 3.68 observed
    assert device_audit.understated(2.11, 4.68) and not device_audit.understated(2.11, 4.68, noise_us=0.3)
    assert not device_audit.understated(2.11, 3.68)  # within the floor of the counters' scatter
    # an honest 1.38 µs addcmul read at 3.07 ± 0.32 on an H200 passes; a forged 1.5 for a 4.3 µs
    # softmax read at 5.32 ± 0.37 (H100) is still caught, one read at 3.67 no longer is
    assert not device_audit.understated(1.38, 3.07, noise_us=0.32)
    assert device_audit.understated(1.5, 5.32, inflation_us=0.3, noise_us=0.37)
    assert not device_audit.understated(1.5, 3.67, noise_us=0.36)


def test_a_gpu_busy_before_the_audit_is_shared():
    assert device_audit.shared(Window(busy_ns=200, span_ns=10_000, samples=10, overflow=False))
    assert not device_audit.shared(Window(busy_ns=50, span_ns=10_000, samples=10, overflow=False))
    assert not device_audit.shared(Window(busy_ns=0, span_ns=0, samples=0, overflow=False))


def test_segments_are_differences_of_marks_and_come_back_with_the_work_s_result(tmp_path):
    sampler = DeviceSampler(stand_in(tmp_path), 0)
    try:
        assert sampler.chip == "TEST"
        with sampler.sampling():
            result, window = sampler.segment(lambda: "done")
            assert result == "done"
            assert window == Window(busy_ns=4000, span_ns=10000, samples=3, overflow=False, read_bytes=5e6)
            assert sampler.idle(0.001).busy_ns == 4000
            assert sampler.mark().busy_ns == 5 * 4000  # four marks for two segments, and this one
        with sampler.sampling():  # stopped on the way out, so it starts again
            assert sampler.mark().busy_ns == 4000
    finally:
        sampler.close()
    assert sampler.process.poll() == 0


def test_a_chained_segment_starts_at_the_mark_that_ended_the_last_one(tmp_path):
    """Back-to-back segments share a mark: one mark more per segment instead of two, and
    nothing between them is lost or counted twice."""
    sampler = DeviceSampler(stand_in(tmp_path), 0)
    try:
        with sampler.sampling():
            _, first = sampler.segment(lambda: None)  # marks 1 and 2
            _, second = sampler.segment(lambda: None, chained=True)  # from mark 2 to mark 3
            assert first.busy_ns == second.busy_ns == 4000
            assert sampler.mark().busy_ns == 4 * 4000  # three marks for two segments, and this one
            _, third = sampler.segment(lambda: None)  # not chained: marks 5 and 6
            assert third.busy_ns == 4000 and sampler.last is not None and sampler.last.busy_ns == 6 * 4000
        assert sampler.last is None  # sampling stopped: no chain across it
        with sampler.sampling():
            _, window = sampler.segment(lambda: None, chained=True)  # nothing to chain to: marks of its own
            assert window.busy_ns == 4000
    finally:
        sampler.close()


def test_the_traffic_counter_is_the_first_the_chip_reads_or_none_with_the_reason(tmp_path, monkeypatch):
    sampler = DeviceSampler(stand_in(tmp_path), 0)
    try:
        assert sampler.traffic == "dram__bytes_read.sum" and not sampler.traffic_missing
    finally:
        sampler.close()
    monkeypatch.setenv("GPUARENA_AUDIT_TRAFFIC", "lts__t_bytes.sum")  # one this chip does not read
    sampler = DeviceSampler(stand_in(tmp_path), 0)
    try:
        assert sampler.traffic == "" and "lts__t_bytes.sum" in sampler.traffic_missing
        assert "not here" in sampler.traffic_missing
        with sampler.sampling():
            assert sampler.segment(lambda: None)[1].read_bytes is None  # -1 from the sampler: no figure
    finally:
        sampler.close()
    monkeypatch.setenv("GPUARENA_AUDIT_TRAFFIC", "")
    sampler = DeviceSampler(stand_in(tmp_path), 0)
    try:
        assert sampler.traffic == "" and "turned off" in sampler.traffic_missing
    finally:
        sampler.close()


def test_sampling_stops_when_the_work_fails_and_the_work_s_error_wins(tmp_path):
    sampler = DeviceSampler(stand_in(tmp_path, good_marks=1), 0)
    try:

        def failing_request():
            raise ValueError("the worker's own failure")

        with pytest.raises(ValueError, match="own failure"):
            with sampler.sampling():
                sampler.segment(failing_request)
        with pytest.raises(SamplerError, match="OUT_OF_MEMORY"):  # the sampler's own error, after it
            with sampler.sampling():
                sampler.segment(lambda: None)
        with sampler.sampling():  # and it carries on: a failed window does not end it
            pass
    finally:
        sampler.close()
    assert sampler.process.poll() == 0


def test_a_sampler_that_died_is_reported_as_gone(tmp_path):
    sampler = DeviceSampler(stand_in(tmp_path, good_marks=0, dies=True), 0)
    try:
        with pytest.raises(SamplerError, match="OUT_OF_MEMORY"):
            with sampler.sampling():
                sampler.mark()
        with pytest.raises(SamplerError, match="gone|exited"):
            with sampler.sampling():
                pass
    finally:
        sampler.close()


def test_a_sampler_that_cannot_start_says_why(tmp_path):
    broken = tmp_path / "broken"
    broken.write_text(f'#!{sys.executable}\nprint(\'{{"error": "cuptiPmSamplingEnable: not supported"}}\')\n')
    broken.chmod(0o755)
    with pytest.raises(SamplerError, match="not supported"):
        DeviceSampler(broken, 0)


def test_the_run_s_summary_says_what_the_audit_checked_or_why_it_did_not():
    from gpuarena.cli.render import _audit_summary
    from gpuarena.contracts.records import DeviceAudit, Evaluation, Status, WorkloadResult

    record = Evaluation(
        status=Status.PASSED,
        problem="level1/softmax",
        solution_hash="0" * 12,
        solution_name="s",
        language="triton",
        device="cuda:0",
        mode="benchmark",
        started_at="2026-11-23T00:00:00+00:00",
    )
    record.workloads = [
        WorkloadResult(
            name="a",
            status=Status.PASSED,
            device_audit=DeviceAudit(calls=32, observed_us_per_call=1.46, claimed_us=2.05, margin=0.7),
        )
    ]
    assert "1 workload(s) checked" in _audit_summary(record) and "1.40" in _audit_summary(record)
    record.workloads[0].device_audit.observed_us_per_call, record.workloads[0].device_audit.inflation_us = 4.05, 2.0
    assert "lowest claimed / observed 1.00" in _audit_summary(record)  # 2.05 / (4.05 - 2.0)
    record.workloads[0].device_audit.read_mb_per_call = 0.4  # the sweeps' reads, checked
    assert "cache sweeps read as in the harness alone, within +0.4 MB a call" in _audit_summary(record)
    record.workloads[0].device_audit.read_mb_per_call = None
    record.workloads[0].device_audit.traffic_skipped = "the chip reads none of them"
    assert "reads not checked (the chip reads none of them)" in _audit_summary(record)
    record.workloads = [
        WorkloadResult(
            name="a", status=Status.PASSED, device_audit=DeviceAudit(skipped="turned off (GPUARENA_DEVICE_AUDIT=0)")
        )
    ]
    assert _audit_summary(record) == "device audit: skipped (turned off (GPUARENA_DEVICE_AUDIT=0))"
    record.workloads = [WorkloadResult(name="a", status=Status.PASSED)]  # the CPU: no audit, no line
    assert _audit_summary(record) == ""


class LazyWindow:
    """A planned window the audit may use only once the stand-in's `read_pending` read it."""

    def __init__(self, window: Window, what: str):
        self.window, self.what, self.ready = window, what, False

    @property
    def busy_ns(self) -> float:
        assert self.ready, f"{self.what}'s window used before it was read"
        return self.window.busy_ns

    @property
    def read_bytes(self) -> float | None:
        assert self.ready, f"{self.what}'s window used before it was read"
        return self.window.read_bytes


class PlannedSampler:
    """A stand-in for the PM sampler in a real run on the CPU: each segment reports the busy
    time planned for what it samples (by the name the audit gives it; a function of how many
    of those came before it, for drift), so the audit's flow and
    verdicts are tested, not the GPU. It records what it sampled, in order."""

    plan: dict[str, float] = {}
    reads: dict[str, float] = {}
    """Bytes read from device memory planned per segment, as the busy time (absent: 0);"""
    traffic = "dram__bytes_read.sum"
    """'' for a chip without a traffic counter."""
    seen: list[str] = []
    states: list[str] = []
    chained: list[bool] = []
    """Per segment in `seen`: whether it was chained to the one before."""

    def __init__(self, binary: Path, index: int):
        self.calibrated, self.pending = False, []
        self.chip = "TEST"
        self.traffic_missing = "" if self.traffic else "the chip reads none of them (test)"

    running = False

    def windows_read(self) -> str:
        return "marks: a stand-in's"

    def start(self) -> None:
        PlannedSampler.states.append("start")
        self.running = True

    def stop(self) -> None:
        PlannedSampler.states.append("stop")
        self.running = False

    lazy = False
    """True: segments after a calibration come back as spans (LazyWindow) whose figures may only
    be used once `read_pending` was called after them, as a real sampler's are read by instants."""
    reads_of_pending: list[int] = []
    """How many spans each `read_pending` read (lazy only)."""

    def segment(self, work, what: str = "a segment", chained: bool = False):
        assert PlannedSampler.states[-1:] == ["start"], "sampled while sampling was off"
        PlannedSampler.chained.append(chained)
        result = work()
        planned = self.plan.get(what, 0.0)
        busy = planned(PlannedSampler.seen.count(what)) if callable(planned) else planned
        PlannedSampler.seen.append(what)
        read = self.reads.get(what, 0.0) if self.traffic else None
        window = Window(busy_ns=busy, span_ns=1e6, samples=8, overflow=False, read_bytes=read)
        if self.lazy and self.calibrated:
            span = LazyWindow(window, what)
            self.pending.append(span)
            return result, span
        return result, window

    def idle(self, seconds: float = 0.005):
        window = self.segment(lambda: None, "an idle GPU")[1]
        if isinstance(window, LazyWindow):  # read at once, as DeviceSampler.idle does
            self.read_pending()
            return window.window
        return window

    def calibrate(self, burst) -> bool:
        """No GPU to spin here: lazy stand-ins count themselves calibrated, the others read at once, as by marks."""
        self.calibrated, self.pending = self.lazy, []
        return self.lazy

    def read_pending(self) -> None:
        if self.lazy and self.pending:
            PlannedSampler.reads_of_pending.append(len(self.pending))
            for span in self.pending:
                span.ready = True
            self.pending = []

    def close(self, wait: bool = True) -> None:
        pass


from gpuarena.harness.rounds_audit import (  # noqa: E402
    FEW_REQUESTS,
    HARNESS,
    MIN_REQUESTS,
    REFERENCE,
    REFERENCE_HARNESS,
    REFERENCE_TWIN,
    SOLUTION,
    TWIN_BLOCKS,
)


@pytest.fixture
def audited_on_the_cpu(tmp_path, monkeypatch):
    """The whole audit in a real run (supervisor, worker, twins, checks) on the CPU, with the
    planned stand-in sampler: run(plan) -> (record, the first workload's audit)."""
    monkeypatch.setattr(device_audit, "build_sampler", lambda: (tmp_path / "planned", ""))
    monkeypatch.setattr(device_audit, "DeviceSampler", PlannedSampler)
    monkeypatch.setattr(CpuBackend, "device_audit", True)  # the stand-in sampler reads "the device"
    monkeypatch.setenv("GPUARENA_DEVICE_AUDIT", "1")
    from gpuarena.harness import rounds_audit

    monkeypatch.setattr(rounds_audit, "UNSWEPT_UNDER_US", 0.0)  # the unswept requests: their own tests

    def run(
        plan: dict[str, float],
        problem: str = "level1/softmax",
        solution: Path = EXAMPLES / "softmax" / "pytorch.py",
        reads: dict[str, float] | None = None,
    ):
        PlannedSampler.plan, PlannedSampler.seen, PlannedSampler.states, PlannedSampler.chained = plan, [], [], []
        PlannedSampler.reads = reads or {}
        options = {"workloads": ["small-64x1000"]} if problem == "level1/softmax" else {}
        record = judge(problem, solution, mode="benchmark", **options)
        assert record.workloads, (record.status, record.reason, record.log[-3000:])
        return record, record.workloads[0].device_audit

    return run


@pytest.mark.harness
def test_the_audit_passes_a_claim_the_counters_do_not_contradict(audited_on_the_cpu):
    record, audit = audited_on_the_cpu({})
    assert record.status == "PASSED", record.reason
    assert audit.calls > 0 and audit.observed_us_per_call == 0 and audit.inflation_us == 0
    assert audit.claimed_us == record.workloads[0].time.median_us and not audit.skipped
    assert audit.reference_claimed_us == record.workloads[0].reference_time.median_us
    assert PlannedSampler.states[-1] == "stop"
    # the audit's own time (twins, sampler start and stop) is its phase, not the timing's
    assert list(record.phases) == ["start-up", "build", "correctness", "timing", "device audit", "teardown"]
    assert record.phases["device audit"] > 0 and record.phases["timing"] > 0


@pytest.mark.harness
def test_windows_read_by_their_instants_are_read_together_before_any_figure_is_used(audited_on_the_cpu, monkeypatch):
    """With the samples' clock calibrated, a segment's figures are read lazily (device_audit.Span):
    the audit reads every pending one in one request where a decision needs them (about once a
    round), never a figure before its read, and reaches the same verdicts: an honest claim
    passes, one far under what the counters saw is rejected."""
    monkeypatch.setattr(PlannedSampler, "lazy", True)
    PlannedSampler.reads_of_pending = []
    record, audit = audited_on_the_cpu({})
    assert record.status == "PASSED", record.reason
    reads = PlannedSampler.reads_of_pending
    sampled = len(PlannedSampler.seen) - PlannedSampler.seen.count("an idle GPU")
    assert sum(reads) == sampled  # every window read, each once
    assert len(reads) <= len(audit.observed_us_per_request) + 2 and max(reads) >= 3  # together, not one by one
    PlannedSampler.reads_of_pending = []
    record, audit = audited_on_the_cpu({SOLUTION: 1e9})
    assert record.status == "REJECTED" and "counters saw" in record.reason, record.reason


@pytest.mark.harness
def test_samples_lost_to_a_context_elsewhere_get_the_workload_measured_again(audited_on_the_cpu, monkeypatch):
    """A CUDA context made or ended by another process leaves the PM sampler's samples with gaps of
    1-20 ms (bench/research/pm_sample_gaps.py, H200), and a window they leave short is no reading
    of the solution: an honest vectoradd was REJECTED so. The workload is measured afresh once
    (nothing of the first try counts) and the record says why; a loss met again still fails."""
    monkeypatch.setattr(PlannedSampler, "lazy", True)
    read_pending, losses = PlannedSampler.read_pending, [1]

    def losing(self) -> None:
        if losses[0] and self.pending:
            losses[0] -= 1
            self.pending = []
            raise device_audit.SamplesLost("the samples cover 834 µs of 6911 (sampling the reference's timed block)")
        read_pending(self)

    monkeypatch.setattr(PlannedSampler, "read_pending", losing)
    record, audit = audited_on_the_cpu({})
    assert record.status == "PASSED", record.reason
    assert "measured again after:" in audit.windows and "the samples cover 834 µs of 6911" in audit.windows
    # both tries sampled the solution's requests; the figures are the second try's alone
    assert PlannedSampler.seen.count(SOLUTION) > len(audit.observed_us_per_request) >= FEW_REQUESTS
    losses[0] = 2
    record, audit = audited_on_the_cpu({})
    assert record.status == "REJECTED", record.reason
    assert "measured again after the same" in record.reason and "834 µs of 6911" in record.reason


@pytest.mark.harness
def test_every_timed_request_is_audited_and_nothing_else_is_sent(audited_on_the_cpu, monkeypatch):
    """Audited requests are the timed rounds' requests: each of the solution's timed requests
    is a sampled segment, and no request of another kind is sent for the audit."""
    from gpuarena.harness.launch import process

    sent: list[messages.Time] = []
    request = process.WorkerProcess.request

    def spy(self, message, *args, **kwargs):
        if isinstance(message, messages.Time):
            sent.append(message)
        return request(self, message, *args, **kwargs)

    monkeypatch.setattr(process.WorkerProcess, "request", spy)
    record, audit = audited_on_the_cpu({})
    assert record.status == "PASSED", record.reason
    timed = [m for m in sent if m.n]
    assert timed and all(_plain(m) and m.n == timed[0].n for m in timed)
    assert len(timed) >= FEW_REQUESTS  # the rounds go on until the audit has enough
    assert PlannedSampler.seen.count(SOLUTION) == len(timed) == audit.calls // timed[0].n
    assert PlannedSampler.seen.count(REFERENCE) == record.workloads[0].reference_time.samples // timed[0].n
    # on a GPU found quiet first; the twins in the rounds' conditions, from the first round on
    assert PlannedSampler.seen[0] == "an idle GPU"
    assert PlannedSampler.seen.index(REFERENCE_TWIN) < PlannedSampler.seen.index(SOLUTION)
    # one block of the twin, in the first round: nothing in the verdict depends on more
    assert PlannedSampler.seen.count(REFERENCE_TWIN) == 1
    # the harness's block is sampled just before each of the solution's requests: its pair
    pairs = [PlannedSampler.seen[i - 1] for i, what in enumerate(PlannedSampler.seen) if what == SOLUTION]
    assert pairs == [HARNESS] * len(timed) and PlannedSampler.seen.count(HARNESS) == len(timed)
    assert len(audit.observed_us_per_request) == len(timed)
    assert REFERENCE_HARNESS not in PlannedSampler.seen  # softmax's reference and solution both return


@pytest.mark.harness
def test_a_round_s_blocks_are_sampled_back_to_back_and_nothing_else_is_chained(audited_on_the_cpu, monkeypatch):
    """A round's sampled blocks (twins, the harness's block, the solution's request, the
    reference's block) share marks; the first of each round starts afresh, after the inputs'
    refresh (GPU work of the supervisor's), and so does every segment outside the rounds."""
    from gpuarena.harness import measure, rounds_audit

    order: list[str] = []
    refresh, finish, segment = measure.refresh_sets, rounds_audit.RoundsAudit.finish, PlannedSampler.segment

    def noted_refresh(*args, **kwargs):
        order.append("refresh")
        return refresh(*args, **kwargs)

    def noted_finish(self, *args, **kwargs):
        order.append("finish")
        return finish(self, *args, **kwargs)

    def noted_segment(self, work, what="a segment", chained=False):
        order.append(what)
        return segment(self, work, what, chained)

    monkeypatch.setattr(measure, "refresh_sets", noted_refresh)
    monkeypatch.setattr(rounds_audit.RoundsAudit, "finish", noted_finish)
    monkeypatch.setattr(PlannedSampler, "segment", noted_segment)
    record, audit = audited_on_the_cpu({})
    assert record.status == "PASSED", record.reason
    expected: list[bool] = []
    state = None
    for what in order:
        if what in ("refresh", "finish"):
            state = "first" if what == "refresh" else None
        else:
            expected.append(state == "chain")
            state = "chain" if state else None
    assert PlannedSampler.chained == expected
    assert "finish" in order and expected.count(True) >= 2 * FEW_REQUESTS  # the solution's request and one more a round


@pytest.fixture
def unswept_for_every_claim(monkeypatch):
    """The CPU's small softmax claims tens of µs: every claim counts as small here."""
    from gpuarena.harness import rounds_audit

    monkeypatch.setattr(rounds_audit, "UNSWEPT_UNDER_US", 1e12)


@pytest.mark.harness
def test_small_kernels_are_also_sampled_without_the_sweeps(audited_on_the_cpu, unswept_for_every_claim, monkeypatch):
    """After the timed rounds, a claim under UNSWEPT_UNDER_US gets requests of the same calls
    without the cache sweeps, each on fresh inputs, its outputs checked, each paired with the
    harness alone run the same way; nothing else is added. The counters see nothing of them
    here, which cannot reject any claim: they stop after UNSWEPT_FEW."""
    from gpuarena.harness import measure
    from gpuarena.harness.launch import process
    from gpuarena.harness.rounds_audit import UNSWEPT, UNSWEPT_FEW, UNSWEPT_HARNESS

    sent: list[messages.Time] = []
    events: list[str] = []
    request, refresh, check = process.WorkerProcess.request, measure.refresh_sets, measure.check_outputs

    def spy(self, message, *args, **kwargs):
        if isinstance(message, messages.Time) and message.n:
            sent.append(message)
            events.append("unswept" if not message.evict else "timed")
        return request(self, message, *args, **kwargs)

    def noted_refresh(*args, **kwargs):
        events.append("refresh")
        return refresh(*args, **kwargs)

    def noted_check(*args, **kwargs):
        events.append("check")
        return check(*args, **kwargs)

    monkeypatch.setattr(process.WorkerProcess, "request", spy)
    monkeypatch.setattr(measure, "refresh_sets", noted_refresh)
    monkeypatch.setattr(measure, "check_outputs", noted_check)
    record, audit = audited_on_the_cpu({})
    assert record.status == "PASSED", record.reason
    unswept = [m for m in sent if not m.evict]
    assert len(unswept) == UNSWEPT_FEW and all(not m.warmup and m.kernel_library is None for m in unswept)
    assert sent[-UNSWEPT_FEW:] == unswept  # after every timed request
    assert all(_plain(m) for m in sent[:-UNSWEPT_FEW])
    tail = events[events.index("unswept") - 1 :]
    assert tail == ["refresh", "unswept", "check"] * UNSWEPT_FEW  # fresh inputs, outputs checked
    pairs = [PlannedSampler.seen[i - 1] for i, what in enumerate(PlannedSampler.seen) if what == UNSWEPT]
    assert pairs == [UNSWEPT_HARNESS] * UNSWEPT_FEW
    assert len(audit.unswept_per_request) == UNSWEPT_FEW and audit.unswept_us_per_call == 0


@pytest.mark.harness
def test_a_small_claim_under_what_the_counters_saw_back_to_back_is_rejected(
    audited_on_the_cpu, unswept_for_every_claim
):
    """The swept requests read nothing unusual; the same calls without the sweeps read far more than
    the claim: REJECTED on the unswept figure. The harness's own share is taken off it."""
    from gpuarena.harness import rounds_audit
    from gpuarena.harness.rounds_audit import UNSWEPT, UNSWEPT_HARNESS

    record, audit = audited_on_the_cpu({UNSWEPT: 1e9})
    assert record.status == "REJECTED" and "run one by one without the cache sweeps" in record.reason
    assert audit.unswept_us_per_call > 1e4 and audit.observed_us_per_call == 0
    # figures that contradict the claim: no early end
    assert len(audit.unswept_per_request) == rounds_audit.UNSWEPT_REQUESTS
    record, audit = audited_on_the_cpu({UNSWEPT: 1e9, UNSWEPT_HARNESS: 1e9})
    assert record.status == "PASSED", record.reason
    assert audit.unswept_us_per_call == 0


@pytest.mark.harness
def test_large_claims_get_no_unswept_requests(audited_on_the_cpu, monkeypatch):
    from gpuarena.harness import rounds_audit

    monkeypatch.setattr(rounds_audit, "UNSWEPT_UNDER_US", 0.0)
    record, audit = audited_on_the_cpu({rounds_audit.UNSWEPT: 1e9})
    assert record.status == "PASSED", record.reason
    assert rounds_audit.UNSWEPT not in PlannedSampler.seen and audit.unswept_us_per_call is None


@pytest.mark.harness
def test_the_audit_rejects_a_claim_far_under_what_the_counters_saw(audited_on_the_cpu):
    record, audit = audited_on_the_cpu({SOLUTION: 1e9})  # a second of SM time per request
    assert record.status == "REJECTED"
    assert "below what the GPU's own counters saw" in record.reason
    assert audit.observed_us_per_call > 1e4 and audit.inflation_us == 0


@pytest.mark.harness
def test_the_harness_s_share_is_taken_off(audited_on_the_cpu):
    """The sweeps and copies in a timed request are the harness's: what the same code does
    with no solution is taken off (the least busy of its blocks)."""
    record, audit = audited_on_the_cpu({SOLUTION: 1e9, HARNESS: 1e9})
    assert record.status == "PASSED", record.reason
    assert audit.observed_us_per_call == 0 and audit.harness_us_per_call > 1e4


@pytest.mark.harness
def test_requests_that_skip_the_harness_s_own_work_are_rejected(audited_on_the_cpu):
    """The cache sweeps run in the worker's process: a solution that turns them off times warm
    calls, and its requests show the GPU doing less than the harness alone (the twin, in the
    supervisor, sweeps). Within the allowance (5% of the harness's share) it passes."""
    record, audit = audited_on_the_cpu({HARNESS: 1e9, SOLUTION: 3e8})
    assert record.status == "REJECTED" and "did less in the solution's timed requests" in record.reason
    assert "cache sweeps" in record.reason
    record, audit = audited_on_the_cpu({HARNESS: 1e9, SOLUTION: 0.97e9})
    assert record.status == "PASSED", record.reason


@pytest.mark.harness
def test_requests_whose_sweeps_read_nothing_are_rejected_however_busy_they_kept_the_gpu(audited_on_the_cpu):
    """A solution can replace the L2 sweep with work that keeps an SM busy as long and reads
    nothing (warm_caches/sweeps_replaced_by_a_wait): the busy time matches the harness alone's,
    the device-memory reads do not. Within the allowance (10% of the harness's reads) it passes,
    and the figures are in the record."""
    busy = {HARNESS: 1e9, SOLUTION: 1e9}
    record, audit = audited_on_the_cpu(busy, reads={HARNESS: 150e6 * 16, SOLUTION: 1e6})
    assert record.status == "REJECTED" and "less from device memory" in record.reason, record.reason
    assert "did not evict the caches" in record.reason
    record, audit = audited_on_the_cpu(busy, reads={HARNESS: 150e6 * 16, SOLUTION: 0.95 * 150e6 * 16})
    assert record.status == "PASSED", record.reason
    assert audit.traffic == "dram__bytes_read.sum" and not audit.traffic_skipped
    assert audit.harness_read_mb_per_call > 0 and audit.read_mb_per_call < 0
    record, audit = audited_on_the_cpu(busy, reads={HARNESS: 150e6 * 16, SOLUTION: 2 * 150e6 * 16})
    assert record.status == "PASSED" and audit.read_mb_per_call > 0  # its own inputs, read on top


@pytest.mark.harness
def test_a_chip_without_a_traffic_counter_is_audited_on_busy_time_and_says_so(audited_on_the_cpu, monkeypatch):
    monkeypatch.setattr(PlannedSampler, "traffic", "")
    record, audit = audited_on_the_cpu({HARNESS: 1e9, SOLUTION: 1e9}, reads={HARNESS: 1e9})
    assert record.status == "PASSED", record.reason
    assert audit.traffic == "" and "reads none" in audit.traffic_skipped and audit.read_mb_per_call is None


@pytest.mark.harness
def test_the_clocks_drift_falls_out_of_each_pair(audited_on_the_cpu):
    """The GPU's clocks move whole requests by a few percent, far more than a small kernel's
    time: each request is judged against the harness block sampled just before it, so a
    drift common to both leaves the figure exact and its error nil. With the harness's blocks
    taken apart, this drift hid a 3x forged claim on an H100 (patched_reply_function)."""

    def drifting(extra_ns: float):
        return lambda k: 1e8 * (1 + 0.05 * (k % 5)) + extra_ns

    record, audit = audited_on_the_cpu({HARNESS: drifting(0), SOLUTION: drifting(0)})
    assert record.status == "PASSED", record.reason
    assert audit.observed_us_per_call == 0 and audit.noise_us == 0
    record, audit = audited_on_the_cpu({HARNESS: drifting(0), SOLUTION: drifting(1e9)})
    n = audit.calls // len(audit.observed_us_per_request)
    assert record.status == "REJECTED" and "below what the GPU's own counters saw" in record.reason
    assert audit.observed_us_per_request == [round(1e9 / n / 1e3, 3)] * len(audit.observed_us_per_request)
    assert audit.noise_us == 0


@pytest.mark.harness
def test_a_rough_figure_keeps_the_rounds_going_until_it_can_judge_the_claim(audited_on_the_cpu):
    """The smallest kernels are judged on a few µs out of ~160 of harness work per call: while
    the observed figure's error is over a quarter of the claim, more requests are sampled (up
    to MAX_REQUESTS); a figure steady to a twentieth of the claim stops at FEW_REQUESTS, one
    steady to a quarter at MIN_REQUESTS."""
    from gpuarena.harness.rounds_audit import MAX_REQUESTS

    record, audit = audited_on_the_cpu({})
    assert record.status == "PASSED" and FEW_REQUESTS <= len(audit.observed_us_per_request) < MAX_REQUESTS

    def jittery(k: int) -> float:  # a request's figure swings by 1e5 µs a call: never resolved
        return 1e9 * (k % 3)

    record, audit = audited_on_the_cpu({SOLUTION: jittery})
    assert len(audit.observed_us_per_request) == MAX_REQUESTS and audit.noise_us > 1e3
    assert PlannedSampler.seen.count(SOLUTION) == MAX_REQUESTS


def test_how_many_requests_the_audit_wants(monkeypatch):
    """At least FEW_REQUESTS; past that, on to MIN_REQUESTS unless the observed figure is steady
    to QUICK_NOISE_FRACTION of the claim, and past MIN_REQUESTS while it is rougher than
    NOISE_FRACTION, never past MAX_REQUESTS. A claim the unswept requests judge (under
    UNSWEPT_UNDER_US) on sets that together take twice L2 or more stops at STREAMING_REQUESTS,
    however rough its swept figure. Requests, not calls: 64 calls a request still go on to
    MIN_REQUESTS (the first requests' pairs, paced before the solution's host time was known,
    are outvoted)."""
    from types import SimpleNamespace

    from gpuarena.harness import bounds, rounds_audit
    from gpuarena.harness.audit_figures import AuditFigures
    from gpuarena.harness.rounds_audit import MAX_REQUESTS, STREAMING_REQUESTS, UNSWEPT_UNDER_US, RoundsAudit

    def _window(busy: float) -> Window:
        return Window(busy_ns=busy, span_ns=1e6, samples=8, overflow=False)

    def wants_more(paired_ns: list[float], claimed_us: float, streams: bool = False, calls: int = 1) -> bool:
        """paired_ns: per request (its `calls` calls together)."""
        audit = object.__new__(RoundsAudit)
        audit.on, audit.session, audit.seconds = True, SimpleNamespace(sets=[0] * calls), 0.0
        audit.sampler = SimpleNamespace(read_pending=lambda: None)
        audit.figures = AuditFigures(())
        audit.figures.requests = [(_window(ns), _window(0.0)) for ns in paired_ns]
        monkeypatch.setattr(rounds_audit, "streams_past_l2", lambda session: streams)
        return audit.wants_more(claimed_us)

    rough = [float(k % 2) * 1e9 for k in range(FEW_REQUESTS)]
    small = UNSWEPT_UNDER_US / 10
    streaming = rough[:STREAMING_REQUESTS]  # no round for the audit alone: the timing's own least
    assert STREAMING_REQUESTS == bounds.MIN_REQUESTS < FEW_REQUESTS
    assert wants_more(streaming[:-1], small, streams=True) and not wants_more(streaming, small, streams=True)
    assert wants_more(streaming, small) and wants_more(rough, small)  # L2 holds the sets: the unswept bound is loose
    assert wants_more(streaming, UNSWEPT_UNDER_US, streams=True)  # judged on the swept figure alone
    monkeypatch.setattr(rounds_audit, "UNSWEPT_UNDER_US", 0.0)  # no unswept requests: the swept rules

    steady = [100_000.0 + (k % 2) * 1_000 for k in range(FEW_REQUESTS)]  # 100 µs, ±1 µs: noise ~0.6 µs
    assert wants_more(steady[:-1], 100.0)
    assert not wants_more(steady, 100.0)  # steady to 5% of a 100 µs claim: enough
    assert wants_more(steady, 5.0)  # not to 5% of a 5 µs claim: on to MIN_REQUESTS
    steady_12 = [100_000.0 + (k % 2) * 1_000 for k in range(MIN_REQUESTS)]
    assert not wants_more(steady_12, 5.0)  # within a quarter of it: enough
    assert wants_more(steady_12, 1.0)
    per_64 = [64 * 100_000.0 + (k % 3) * 64_000 for k in range(FEW_REQUESTS)]  # 64 calls, ±1 µs each
    assert wants_more(per_64, 5.0, calls=64)  # steady to a quarter, not a twentieth: on to MIN_REQUESTS
    assert not wants_more(per_64 * 3, 5.0, calls=64)
    assert not wants_more([float(k % 2) * 1e9 for k in range(MAX_REQUESTS)], 1.0)


def test_a_request_streams_past_l2_when_its_sets_together_take_twice_l2(monkeypatch):
    """A request calls every set once, right after all were drawn afresh: what L2 holds when a
    call starts is other sets' data, so the unswept requests see the calls' cold cost once the
    sets and their destinations together take STREAMING_L2_MULTIPLE x L2 (one set need not)."""
    from types import SimpleNamespace

    import torch

    from gpuarena.harness.audit_checks import STREAMING_L2_MULTIPLE, streams_past_l2

    l2 = 1 << 20  # a GPU with 1 MiB of L2
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda device: SimpleNamespace(L2_cache_size=l2))

    def session(n_sets: int, set_bytes: int, device: str = "cuda") -> SimpleNamespace:
        inputs = [{"x": torch.empty(set_bytes // 2, dtype=torch.uint8), "n": 3} for _ in range(n_sets)]
        dests = [[torch.empty(set_bytes - set_bytes // 2, dtype=torch.uint8)] for _ in range(n_sets)]
        return SimpleNamespace(device=torch.device(device), sets=inputs, dests=dests)

    need = STREAMING_L2_MULTIPLE * l2
    assert streams_past_l2(session(1, need)) and not streams_past_l2(session(1, need - 2))
    assert streams_past_l2(session(64, need // 64)) and not streams_past_l2(session(16, need // 64))
    assert not streams_past_l2(session(64, need, device="cpu"))  # the CPU has no unswept requests


@pytest.mark.harness
def test_the_harness_s_block_is_spaced_out_as_the_solution_s_calls_are(audited_on_the_cpu, tmp_path):
    """The counters are read per sample, and work sharing a sample counts less than its parts:
    the harness's block waits in each call as long as the solution's calls spend on the host
    (an honest softmax calling gc.collect() was REJECTED on an H100 with a back-to-back block
    taken off). A back-to-back solution gets a back-to-back block."""
    record, audit = audited_on_the_cpu({})
    assert record.status == "PASSED", record.reason
    assert 0 <= audit.harness_pace_us < 1000  # a softmax of 64 x 1000 on the CPU: well under a ms a call
    slow = tmp_path / "host_work.py"
    slow.write_text(
        "import time, torch\n\ndef solve(x):\n    until = time.perf_counter() + 0.003\n"
        "    while time.perf_counter() < until:\n        pass\n    return torch.softmax(x, dim=-1)\n"
    )
    record, audit = audited_on_the_cpu({}, solution=slow)
    assert record.status == "PASSED", record.reason
    assert 2500 < audit.harness_pace_us < 4000


def test_claimed_host_time_spaces_the_harness_s_block_out_no_more_than_the_supervisor_saw():
    """The call windows are the worker's figures: a solution that claims long calls while its
    requests are quick (seen from outside) gets the wait the outside wall time allows."""
    from types import SimpleNamespace

    from gpuarena.harness.rounds_audit import MAX_PACE_NS, RoundsAudit

    audit = object.__new__(RoundsAudit)
    twin = SimpleNamespace(pace_ns=0)
    audit._twins, audit.session = {HARNESS: twin}, SimpleNamespace(sets=[0] * 4)
    audit.call_ns, audit.wall_ns = {SOLUTION: [], HARNESS: []}, {SOLUTION: [], HARNESS: []}
    audit._pace(HARNESS, 2_000, 4 * 100_000)  # the harness: 2 µs calls, 100 µs a call in all
    assert twin.pace_ns == 0  # nothing of the solution's yet
    audit._pace(SOLUTION, 3_002_000, 4 * 3_400_000)  # 3 ms on the host a call, seen from outside too
    assert twin.pace_ns == 3_000_000
    audit.call_ns[SOLUTION], audit.wall_ns[SOLUTION] = [], []
    audit._pace(SOLUTION, 3_002_000, 4 * 150_000)  # claims 3 ms calls, but its requests took 150 µs a call
    assert twin.pace_ns == 50_000
    audit.call_ns[SOLUTION], audit.wall_ns[SOLUTION] = [], []
    audit._pace(SOLUTION, 1e10, 4 * 1e10)
    assert twin.pace_ns == MAX_PACE_NS


@pytest.mark.harness
def test_what_the_counters_add_to_the_reference_is_taken_off_in_a_real_run(audited_on_the_cpu):
    record, audit = audited_on_the_cpu({REFERENCE_TWIN: 1e11, SOLUTION: 1e9})
    assert record.status == "PASSED", record.reason
    assert audit.observed_us_per_call > 1e4 and audit.inflation_us > audit.observed_us_per_call
    assert audit.inflation_us == audit.reference_observed_us_per_call - audit.reference_claimed_us
    # the claim passes only with the inflation allowed: the twin's median of TWIN_BLOCKS decides
    assert PlannedSampler.seen.count(REFERENCE_TWIN) == TWIN_BLOCKS


@pytest.mark.harness
def test_work_under_the_reference_s_timing_rejects_the_run(audited_on_the_cpu):
    """Work that is not the harness's running while the reference is timed (a solution's
    kernel queued to start later) slows the reference: its timed blocks, far busier than its
    twin's (which does more harness work), end the run."""
    record, audit = audited_on_the_cpu({REFERENCE: 1e9, REFERENCE_TWIN: 1e6})
    assert record.status == "REJECTED" and "ran under the reference's timing" in record.reason
    assert audit.reference_timed_us_per_call > audit.reference_twin_us_per_call
    assert PlannedSampler.seen.count(REFERENCE_TWIN) == TWIN_BLOCKS  # judged on the median, never on one block
    # one clean twin block that reads low (the GPU's clocks, say) is not the verdict: the median is
    record, audit = audited_on_the_cpu({REFERENCE: 1e9, REFERENCE_TWIN: lambda k: 1e6 if k == 0 else 1e9})
    assert record.status == "PASSED", record.reason
    assert PlannedSampler.seen.count(REFERENCE_TWIN) == TWIN_BLOCKS
    record, audit = audited_on_the_cpu({REFERENCE: 1.04e9, REFERENCE_TWIN: 1e9})  # within the margin
    assert record.status == "PASSED", record.reason


@pytest.mark.harness
def test_a_gpu_that_stays_busy_before_the_rounds_rejects_the_run(audited_on_the_cpu, monkeypatch):
    """A solution's helper could keep the GPU busy to have the audit skipped: a busy GPU is
    looked at again, and one that never gets quiet ends the run, never passes it."""
    looks: list[int] = []
    monkeypatch.setattr(device_audit, "QUIET_WAIT_S", 0.01)
    monkeypatch.setattr(device_audit, "shared", lambda idle: looks.append(1) or True)
    record, audit = audited_on_the_cpu({})
    assert record.status == "REJECTED" and "busy with work that is not the harness's" in record.reason
    assert len(looks) == device_audit.QUIET_ATTEMPTS and SOLUTION not in PlannedSampler.seen


@pytest.mark.harness
def test_a_calibration_is_the_quiet_check_and_a_failed_one_gets_the_check_of_its_own(audited_on_the_cpu, monkeypatch):
    """The samples' clock is read only after a quiet lead-in (sample_clock.LEAD_NS), so a workload
    whose calibration read it is not looked at for quiet again before its rounds; one whose
    calibration failed (a busy lead-in, say) gets the quiet check, which rejects a GPU that stays
    busy, and a second calibration."""
    calibrations: list[int] = []
    calibrate = PlannedSampler.calibrate

    def counted(self, burst) -> bool:
        calibrations.append(len(PlannedSampler.seen))
        return calibrate(self, burst)

    monkeypatch.setattr(PlannedSampler, "calibrate", counted)
    monkeypatch.setattr(PlannedSampler, "lazy", True)  # the stand-in's calibrations read an offset
    record, audit = audited_on_the_cpu({})
    assert record.status == "PASSED", record.reason
    assert calibrations == [0] and "an idle GPU" not in PlannedSampler.seen[: PlannedSampler.seen.index(SOLUTION)]
    calibrations.clear()
    monkeypatch.setattr(PlannedSampler, "lazy", False)  # every calibration fails
    record, audit = audited_on_the_cpu({})
    assert record.status == "PASSED", record.reason
    assert calibrations == [0, 1] and PlannedSampler.seen[0] == "an idle GPU"
    calibrations.clear()
    monkeypatch.setattr(device_audit, "QUIET_WAIT_S", 0.01)
    monkeypatch.setattr(device_audit, "shared", lambda idle: True)
    record, audit = audited_on_the_cpu({})
    assert record.status == "REJECTED" and "busy with work that is not the harness's" in record.reason
    assert calibrations == [0] and SOLUTION not in PlannedSampler.seen


@pytest.mark.harness
def test_a_gpu_busy_for_a_moment_is_waited_for(audited_on_the_cpu, monkeypatch):
    looks: list[int] = []
    monkeypatch.setattr(device_audit, "QUIET_WAIT_S", 0.01)
    monkeypatch.setattr(device_audit, "shared", lambda idle: looks.append(1) or len(looks) < 3)
    record, audit = audited_on_the_cpu({})
    assert record.status == "PASSED", record.reason
    assert not audit.skipped and audit.calls > 0 and len(looks) >= 3


@pytest.mark.harness
def test_counters_that_cannot_be_read_mid_run_reject_it(audited_on_the_cpu, monkeypatch):
    """A solution could hold the GPU's counters to make the audit fail: once the sampler has
    started in a run, a sampler that fails is a REJECTED run, never an unaudited pass."""
    segment = PlannedSampler.segment

    def failing(self, work, what="a segment", chained=False):
        if what == SOLUTION and PlannedSampler.seen.count(SOLUTION) >= 2:
            raise SamplerError("cuptiPmSamplingStart: CUPTI_ERROR_HARDWARE_BUSY")
        return segment(self, work, what, chained)

    monkeypatch.setattr(PlannedSampler, "segment", failing)
    record, audit = audited_on_the_cpu({})
    assert record.status == "REJECTED" and "counters could not be read" in record.reason
    assert "HARDWARE_BUSY" in record.reason and PlannedSampler.states[-1] == "stop"


def test_a_sampler_that_will_not_start_again_in_a_run_rejects_it(tmp_path, monkeypatch):
    """The sampler starts before any of the solution's code runs; one that started and then
    cannot start again (after the range profiler's pass, say) may be kept out by the solution:
    the next audit rejects the run instead of skipping."""
    from gpuarena.harness.failure import RunFailure
    from gpuarena.harness.rounds_audit import RoundsAudit
    from gpuarena.harness.supervisor import RunOptions, Supervisor
    from gpuarena.problems import resolve_problem
    from gpuarena.solutions import load_solution

    starts: list[int] = []

    class StartsOnce(PlannedSampler):
        def __init__(self, binary: Path, index: int):
            starts.append(1)
            if len(starts) > 1:
                raise SamplerError("cuptiPmSamplingEnable: CUPTI_ERROR_HARDWARE_BUSY")
            super().__init__(binary, index)

    monkeypatch.setattr(device_audit, "build_sampler", lambda: (tmp_path / "planned", ""))
    monkeypatch.setattr(device_audit, "DeviceSampler", StartsOnce)
    monkeypatch.setenv("GPUARENA_DEVICE_AUDIT", "1")
    supervisor = Supervisor(
        resolve_problem("level1/softmax"),
        load_solution(EXAMPLES / "softmax" / "pytorch.py"),
        RunOptions(device="cpu", mode="benchmark"),
    )
    assert supervisor.sampler is not None and not supervisor.sampler_lost
    supervisor.release_sampler()
    assert supervisor.sampler is None and supervisor.sampler_lost and "HARDWARE_BUSY" in supervisor.sampler_missing
    with pytest.raises(RunFailure, match="could earlier in this run"):
        RoundsAudit(supervisor, None, enabled=True)
    assert RoundsAudit(supervisor, None, enabled=False).sampler is None  # the CPU's


@pytest.mark.harness
def test_one_sampling_window_serves_every_timed_workload_each_looked_at_quiet_first(audited_on_the_cpu):
    """The sampler starts once for the run's timed workloads and stops at its end (a stop and a
    start cost about 21 ms a workload on an H200); each workload still finds the GPU quiet before
    its rounds (the solution's correctness calls ran in between) and has its own twins."""
    PlannedSampler.plan, PlannedSampler.seen, PlannedSampler.states, PlannedSampler.chained = {}, [], [], []
    PlannedSampler.reads = {}
    record = judge(
        "level1/softmax",
        EXAMPLES / "softmax" / "pytorch.py",
        mode="benchmark",
        workloads=["small-64x1000", "small-128x4096"],
    )
    assert record.status == "PASSED", record.reason
    assert [w.device_audit is not None and w.device_audit.calls > 0 for w in record.workloads] == [True, True]
    assert PlannedSampler.states == ["start", "stop"]
    # each workload looked at quiet first (and again before twins topped up after its rounds)
    assert PlannedSampler.seen.count("an idle GPU") >= 2
    assert PlannedSampler.seen.count(HARNESS) >= 2 * FEW_REQUESTS
    assert PlannedSampler.seen.count(REFERENCE_TWIN) == 2  # one in each workload's first round


@pytest.mark.harness
def test_a_destination_passing_problem_s_reference_is_judged_with_its_own_harness_share(audited_on_the_cpu):
    """The reference returns its outputs, the solution writes into destinations: the reference's
    harness share (copying outputs out) is sampled on its own and taken off the reference."""
    axpy = dict(problem="axpy_dest", solution=SOLUTIONS / "dest_good.py")
    record, audit = audited_on_the_cpu({REFERENCE_TWIN: 1e11, SOLUTION: 1e9}, **axpy)
    assert record.status == "PASSED", record.reason
    assert audit.inflation_us > audit.observed_us_per_call > 1e4
    # the same reference busy time, all of it the reference's harness share: nothing allowed
    record, audit = audited_on_the_cpu({REFERENCE_HARNESS: 1e11, REFERENCE_TWIN: 1e11, SOLUTION: 1e9}, **axpy)
    assert record.status == "REJECTED" and audit.inflation_us == 0 and audit.reference_observed_us_per_call == 0


@pytest.mark.harness
def test_a_sampler_started_ahead_is_the_run_s_own(audited_on_the_cpu, monkeypatch):
    """`gpuarena run` starts the PM sampler before it imports torch (harness/launch/ahead.py): the run
    takes that one, of its own device, instead of starting another; one of another device is
    quit and the run starts its own; a sampler no run took is quit by close()."""
    from types import SimpleNamespace

    from gpuarena.harness.judge import RunOptions, evaluate
    from gpuarena.harness.launch.ahead import DeviceAhead
    from gpuarena.problems import resolve_problem
    from gpuarena.solutions import load_solution

    made: list = []

    class Counted(PlannedSampler):
        def __init__(self, binary: Path, index: int):
            super().__init__(binary, index)
            self.index, self.closed = index, False
            self.process = SimpleNamespace(poll=lambda: 0 if self.closed else None)
            made.append(self)

        def close(self, wait: bool = True) -> None:
            self.closed = True

    monkeypatch.setattr(device_audit, "DeviceSampler", Counted)
    audited_on_the_cpu({})  # the plan set, the stand-ins in place

    def run(ahead: DeviceAhead):
        options = RunOptions(device="cpu", mode="benchmark", workloads=["small-64x1000"], budget_s=0.3)
        return evaluate(
            resolve_problem("level1/softmax"), load_solution(EXAMPLES / "softmax" / "pytorch.py"), options, ahead=ahead
        )

    made.clear()
    ahead = DeviceAhead(0)
    record = run(ahead)
    assert record.status == "PASSED", record.reason
    assert len(made) == 1 and made[0].index == 0 and made[0].closed  # the run's, quit at its end
    assert record.workloads[0].device_audit is not None and not record.workloads[0].device_audit.skipped
    assert ahead.take_sampler(0) is None  # handed over once
    ahead.close()

    made.clear()
    other = DeviceAhead(1)
    record = run(other)
    assert record.status == "PASSED", record.reason
    assert [s.index for s in made] == [1, 0] and all(s.closed for s in made)
    other.close()

    made.clear()
    untaken = DeviceAhead(0)
    assert untaken.state(1) is None  # nvidia-smi's reading of another GPU is not this run's
    untaken.close()
    assert len(made) == 1 and made[0].closed


def test_what_starts_ahead_does_not_import_torch():
    """The point of starting them ahead: torch is not loaded by the modules that do it."""
    import subprocess

    code = (
        "import sys; import gpuarena.harness.launch.ahead, gpuarena.harness.launch.started, gpuarena.harness.inside.triton_key; "
        "assert 'torch' not in sys.modules, 'torch was imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_a_run_may_turn_its_audit_off_but_a_ranked_run_may_not(monkeypatch, tmp_path):
    """RunOptions.device_audit=False (the suite, timing the dataset's own code) starts no sampler
    and says why; a ranked run audits whatever its options say, and the machine's switch
    still turns the audit off everywhere."""
    from gpuarena.harness.options import RunOptions
    from gpuarena.harness.supervisor import Supervisor
    from gpuarena.problems import resolve_problem
    from gpuarena.solutions import load_solution

    started: list[int] = []

    class Counted(PlannedSampler):
        def __init__(self, binary: Path, index: int):
            started.append(index)
            super().__init__(binary, index)

    monkeypatch.setattr(device_audit, "build_sampler", lambda: (tmp_path / "planned", ""))
    monkeypatch.setattr(device_audit, "DeviceSampler", Counted)
    monkeypatch.setenv("GPUARENA_DEVICE_AUDIT", "1")
    problem, solution = resolve_problem("level1/softmax"), load_solution(EXAMPLES / "softmax" / "pytorch.py")

    def sampler(**options):
        supervisor = Supervisor(problem, solution, RunOptions(device="cpu", **options))
        return supervisor.sampler, supervisor.sampler_missing

    assert sampler(mode="benchmark", device_audit=False) == (None, "turned off for this run (code the caller trusts)")
    assert not started
    kept, missing = sampler(mode="ranked", device_audit=False)
    assert kept is not None and missing == "" and len(started) == 1
    monkeypatch.setenv("GPUARENA_DEVICE_AUDIT", "0")
    assert sampler(mode="ranked") == (None, "turned off (GPUARENA_DEVICE_AUDIT=0)")


@pytest.mark.harness
def test_each_workload_s_audit_gives_its_cost_in_the_record(audited_on_the_cpu, unswept_for_every_claim):
    """The audit's wall time per workload (marks, twins, the rounds and unswept requests it alone
    asked for) is in the record, and the phases book it to the audit, not the timing."""
    record, audit = audited_on_the_cpu({})
    assert record.status == "PASSED", record.reason
    assert audit.seconds is not None and 0 < audit.seconds <= record.phases["device audit"] + 1e-3
    assert record.phases["timing"] > 0
