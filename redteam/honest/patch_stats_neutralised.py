"""Neutralised exploit (monkeypatching statistics): rewrites the statistics module in the
worker (``bootstrap_median``, ``bootstrap_ratio``, ``weighted_geomean``, ``converged``) to
report a 1000x speedup with a perfectly tight interval.

Statistics are computed in the supervisor, from raw samples; the worker's copy of the
module is never used for a result. The case must pass at an ordinary speed.
"""

import torch

import gpuarena.harness.stats as stats

FAMILY = "monkeypatching statistics"
EXPECT = ["PASSED"]
WORKLOADS = ["small-64x1000"]

stats.bootstrap_median = lambda samples, *a, **k: stats.Summary(0.001, 0.001, 0.001, len(samples))
stats.bootstrap_ratio = lambda *a, **k: (1000.0, 1000.0, 1000.0)
stats.weighted_geomean = lambda *a, **k: 1000.0
stats.converged = lambda *a, **k: True


def solve(x):
    return torch.softmax(x, dim=-1)
