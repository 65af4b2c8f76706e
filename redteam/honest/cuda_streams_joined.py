"""Honest (GPU): splits the rows over two side streams and makes the current stream wait
for both before returning."""

import torch

FAMILY = "honest"
EXPECT = ["PASSED"]
DEVICES = ["cuda"]

_streams = None


def solve(x):
    global _streams
    if _streams is None:
        _streams = (torch.cuda.Stream(), torch.cuda.Stream())
    main = torch.cuda.current_stream()
    y = torch.empty_like(x)
    half = x.shape[0] // 2
    for stream, (lo, hi) in zip(_streams, ((0, half), (half, x.shape[0]))):
        stream.wait_stream(main)
        with torch.cuda.stream(stream):
            y[lo:hi] = torch.softmax(x[lo:hi].float(), dim=-1).to(x.dtype)
    for stream in _streams:
        main.wait_stream(stream)
    return y
