"""Side streams, expected to be timed fully (GPU): does all its work on a side stream and
returns without making the current stream wait for it (record_stream keeps the memory
alive). An events-on-the-current-stream timer would see almost nothing.

The harness synchronises the whole device and attributes kernels on every stream to the
call that launched them (CUPTI), so the output is complete when checked and the time is
the real time. It must pass, at an ordinary speed: not an exploit that wins, but one
that must be measured honestly.
"""

import torch

FAMILY = "side streams"
EXPECT = ["PASSED"]
DEVICES = ["cuda"]

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
