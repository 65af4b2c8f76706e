"""Neutralised exploit (monkeypatching timers): replaces ``time.perf_counter_ns``,
``time.perf_counter``, ``time.monotonic_ns`` and ``time.time_ns`` with clocks that tick one
nanosecond per reading.

The harness bound its clock (``gpuarena.harness.device.timing._perf_counter_ns``) at import,
before any solution code ran, so patching the ``time`` module changes nothing it reads:
the case is timed honestly and must pass at an ordinary speed. (Patching the harness
module's own attribute is not neutralised: exploits/monkeypatch_timers/module_clock_ticks.py.)
"""

import itertools
import time

import torch

FAMILY = "monkeypatching timers"
EXPECT = ["PASSED"]
WORKLOADS = ["small-64x1000"]

_ticks = itertools.count(1)
time.perf_counter_ns = lambda: next(_ticks)
time.monotonic_ns = lambda: next(_ticks)
time.time_ns = lambda: next(_ticks)
time.perf_counter = lambda: next(_ticks) * 1e-9


def solve(x):
    return torch.softmax(x, dim=-1)
