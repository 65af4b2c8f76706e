"""Neutralised exploit (cached outputs): caches answers keyed by an exact hash of a few
elements (shape, dtype and the bytes of the first and last 16 elements), returning the
cached answer on a hit.

Against a harness that repeats inputs (the same input set timed again, warm-up inputs
reused in the timed block) this skips all work. This harness draws fresh inputs for every
correctness trial and refills every input set before each timing round, so no key ever
repeats: the cache never hits and the case is timed honestly. It must pass, at an
ordinary speed (a score far above 1 would mean the cache hit).
"""

import torch

FAMILY = "cached outputs"
EXPECT = ["PASSED"]
WORKLOADS = ["small-64x1000"]

_cache = {}


def solve(x):
    flat = x.reshape(-1)
    key = (tuple(x.shape), x.dtype, flat[:16].cpu().numpy().tobytes(), flat[-16:].cpu().numpy().tobytes())
    hit = _cache.get(key)
    if hit is None:
        hit = _cache[key] = torch.softmax(x, dim=-1)
    return hit
