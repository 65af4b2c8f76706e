"""Honest (GPU): captures the softmax in a CUDA graph per input buffer (static input and
output) and replays it; every call recomputes from the current contents of its input."""

import torch

FAMILY = "honest"
EXPECT = ["PASSED"]
DEVICES = ["cuda"]

_graphs = {}


def _softmax(x, out):
    out.copy_(torch.softmax(x.float(), dim=-1).to(x.dtype))


def solve(x):
    key = (x.data_ptr(), tuple(x.shape), x.dtype)
    if key not in _graphs:
        out = torch.empty_like(x)
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            _softmax(x, out)  # warm-up outside capture
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            _softmax(x, out)
        _graphs[key] = (graph, out)
    graph, out = _graphs[key]
    graph.replay()
    return out.clone()
