"""The range timer's parts that run without a GPU: its build (against this machine's CUPTI
headers, compile only; refused with a reason where there are none) and the Python side's use of
the library's C ABI (against a stand-in library speaking it). The library itself reads the
counters on an NVIDIA GPU only."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from gpuarena.harness import cupti_build, device_audit, range_timer
from gpuarena.harness.range_timer import KernelDurations, RangeTimerError

COMPILER = shutil.which("g++") or shutil.which("c++")

# Speaks grt_*'s ABI: three kernels per window, and refuses calls out of order, so the tests see
# the Python side start, stop and read in that order and leave no window open after an error.
STAND_IN = r"""
static int opened = 0, started = 0, stopped = 0;
static const char* error = "";
extern "C" {
const char* grt_error(void) { return error; }
int grt_open(int device, int max_ranges) {
    if (device == 7) { error = "cuptiRangeProfilerEnable: CUPTI_ERROR_INSUFFICIENT_PRIVILEGES"; return 1; }
    opened = max_ranges > 0;
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
    if (capacity < 3) { error = "3 ranges, room for 2"; return 1; }
    out_ns[0] = 1500; out_ns[1] = 250.5; out_ns[2] = 9000;
    *count = 3;
    return 0;
}
void grt_close(void) { opened = 0; }
}
"""


@pytest.fixture
def stand_in(tmp_path: Path) -> Path:
    if COMPILER is None:
        pytest.skip("no C++ compiler")
    source = tmp_path / "stand_in.cpp"
    source.write_text(STAND_IN)
    library = tmp_path / "libstand_in.so"
    done = subprocess.run([COMPILER, "-shared", "-fPIC", str(source), "-o", str(library)], capture_output=True,
                          text=True)
    assert done.returncode == 0, done.stderr
    return library


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
    with KernelDurations(0, max_ranges=2, library=stand_in) as timer:
        with pytest.raises(RangeTimerError, match="room for 2"):
            timer.measure(lambda: None)


def test_a_failing_call_keeps_its_own_error_and_closes_the_window(stand_in, no_sync):
    def failing():
        raise ValueError("the solution's own failure")

    with KernelDurations(0, library=stand_in) as timer:
        with pytest.raises(ValueError, match="own failure"):
            timer.measure(failing)
        assert len(timer.measure(lambda: None)) == 3  # stopped and read after the error: starts again


def test_the_build_needs_cuptis_range_profiler_headers(tmp_path, monkeypatch):
    monkeypatch.setenv("CUDA_HOME", str(tmp_path / "nowhere"))
    monkeypatch.delenv("CUDA_PATH", raising=False)
    monkeypatch.setattr(cupti_build, "DEFAULT_CUDA", str(tmp_path / "no-usr-local-cuda"))
    library, why = range_timer.build_range_timer()
    assert library is None and "CUDA_HOME" in why


def test_a_toolkit_older_than_the_range_profiler_is_refused_with_a_reason(tmp_path, monkeypatch):
    include = tmp_path / "cuda/extras/CUPTI/include"
    include.mkdir(parents=True)
    (include / "cupti_pmsampling.h").write_text("/* PM sampling only, as before CUDA 12.6 */\n")
    monkeypatch.setenv("CUDA_HOME", str(tmp_path / "cuda"))
    monkeypatch.setenv("GPUARENA_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(cupti_build, "DEFAULT_CUDA", str(tmp_path / "no-usr-local-cuda"))
    assert device_audit.cuda_home() == tmp_path / "cuda"
    library, why = range_timer.build_range_timer()
    assert library is None and "cupti_range_profiler.h" in why and "CUDA_HOME" in why
    assert not (tmp_path / "cache").exists()


def test_a_toolkit_without_a_usable_cupti_fails_the_build_with_the_compiler_s_words(tmp_path, monkeypatch):
    include = tmp_path / "cuda/extras/CUPTI/include"
    include.mkdir(parents=True)
    (include / "cupti_pmsampling.h").write_text("\n")
    (include / "cupti_range_profiler.h").write_text("#error not a real CUPTI header\n")
    monkeypatch.setenv("CUDA_HOME", str(tmp_path / "cuda"))
    monkeypatch.setenv("GPUARENA_CACHE", str(tmp_path / "cache"))
    library, why = range_timer.build_range_timer()
    if why == "no C++ compiler":
        pytest.skip(why)
    assert library is None and why.startswith("building the range timer failed")
    assert "error" in why


def test_the_range_timer_compiles_against_this_machine_s_cupti_headers(tmp_path):
    """Compile only: no driver here to link against."""
    cuda = cupti_build.cuda_home(range_timer.HEADER)
    if cuda is None:
        pytest.skip("no CUDA toolkit with CUPTI's Range Profiler headers (cupti_range_profiler.h, CUDA 12.6+)")
    if COMPILER is None:
        pytest.skip("no C++ compiler")
    done = range_timer.compile_range_timer(cuda, tmp_path / "range_timer.o", link=False)
    assert done.returncode == 0, done.stderr
    if shutil.which("nm") is None:
        return
    symbols = subprocess.run(["nm", str(tmp_path / "range_timer.o")], capture_output=True, text=True).stdout
    for name in ("grt_open", "grt_start", "grt_stop", "grt_read", "grt_error", "grt_close"):
        assert f" T {name}\n" in symbols, f"{name} is not exported with a C name"
