"""Neutralised exploit (monkeypatching timers, GPU): makes ``torch.cuda.Event.elapsed_time``
return 0.001 ms and ``torch.cuda.Event.record`` a no-op, which would fool a harness that
timed with CUDA events created in the worker.

The harness times with CUPTI device records (or a device-wide synchronize and its own
captured clock), not with events, so nothing changes. Must pass at an ordinary speed.
"""

import torch

FAMILY = "monkeypatching timers"
EXPECT = ["PASSED"]
DEVICES = ["cuda"]

torch.cuda.Event.elapsed_time = lambda self, end: 0.001
torch.cuda.Event.record = lambda self, stream=None: None


def solve(x):
    return torch.softmax(x.float(), dim=-1).to(x.dtype)
