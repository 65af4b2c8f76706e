"""The harness's CUPTI collector (harness/device/activity_timer.cpp, .py), in the parts that run
without a GPU: the attribution of device work to timed calls (the real source, built without
CUPTI), the choice of record structs from a toolkit's header, and the Python side's use of the
library's C ABI (against a stand-in speaking it), loaded from bytes as a worker loads it. The
collector itself runs on an NVIDIA GPU (tests/gpu, bench/gpu/validate.sh)."""

from __future__ import annotations

import ctypes
import shutil
import subprocess
from pathlib import Path

import pytest

from gpuarena.harness.device import activity_timer, cupti_timing

COMPILER = shutil.which("g++") or shutil.which("c++")


def build(folder: Path, source: Path, *flags: str) -> Path:
    if COMPILER is None:
        pytest.skip("no C++ compiler")
    library = folder / f"lib{source.stem}.so"
    done = subprocess.run(
        [COMPILER, "-std=c++17", "-shared", "-fPIC", *flags, str(source), "-o", str(library)],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    return library


@pytest.fixture(scope="module")
def attribute(tmp_path_factory):
    """gat_attribute from the shipped source, built without CUDA."""
    lib = ctypes.CDLL(str(build(tmp_path_factory.mktemp("attr"), activity_timer.SOURCE, "-DGAT_ATTRIBUTION_ONLY")))
    u64 = ctypes.POINTER(ctypes.c_uint64)
    lib.gat_attribute.argtypes = [u64, ctypes.c_int, u64, ctypes.c_int, u64, ctypes.c_int, u64, ctypes.c_int, u64]
    lib.gat_attribute.argtypes += [ctypes.POINTER(ctypes.c_longlong)]

    def run(work, launches, calls, harness):
        def array(values):
            flat = [v for row in values for v in row]
            return (ctypes.c_uint64 * max(len(flat), 1))(*flat)

        out = (ctypes.c_uint64 * max(len(calls), 1))()
        own = ctypes.c_longlong(-1)
        lib.gat_attribute(array(work), len(work), array(launches), len(launches), array(calls), len(calls),
                          array(harness), len(harness), out, ctypes.byref(own))  # fmt: skip
        return list(out[: len(calls)]), own.value

    return run


def test_work_is_billed_to_the_call_that_launched_it(attribute):
    calls = [(100, 200), (300, 400)]
    harness = [(50, 99), (210, 290)]
    work = [
        (1, 150, 260),  # launched in call 0, ran past its window: all of it is call 0's
        (2, 310, 340),  # call 1's, and two overlapping ones: their union
        (3, 320, 360),
        (4, 220, 280),  # launched by the harness between the calls: nobody's
        (5, 500, 530),  # launched after every window (work deferred past a return): call 1 pays
        (6, 120, 125),  # no launch record: its own start places it (in call 0)
    ]
    launches = [(1, 110), (2, 305), (3, 306), (4, 215), (5, 450)]
    busy, own = attribute(work, launches, calls, harness)
    assert busy == [110 + 5, 50 + 30]
    assert own == 1


def test_work_launched_before_the_first_call_outside_the_harness_is_the_first_call_s(attribute):
    busy, own = attribute([(1, 10, 30)], [(1, 5)], [(100, 200), (300, 400)], [(50, 60)])
    assert busy == [20, 0] and own == 0


def test_no_work_is_no_time(attribute):
    busy, own = attribute([], [], [(100, 200)], [])
    assert busy == [0] and own == 0


def test_the_newest_record_structs_of_the_toolkit_are_chosen(tmp_path):
    include = tmp_path / "extras/CUPTI/include"
    include.mkdir(parents=True)
    (include / "cupti_activity.h").write_text(
        "typedef struct { int a; } CUpti_ActivityKernel9;\ntypedef struct {\n int a;\n} CUpti_ActivityKernel11;\n"
        "typedef struct { int a; } CUpti_ActivityMemcpy6;\ntypedef struct { int a; } CUpti_ActivityMemset4;\n"
        "/* CUpti_ActivityKernel12 is only named in a comment */\n"
    )
    assert activity_timer.record_structs(tmp_path) == (
        "KERNEL_RECORD=CUpti_ActivityKernel11",
        "MEMCPY_RECORD=CUpti_ActivityMemcpy6",
        "MEMSET_RECORD=CUpti_ActivityMemset4",
    )


# Speaks gat_*'s ABI: a clock that ticks by 10 per read, each call's figure its window's length,
# `own` harness records per block as set by gat_set_own, and an error when begun twice.
STAND_IN = r"""
#include <cstdint>
static uint64_t clock_ = 0;
static int begun = 0;
static long long own_records = 0;
static const char* error = "";
extern "C" {
const char* gat_error(void) { return error; }
uint64_t gat_now(void) { return clock_ += 10; }
void gat_set_own(long long n) { own_records = n; }
int gat_begin(void) {
    if (begun) { error = "cuptiActivityEnable: begun twice"; return -1; }
    begun = 1;
    return 0;
}
long long gat_end(const uint64_t* calls, int n, const uint64_t* harness, int m, uint64_t* out, long long* own) {
    begun = 0;
    for (int k = 0; k < n; ++k) out[k] = calls[2 * k + 1] - calls[2 * k];
    *own = own_records;
    return n;
}
}
"""


@pytest.fixture
def stand_in(tmp_path) -> activity_timer.ActivityTimer:
    source = tmp_path / "stand_in.cpp"
    source.write_text(STAND_IN)
    image = build(tmp_path, source).read_bytes()
    return activity_timer.ActivityTimer(image=image)  # loaded from memory, as the worker does


class StandInTimer:
    method = cupti_timing.METHOD

    def __init__(self, evict: bool):
        self.evict = evict
        self.log: list[str] = []

    def between(self) -> None:
        self.log.append("between")

    def timed_call(self, call, i):
        return call(i), 1

    def synchronize(self) -> None:
        self.log.append("sync")


def test_a_block_marks_each_call_and_gets_its_figure(stand_in):
    stand_in.lib.gat_set_own(4)
    timer = StandInTimer(evict=True)
    seen: list[tuple[int, object]] = []
    samples = cupti_timing.native_block(stand_in, timer, lambda i: i * 2, 4, None, lambda i, r: seen.append((i, r)))
    assert samples.device_ns == [10, 10, 10, 10]  # one tick of the stand-in's clock inside each window
    assert samples.e2e_ns == [1, 1, 1, 1] and samples.method == cupti_timing.METHOD
    assert seen == [(0, 0), (1, 2), (2, 4), (3, 6)]
    assert timer.log == ["between", "sync"] * 4


def test_a_block_whose_own_sweeps_left_no_record_has_no_figure(stand_in):
    """Something that takes CUPTI's records during a block (a solution registering its own
    buffers) hides the harness's sweeps as well as its own work: refused, not read as zero."""
    stand_in.lib.gat_set_own(3)
    with pytest.raises(cupti_timing.SweepsUnseen, match="3 activity records in 4 calls"):
        cupti_timing.native_block(stand_in, StandInTimer(evict=True), lambda i: None, 4, None, None)
    unswept = cupti_timing.native_block(stand_in, StandInTimer(evict=False), lambda i: None, 4, None, None)
    assert len(unswept.device_ns) == 4  # no sweeps asked for: nothing to miss


def test_a_failing_call_ends_the_block_and_keeps_its_own_error(stand_in):
    def call(i):
        if i == 2:
            raise ValueError("the solution's own")
        return i

    with pytest.raises(ValueError, match="the solution's own"):
        cupti_timing.native_block(stand_in, StandInTimer(evict=True), call, 4, None, None)
    stand_in.begin()  # the block was ended: CUPTI's kinds are off again, a new block begins


def test_cupti_s_refusal_is_an_error_with_its_words(stand_in):
    stand_in.begin()
    with pytest.raises(activity_timer.ActivityTimerError, match="begun twice"):
        stand_in.begin()


def test_no_toolkit_leaves_no_collector_and_says_why(tmp_path, monkeypatch):
    from gpuarena.harness.device import cupti_build

    monkeypatch.setenv("CUDA_HOME", str(tmp_path / "none"))
    monkeypatch.delenv("CUDA_PATH", raising=False)
    monkeypatch.setattr(cupti_build, "DEFAULT_CUDA", str(tmp_path / "none"))
    built, why = activity_timer.build_activity_timer()
    assert built is None and "CUDA_HOME" in why
    assert activity_timer.image_text() is None
