"""The ncu-comparable figure (kernel_duration.py) in real runs on the CPU: supervisor, worker,
rounds and checks, with a stand-in range-timer library speaking the real one's C ABI (three
kernels of 1500, 250.5 and 9000 ns per call) and holding a lock as the real one holds the GPU's
counters. The flow, the record and the ways it can be missing; the counters themselves are read
on a GPU (tests/gpu)."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from conftest import EXAMPLES, judge
from gpuarena.harness import kernel_duration
from gpuarena.harness.device import range_timer
from gpuarena.harness.device.backend import CpuBackend
from gpuarena.harness.device.range_timer import RangeTimerError
from gpuarena.harness.device.timing import KERNEL_DURATION_METHOD, Timer
from test_range_timer import STAND_IN, compile_stand_in

torch = pytest.importorskip("torch")

PER_CALL_US = round(1500 + 250.5 + 9000) / 1e3  # the three stand-in kernels, summed to whole ns

# grt_open fails in the worker (whose environment the harness scrubs of pytest's variables)
FAILS_IN_THE_WORKER = STAND_IN.replace("#include <cstring>", "#include <cstring>\n#include <cstdlib>").replace(
    "    opened = max_ranges > 0;",
    '    if (!getenv("PYTEST_CURRENT_TEST")) { error = "cuptiRangeProfilerEnable: '
    'CUPTI_ERROR_INSUFFICIENT_PRIVILEGES (stand-in)"; return 1; }\n    opened = max_ranges > 0;',
)


def holding_the_counters(source: str, folder) -> str:
    """The stand-in as the GPU's counters make the real one behave: one holder at a time (an
    exclusive lock on a file stands for them; a second grt_open gets HARDWARE_BUSY), and each
    opening noted in a file (the real one's first window after opening costs seconds)."""
    return (
        source.replace(
            "#include <cstring>",
            "#include <cstring>\n#include <cstdio>\n#include <fcntl.h>\n"
            "#include <sys/file.h>\n#include <unistd.h>\nstatic int counters = -1;",
        )
        .replace(
            "    opened = max_ranges > 0;",
            '    if (counters >= 0) { error = "grt_open: already open"; return 1; }  // one per process, as the real one\n'
            f'    counters = open("{folder}/counters", O_CREAT | O_RDWR, 0666);\n'
            '    if (counters < 0) { error = "stand-in: cannot open its counters file"; return 1; }\n'
            "    if (flock(counters, LOCK_EX | LOCK_NB) != 0) {\n"
            "        close(counters);\n"
            '        counters = -1; error = "cuptiProfilerGetCounterAvailability: CUPTI_ERROR_HARDWARE_BUSY (stand-in)"; return 1;\n'
            "    }\n"
            f'    FILE* log = fopen("{folder}/opens", "a"); if (log) {{ fputs("open\\n", log); fclose(log); }}\n'
            "    opened = max_ranges > 0;",
        )
        .replace(
            "void grt_close(void) { opened = 0; }",
            "void grt_close(void) { opened = 0; if (counters >= 0) { flock(counters, LOCK_UN); close(counters); counters = -1; } }",
        )
    )


@pytest.fixture
def counters_folder(monkeypatch):
    """Where the stand-in keeps its lock and its log: a worker of its own user (a root test
    run) must reach them, and pytest's tmp_path is private to the test's user; the worker's
    sandbox shares the folder with it (GPUARENA_SANDBOX_SHARE), as the GPU's counters are."""
    folder = Path(tempfile.mkdtemp(prefix="gpuarena-test-counters-"))
    monkeypatch.setenv("GPUARENA_SANDBOX_SHARE", str(folder))
    folder.chmod(0o777)
    for name in ("counters", "opens"):
        (folder / name).touch()
        (folder / name).chmod(0o666)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def profiled_run(monkeypatch, tmp_path, counters_folder):
    """A real softmax run on the CPU with the stand-in library (None: no library, and why)."""

    def run(library_source: str | None = STAND_IN, why: str = "", workloads: tuple[str, ...] = ("small-64x1000",)):
        if library_source:
            library_source = holding_the_counters(library_source, counters_folder)
        library = compile_stand_in(tmp_path, library_source) if library_source else None
        monkeypatch.setattr(CpuBackend, "kernel_duration", True)  # the stand-in library times "the device"
        monkeypatch.setattr(kernel_duration, "library", lambda: (library, why))
        monkeypatch.setenv("GPUARENA_KERNEL_DURATION", os.environ.get("GPUARENA_KERNEL_DURATION", "1"))
        # the reference's figure is cached per machine: each test starts without one
        monkeypatch.setenv("GPUARENA_CACHE", os.environ.get("GPUARENA_CACHE", str(tmp_path / "cache")))
        record = judge(
            "level1/softmax", EXAMPLES / "softmax" / "pytorch.py", mode="benchmark", workloads=list(workloads)
        )
        assert record.status == "PASSED", record.reason
        return record

    return run


@pytest.fixture
def profiled_on_the_cpu(profiled_run):
    """The one workload of a profiled run."""
    return lambda *args, **kwargs: profiled_run(*args, **kwargs).workloads[0]


@pytest.mark.harness
def test_both_sides_get_ncu_s_figure_in_a_real_run(profiled_on_the_cpu):
    workload = profiled_on_the_cpu()
    assert workload.time.kernel_duration_us == pytest.approx(PER_CALL_US)
    assert workload.reference_time.kernel_duration_us == pytest.approx(PER_CALL_US)
    assert workload.time.kernel_duration_calls == workload.reference_time.kernel_duration_calls > 0
    assert workload.time.kernel_duration_calls >= kernel_duration.LEAST_CALLS
    assert workload.kernel_duration_skipped == ""
    assert workload.time.median_us != PER_CALL_US  # the ranked figure is still the stream cost


@pytest.mark.harness
def test_no_profiler_here_leaves_the_figure_out_and_says_why(profiled_on_the_cpu):
    workload = profiled_on_the_cpu(None, why="no CUDA toolkit found (nvcc)")
    assert workload.time.kernel_duration_us is None and workload.reference_time.kernel_duration_us is None
    assert workload.kernel_duration_skipped == "no CUDA toolkit found (nvcc)"


@pytest.mark.harness
def test_a_profiler_that_fails_in_the_worker_is_no_verdict_on_the_solution(profiled_on_the_cpu):
    workload = profiled_on_the_cpu(FAILS_IN_THE_WORKER)
    assert workload.time.kernel_duration_us is None
    assert "CUPTI_ERROR_INSUFFICIENT_PRIVILEGES (stand-in)" in workload.kernel_duration_skipped


def test_a_timer_block_with_the_library_gives_each_call_s_kernels_summed(tmp_path):
    library = compile_stand_in(tmp_path)
    seen = []
    samples = Timer(torch.device("cpu")).run_block(
        lambda i: i * 10, 3, after=lambda i, r: seen.append(r), kernel_library=library
    )
    assert samples.method == KERNEL_DURATION_METHOD
    assert samples.device_ns == [round(PER_CALL_US * 1e3)] * 3 and len(samples.e2e_ns) == 3
    assert seen == [0, 10, 20]  # after() gets each call's own result


def test_a_timer_block_opens_small_and_grows_when_a_call_launches_more_kernels(tmp_path, monkeypatch):
    """The first window's cost grows with the profiler's room for kernels (about 1 ms a range on
    an H100), so the harness opens with little room and, when a call launches more kernels, opens
    it again larger and runs that call again from its preparation."""
    monkeypatch.setattr(range_timer, "FIRST_RANGES", 1)  # the stand-in launches 3 kernels a call
    monkeypatch.setattr(range_timer, "GROWTH", 2)
    library = compile_stand_in(tmp_path)
    calls, prepared, seen = [], [], []
    timer = Timer(torch.device("cpu"))
    samples = timer.run_block(
        lambda i: calls.append(i) or i * 10,
        3,
        prepare=prepared.append,
        after=lambda i, r: seen.append(r),
        kernel_library=library,
    )
    assert samples.device_ns == [round(PER_CALL_US * 1e3)] * 3
    assert calls == [0, 0, 0, 1, 2] and prepared == [0, 0, 0, 1, 2]  # room 1, then 2, then 4: the first call thrice
    assert seen == [0, 10, 20]  # each call's outputs checked once, from the run that was measured
    timer.open_kernel_profiler(library)
    timer.run_block(lambda i: i, 1, kernel_library=library)
    assert timer._kernel_profiler.max_ranges == 4  # a held profiler is replaced by the larger one
    timer.close_kernel_profiler()
    monkeypatch.setattr(range_timer, "MOST_RANGES", 2)
    with pytest.raises(range_timer.TooManyKernels, match="dropped"):
        timer.run_block(lambda i: i, 1, kernel_library=library)


@pytest.mark.harness
def test_the_phase_can_be_switched_off_and_the_record_says_so(profiled_run, monkeypatch, counters_folder):
    monkeypatch.setenv("GPUARENA_KERNEL_DURATION", "0")
    record = profiled_run()
    assert record.score
    workload = record.workloads[0]
    assert workload.time.kernel_duration_us is None and workload.time.median_us > 0
    assert (
        workload.kernel_duration_skipped == kernel_duration.SWITCHED_OFF
        and "GPUARENA_KERNEL_DURATION=0" in kernel_duration.SWITCHED_OFF
    )
    assert (counters_folder / "opens").read_text() == ""


@pytest.mark.harness
def test_the_phase_runs_only_when_asked_and_then_on_every_workload(profiled_run, monkeypatch, counters_folder):
    """It ranks nothing, the figure is the worker's own, and it costs a profiler opening and the
    device audit's sampler (quit for it): no mode reads it unless asked (--ncu), ranked mode
    included; asked, it reads every timed workload."""
    monkeypatch.delenv("GPUARENA_KERNEL_DURATION", raising=False)
    monkeypatch.setattr(CpuBackend, "kernel_duration", True)  # the stand-in library times "the device"
    monkeypatch.setattr(kernel_duration, "library", lambda: (None, "unused"))  # the stand-in comes in below
    for mode in ("benchmark", "ranked"):
        record = judge("level1/softmax", EXAMPLES / "softmax" / "pytorch.py", mode=mode, workloads=["small-64x1000"])
        assert record.status == "PASSED", record.reason
        assert record.workloads[0].time.kernel_duration_us is None
        assert (
            record.workloads[0].kernel_duration_skipped == kernel_duration.NOT_ASKED
            and "--ncu" in kernel_duration.NOT_ASKED
        )
    assert (counters_folder / "opens").read_text() == ""
    both = ("small-64x1000", "small-128x4096")
    asked = profiled_run(workloads=both)  # the fixture asks, as --ncu does
    assert [w.time.kernel_duration_us for w in asked.workloads] == [pytest.approx(PER_CALL_US)] * 2
    assert all(w.kernel_duration_skipped == "" for w in asked.workloads)


def test_a_block_opens_the_profiler_for_itself_unless_the_timer_holds_it(tmp_path, counters_folder):
    """A lone block gives the counters back when it ends (another Timer, another process may
    want them); a held profiler serves every block until it is closed."""
    library = compile_stand_in(tmp_path, holding_the_counters(STAND_IN, counters_folder))
    first, second = Timer(torch.device("cpu")), Timer(torch.device("cpu"))
    for timer in (first, second, first):
        assert timer.run_block(lambda i: i, 2, kernel_library=library).device_ns == [round(PER_CALL_US * 1e3)] * 2
    opens = counters_folder / "opens"
    assert opens.read_text() == "open\n" * 3
    first.open_kernel_profiler(library)
    for _ in range(3):
        first.run_block(lambda i: i, 2, kernel_library=library)
    assert opens.read_text() == "open\n" * 4
    with pytest.raises(RangeTimerError, match="already open"):
        second.run_block(lambda i: i, 1, kernel_library=library)
    first.close_kernel_profiler()
    second.run_block(lambda i: i, 1, kernel_library=library)


def test_the_cpu_timer_makes_no_caches_cold():
    timer = Timer(torch.device("cpu"))
    assert not timer.has_icache_sweep and timer.eviction == ""


@pytest.mark.skipif(shutil.which("ptxas") is None, reason="no ptxas (CUDA toolkit)")
def test_the_instruction_cache_sweep_compiles_to_more_code_than_an_sm_caches(tmp_path):
    """The PTX the driver loads is valid, and on sm_90 it is more than 128 KB of machine code
    (the point of it); ptxas here stands in for the driver's own."""
    from gpuarena.harness.device import icache_sweep

    (tmp_path / "sweep.ptx").write_text(icache_sweep.ptx())
    done = subprocess.run(
        ["ptxas", "-arch=sm_90", str(tmp_path / "sweep.ptx"), "-o", str(tmp_path / "sweep.cubin")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    sections = subprocess.run(["readelf", "-S", "-W", str(tmp_path / "sweep.cubin")], capture_output=True, text=True)
    text = next(line for line in sections.stdout.splitlines() if f".text.{icache_sweep.ENTRY}" in line)
    size = int(text.split(f".text.{icache_sweep.ENTRY}")[1].split()[3], 16)  # type, address, offset, size
    assert size > 128 << 10, size


def test_the_ptx_constants_are_distinct_so_no_fma_can_be_folded():
    from gpuarena.harness.device import icache_sweep

    fmas = [line for line in icache_sweep.ptx(64).splitlines() if "fma.rn.f32" in line]
    assert len(fmas) == 64 and len(set(fmas)) == 64


@pytest.mark.skipif(torch.cuda.is_available(), reason="the refusal is seen where there is no GPU")
def test_no_gpu_no_instruction_cache_sweep_and_why():
    from gpuarena.harness.device import icache_sweep

    sweep, why = icache_sweep.build(torch.device("cuda"))
    assert sweep is None and why


@pytest.mark.harness
def test_the_cli_shows_the_figure_or_why_it_is_missing(profiled_on_the_cpu):
    from rich.console import Console

    from gpuarena.cli.render import _kernel_duration_summary, render
    from gpuarena.contracts.records import Evaluation, Status, WorkloadResult

    workload = profiled_on_the_cpu()
    record = Evaluation(
        status=Status.PASSED,
        problem="level1/softmax",
        solution_hash="0" * 64,
        device="cpu",
        mode="benchmark",
        workloads=[workload],
    )
    console = Console(record=True, width=200)
    render(record, console)
    text = console.export_text()
    assert f"{PER_CALL_US:.2f} µs (ref {PER_CALL_US:.2f})" in text and "what ncu reports" in text
    record.workloads = [WorkloadResult(name="a", status=Status.PASSED, kernel_duration_skipped="no toolkit")]
    assert _kernel_duration_summary(record) == "ncu Duration: not measured (no toolkit)"


@pytest.mark.harness
def test_the_submission_page_shows_the_figure_only_where_measured(profiled_on_the_cpu):
    from types import SimpleNamespace

    from gpuarena.contracts.records import Evaluation, Status
    from gpuarena.service.web.render import ENV

    workload = profiled_on_the_cpu()
    evaluation = Evaluation(
        status=Status.PASSED,
        problem="level1/softmax",
        solution_hash="0" * 64,
        device="cpu",
        mode="benchmark",
        workloads=[workload],
    )
    detail = SimpleNamespace(
        status="PASSED",
        reason="",
        done=True,
        id=1,
        device_kind="cpu",
        score=None,
        evaluation=evaluation,
        log_hidden=False,
    )

    def html() -> str:
        return ENV.get_template("_live.html").render(s=SimpleNamespace(detail=detail, score_interval=None, compared={}))

    assert "ncu Duration</th>" in html() and f"{PER_CALL_US:.2f} µs" in html()
    workload.time.kernel_duration_us = workload.reference_time.kernel_duration_us = None
    assert "ncu Duration" not in html()


@pytest.mark.harness
def test_each_side_opens_the_profiler_once_per_run_and_never_both_at_once(profiled_run, counters_folder):
    """On an H100 the Range Profiler's first window after opening costs about 4 s, and a
    second process cannot open it while one holds it: opened per block, the phase took over
    a minute on one workload. After every workload is timed, the worker holds it for all the
    solution's rounds, then the supervisor for the reference's: two openings per run."""
    record = profiled_run(workloads=("small-64x1000", "small-128x4096"))
    assert [w.kernel_duration_skipped for w in record.workloads] == ["", ""]  # no HARDWARE_BUSY
    assert [w.time.kernel_duration_us for w in record.workloads] == [pytest.approx(PER_CALL_US)] * 2
    assert [w.reference_time.kernel_duration_us for w in record.workloads] == [pytest.approx(PER_CALL_US)] * 2
    assert (counters_folder / "opens").read_text() == "open\nopen\n"


@pytest.mark.harness
def test_a_second_run_reads_the_reference_s_figure_from_the_cache_and_opens_once(
    profiled_run, counters_folder, monkeypatch, tmp_path
):
    """The reference's figure depends on nothing the solution does: kept per problem version,
    workload, device and software, a later run opens the profiler on the worker's side only
    (each opening costs about 4 s on an H100); the record says the figure came from the cache."""
    first = profiled_run().workloads[0]
    assert first.reference_time.kernel_duration_cached is False
    assert (counters_folder / "opens").read_text() == "open\n" * 2
    second = profiled_run().workloads[0]
    assert second.reference_time.kernel_duration_cached is True
    assert second.reference_time.kernel_duration_us == pytest.approx(first.reference_time.kernel_duration_us)
    assert second.time.kernel_duration_cached is False and second.time.kernel_duration_us == pytest.approx(PER_CALL_US)
    assert (counters_folder / "opens").read_text() == "open\n" * 3
    # a damaged cache entry is measured again, never trusted
    for entry in (tmp_path / "cache" / "reference-ncu").glob("*.json"):
        entry.write_text('["not", "samples"]')
    third = profiled_run().workloads[0]
    assert third.reference_time.kernel_duration_cached is False
    assert (counters_folder / "opens").read_text() == "open\n" * 5


@pytest.mark.harness
def test_the_audit_s_sampler_is_quit_before_the_profiler_opens(tmp_path, monkeypatch, counters_folder, profiled_run):
    """The PM sampler holds the GPU's counters while it runs (on an H100 the range timer then
    got CUPTI_ERROR_HARDWARE_BUSY): it audits every workload, then is quit before the phase.
    Here it holds the stand-in's lock, as the real one holds the counters."""
    import fcntl

    from gpuarena.harness.device import device_audit
    from test_device_audit import PlannedSampler

    starts = tmp_path / "sampler-starts"

    class HoldsTheCounters(PlannedSampler):
        def __init__(self, binary: Path, index: int):
            super().__init__(binary, index)
            with starts.open("a") as log:
                log.write("start\n")
            self.counters = (counters_folder / "counters").open("a")
            fcntl.flock(self.counters, fcntl.LOCK_EX | fcntl.LOCK_NB)  # raises while the profiler holds them

        def close(self, wait: bool = True) -> None:
            self.counters.close()

    PlannedSampler.plan, PlannedSampler.seen, PlannedSampler.states = {}, [], []
    monkeypatch.setattr(device_audit, "build_sampler", lambda: (tmp_path / "planned", ""))
    monkeypatch.setattr(device_audit, "DeviceSampler", HoldsTheCounters)
    monkeypatch.setattr(CpuBackend, "device_audit", True)  # the stand-in sampler reads "the device"
    monkeypatch.setenv("GPUARENA_DEVICE_AUDIT", "1")
    record = profiled_run(workloads=("small-64x1000", "small-128x4096"))
    assert [w.device_audit.calls > 0 and not w.device_audit.skipped for w in record.workloads] == [True, True]
    assert [w.time.kernel_duration_us for w in record.workloads] == [pytest.approx(PER_CALL_US)] * 2
    assert starts.read_text() == "start\n"  # one sampler for every workload's audit


WRONG_UNDER_THE_PROFILER = """
import torch


def solve(x):
    with open("/proc/self/maps") as maps:  # the range timer's library is loaded: the ncu phase
        profiled = "libstand_in" in maps.read()
    return torch.zeros_like(x) if profiled else torch.softmax(x, dim=-1)
"""


@pytest.mark.harness
def test_outputs_wrong_only_under_the_profiler_leave_the_figure_out_not_a_verdict(
    tmp_path, monkeypatch, counters_folder
):
    """CUDA graphs are not replayed under the Range Profiler (an honest graph-replay softmax on
    an H100): outputs right in the timed rounds and wrong in the ncu phase cost the figure,
    never the verdict, which the timed rounds gave."""
    library = compile_stand_in(tmp_path, holding_the_counters(STAND_IN, counters_folder))
    monkeypatch.setattr(CpuBackend, "kernel_duration", True)  # the stand-in library times "the device"
    monkeypatch.setattr(kernel_duration, "library", lambda: (library, ""))
    monkeypatch.setenv("GPUARENA_KERNEL_DURATION", "1")
    solution = tmp_path / "wrong_under_profiler.py"
    solution.write_text(WRONG_UNDER_THE_PROFILER)
    record = judge("level1/softmax", solution, mode="benchmark", workloads=["small-64x1000"])
    assert record.status == "PASSED", record.reason
    workload = record.workloads[0]
    assert workload.time.kernel_duration_us is None
    assert "wrong under CUPTI's Range Profiler" in workload.kernel_duration_skipped


def test_each_side_gets_least_calls_in_whole_rounds_of_fresh_sets():
    # every set once a round, rounds until LEAST_CALLS calls, ROUNDS at most
    assert [kernel_duration.rounds(n) for n in (1, 2, 3, 5, 8, 16, 64)] == [4, 4, 3, 2, 1, 1, 1]
    assert all(n * kernel_duration.rounds(n) >= kernel_duration.LEAST_CALLS for n in range(2, 100))


def test_a_stream_cost_far_below_ncu_s_figure_for_the_same_calls_is_rejected():
    from gpuarena.contracts.records import Timing, WorkloadResult

    def result(stream_us: float, ncu_us: float) -> WorkloadResult:
        timing = Timing(
            median_us=stream_us,
            ci95_low_us=stream_us,
            ci95_high_us=stream_us,
            samples=30,
            method="cupti-device-time",
            kernel_duration_us=ncu_us,
        )
        return WorkloadResult(name="w", status="PASSED", time=timing)

    # the copy-out attack on an H100: 203 µs timed, 627.7 µs under ncu
    assert "far above their timed stream cost" in kernel_duration.stream_cost_understated(result(203.0, 627.7))
    # honest: ncu bills each kernel ~1.3 µs of launch and drain (add 64K: 1.54 timed, 2.88 ncu;
    # fifty 1 µs kernels: 50 timed, about 115 ncu)
    assert kernel_duration.stream_cost_understated(result(1.54, 2.88)) == ""
    assert kernel_duration.stream_cost_understated(result(50.0, 115.0)) == ""
    assert kernel_duration.stream_cost_understated(result(84.6, 86.2)) == ""
