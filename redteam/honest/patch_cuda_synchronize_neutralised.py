"""Neutralised exploit (monkeypatching synchronisation, GPU): replaces
``torch.cuda.synchronize``, ``torch.cuda.Stream.synchronize``, ``torch.cuda.Event.synchronize``
and the NVIDIA backend's own ``synchronize`` (its class's and its instance's) with no-ops, then does its work
on a side stream without joining it, so that a wall-clock timer would stop before the work
is done.

Per-call device time comes from CUPTI activity records of every kernel the call
launched, on any stream, which no Python patch can shorten; the worker copies the
outputs only after the device is idle. The case must pass at an ordinary speed. If the
worker's own synchronisation goes through the patched name, the copy can race the side
stream: a WRONG_VALUES here is a harness bug (sync not captured before the solution's import), not a win.
"""

import torch

from gpuarena.harness.device import nvidia

FAMILY = "monkeypatching synchronisation"
EXPECT = ["PASSED"]
DEVICES = ["cuda"]

_noop = lambda *args, **kwargs: None  # noqa: E731
torch.cuda.synchronize = _noop
torch.cuda.Stream.synchronize = _noop
torch.cuda.Event.synchronize = _noop
nvidia.NvidiaBackend.synchronize = _noop
nvidia.nvidia_backend().synchronize = _noop

_stream = None


def solve(x):
    global _stream
    if _stream is None:
        _stream = torch.cuda.Stream()
    _stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(_stream):
        y = torch.softmax(x.float(), dim=-1).to(x.dtype)
    y.record_stream(_stream)
    return y
