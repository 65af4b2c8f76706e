"""Device-time attribution from profiler events, checked on synthetic events (the GPU run checks real ones)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
import torch

from gpuarena.harness.device.block import CALL_RANGE, HARNESS_RANGE
from gpuarena.harness.device.cupti_timing import device_busy_ns

CPU, CUDA = torch.autograd.DeviceType.CPU, torch.autograd.DeviceType.CUDA


@dataclass
class Event:
    name_: str
    device: torch.autograd.DeviceType
    start: int
    duration: int
    corr: int = 0
    annotation: bool = False

    def name(self):
        return self.name_

    def device_type(self):
        return self.device

    def start_ns(self):
        return self.start

    def duration_ns(self):
        return self.duration

    def correlation_id(self):
        return self.corr

    def is_user_annotation(self):
        return self.annotation


def call(start, end):
    return Event(CALL_RANGE, CPU, start, end - start, corr=1)


def launch(at, corr):
    return Event("cudaLaunchKernel", CPU, at, 5, corr=corr)


def kernel(start, end, corr):
    return Event("kernel", CUDA, start, end - start, corr=corr)


def test_sequential_kernels_sum():
    events = [call(0, 1000), launch(10, 7), kernel(100, 200, 7), launch(20, 8), kernel(250, 400, 8)]
    assert device_busy_ns(events, 1) == [250]


def test_side_stream_work_counts_and_overlap_is_not_double_counted():
    events = [call(0, 1000), launch(10, 7), kernel(100, 300, 7), launch(20, 8), kernel(200, 500, 8)]
    assert device_busy_ns(events, 1) == [400]


def harness(start, end):
    return Event(HARNESS_RANGE, CPU, start, end - start, corr=1)


def test_harness_work_outside_windows_is_excluded():
    # the L2 sweep is launched before the window opens, even if its kernel ends inside it
    events = [harness(-60, -1), launch(-50, 3), kernel(-40, 5, 3), call(0, 1000), launch(10, 7), kernel(100, 200, 7)]
    assert device_busy_ns(events, 1) == [100]


def test_work_launched_outside_the_windows_and_the_harness_is_billed_to_the_call_before():
    # a hook on the harness's copy-out, or a deferred launch, after the call returned: its
    # kernel belongs to the call that just ended, not to nobody
    events = [
        call(0, 1000),
        harness(1001, 1500),
        launch(1100, 5),
        kernel(1200, 1300, 5),
        launch(1600, 6),
        kernel(1700, 2000, 6),
        call(3000, 4000),
        launch(3010, 7),
        kernel(3100, 3150, 7),
        launch(4200, 8),
        kernel(4300, 4500, 8),
    ]
    assert device_busy_ns(events, 2) == [300, 250]


def test_work_launched_before_the_first_call_outside_the_harness_is_billed_to_it():
    events = [launch(-50, 3), kernel(-40, 5, 3), call(0, 1000), launch(10, 7), kernel(100, 200, 7)]
    assert device_busy_ns(events, 1) == [145]


def test_work_is_attributed_to_the_call_that_launched_it():
    events = [
        call(0, 1000),
        call(2000, 3000),
        launch(10, 7),
        kernel(100, 200, 7),
        launch(2010, 9),
        kernel(2100, 2400, 9),
    ]
    assert device_busy_ns(events, 2) == [100, 300]


def test_gpu_annotations_are_not_work():
    events = [
        call(0, 1000),
        launch(10, 7),
        kernel(100, 200, 7),
        launch(20, 8),
        kernel(600, 700, 8),
        Event(CALL_RANGE, CUDA, 100, 600, corr=1, annotation=True),
    ]
    assert device_busy_ns(events, 1) == [200]


def test_cpu_op_ids_do_not_collide_with_launch_correlations():
    # aten ops carry ids from another counter; only cuda*/cu* calls are launch stamps
    events = [call(0, 1000), launch(10, 7), Event("aten::add", CPU, 5000, 10, corr=7), kernel(100, 200, 7)]
    assert device_busy_ns(events, 1) == [100]


def test_window_count_mismatch_is_an_error():
    with pytest.raises(RuntimeError):
        device_busy_ns([call(0, 10)], 2)
