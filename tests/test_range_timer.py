"""The range timer's parts that run without a GPU: the Python side's use of the library's C ABI
(against a stand-in library speaking it). Its build is tested in test_cupti_build.py; the library
itself reads the counters on an NVIDIA GPU only."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from gpuarena.harness.device.range_timer import KernelDurations, RangeTimerError, TooManyKernels

COMPILER = shutil.which("g++") or shutil.which("c++")

# Speaks grt_*'s ABI: three kernels per window, each metric's value its kernel's duration times
# the metric's position, and refuses calls out of order, so the tests see the Python side start,
# stop and read in that order and leave no window open after an error.
STAND_IN = r"""
#include <cstring>
static int opened = 0, started = 0, stopped = 0, metrics = 0, room = 0;
static const char* error = "";
extern "C" {
const char* grt_error(void) { return error; }
int grt_metric_count(void) { return metrics; }
int grt_open(int device, int max_ranges, const char* names) {
    if (device == 7) { error = "cuptiRangeProfilerEnable: CUPTI_ERROR_INSUFFICIENT_PRIVILEGES"; return 1; }
    opened = max_ranges > 0;
    room = max_ranges;
    metrics = 1;
    for (const char* c = names; *c; ++c) metrics += *c == ',';
    if (device == 8) metrics = 1;  // a library that ignores all but the first metric
    return 0;
}
int grt_start(void) {
    if (!opened || started) { error = "start out of order"; return 1; }
    started = 1; stopped = 0;
    return 0;
}
int grt_stop(void) { stopped = started; started = 0; return stopped ? 0 : 1; }
int grt_read(double* out_ns, int capacity, int* count) {
    *count = 0;
    if (!stopped) { error = "read before stop"; return 1; }
    stopped = 0;
    if (room < 3) { error = "3 kernel(s) dropped: more launches than max_ranges"; return 2; }
    if (capacity < 3) { error = "3 ranges, room for 2"; return 1; }
    const double kernels[3] = {1500, 250.5, 9000};
    for (int k = 0; k < 3; ++k)
        for (int m = 0; m < metrics; ++m) out_ns[k * metrics + m] = kernels[k] * (m + 1);
    *count = 3;
    return 0;
}
void grt_close(void) { opened = 0; }
}
"""


def compile_stand_in(folder: Path, source_text: str = STAND_IN) -> Path:
    """The stand-in library, built with this machine's C++ compiler."""
    if COMPILER is None:
        pytest.skip("no C++ compiler")
    source = folder / "stand_in.cpp"
    source.write_text(source_text)
    library = folder / "libstand_in.so"
    done = subprocess.run(
        [COMPILER, "-shared", "-fPIC", str(source), "-o", str(library)], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    return library


@pytest.fixture
def stand_in(tmp_path: Path) -> Path:
    return compile_stand_in(tmp_path)


@pytest.fixture
def no_sync(monkeypatch):
    torch = pytest.importorskip("torch")
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *args: None)


def test_durations_come_back_in_launch_order(stand_in, no_sync):
    calls = []
    with KernelDurations(0, library=stand_in) as timer:
        assert timer.measure(lambda: calls.append("ran")) == [1500.0, 250.5, 9000.0]
        assert timer.measure(lambda: None) == [1500.0, 250.5, 9000.0]  # the window was closed and read
    assert calls == ["ran"]


def test_a_profiler_that_cannot_open_says_why(stand_in):
    with pytest.raises(RangeTimerError, match="cuptiRangeProfilerEnable: CUPTI_ERROR_INSUFFICIENT_PRIVILEGES"):
        KernelDurations(7, library=stand_in)


def test_more_kernels_than_room_is_an_error_not_a_short_list(stand_in, no_sync):
    """Its own kind of error (the library's code 2), so a caller can open again with more room."""
    with KernelDurations(0, max_ranges=2, library=stand_in) as timer:
        with pytest.raises(TooManyKernels, match="dropped: more launches than max_ranges"):
            timer.measure(lambda: None)
        with pytest.raises(TooManyKernels):  # not "start out of order": the window was stopped and read
            timer.measure(lambda: None)


def test_a_full_room_is_taken_for_an_overflow(stand_in, no_sync):
    """CUPTI keeps the first max_ranges kernels and drops the rest without saying so (an H100,
    driver 580), so a window that fills its room exactly may have had more."""
    with KernelDurations(0, max_ranges=3, library=stand_in) as timer:
        with pytest.raises(TooManyKernels, match="filled its room of 3 kernels"):
            timer.measure(lambda: None)
    with KernelDurations(0, max_ranges=4, library=stand_in) as timer:
        assert len(timer.measure(lambda: None)) == 3


def test_a_failing_call_keeps_its_own_error_and_closes_the_window(stand_in, no_sync):
    def failing():
        raise ValueError("the solution's own failure")

    with KernelDurations(0, library=stand_in) as timer:
        with pytest.raises(ValueError, match="own failure"):
            timer.measure(failing)
        assert len(timer.measure(lambda: None)) == 3  # stopped and read after the error: starts again


def test_several_metrics_come_back_per_kernel_in_the_order_named(stand_in, no_sync):
    with KernelDurations(0, library=stand_in, metrics=("gpu__time_duration.sum", "gpc__cycles_elapsed.max")) as timer:
        rows = timer.measure_metrics(lambda: None)
        assert rows == [
            {"gpu__time_duration.sum": 1500.0, "gpc__cycles_elapsed.max": 3000.0},
            {"gpu__time_duration.sum": 250.5, "gpc__cycles_elapsed.max": 501.0},
            {"gpu__time_duration.sum": 9000.0, "gpc__cycles_elapsed.max": 18000.0},
        ]
        assert timer.measure(lambda: None) == [1500.0, 250.5, 9000.0]  # the first metric


def test_a_library_that_took_other_metrics_is_refused(stand_in):
    with pytest.raises(RangeTimerError, match="took 1 metrics, not 2"):
        KernelDurations(8, library=stand_in, metrics=("a.sum", "b.max"))


@pytest.mark.parametrize("metrics", [(), ("",), ("a.sum,b.max",)])
def test_bad_metric_names_are_refused_before_the_library_is_touched(metrics):
    with pytest.raises(ValueError, match="metrics must be"):
        KernelDurations(0, library=Path("/nonexistent.so"), metrics=metrics)


def test_a_library_that_cannot_be_loaded_is_a_range_timer_error(tmp_path):
    unreadable = tmp_path / "libnot_a_library.so"
    unreadable.write_text("not an ELF file")
    with pytest.raises(RangeTimerError, match="cannot load the range timer's library"):
        KernelDurations(0, library=unreadable)
