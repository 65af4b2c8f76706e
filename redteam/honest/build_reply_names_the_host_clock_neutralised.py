"""Neutralised exploit (monkeypatching timers): rewrites the worker's `build` reply to name a host-clock timing method
(``cuda-sync-wallclock``): the supervisor used to time the *reference* with the method the
worker named there, and on a GPU a host clock reads small kernels several times slower than
their device time, so the same honest kernel scored 2.83 instead of 1.65 (7-11x on the small
workloads, an H200).

What beats it: the supervisor chooses the method for both sides from its own options and
the backend (Supervisor._timer); the worker's harness says what its timer can do only in its
`prepare` reply, before any solution code runs, and nothing in a later reply changes the
method. The kernel is honest, so it passes, timed as any other.
"""

import torch

from gpuarena.harness import protocol
from gpuarena.harness.inside import worker

FAMILY = "monkeypatching timers"
EXPECT = ["PASSED"]
WORKLOADS = ["small-64x1000"]

_send_reply = getattr(worker, "_send_reply", protocol.send_reply)


def _forged(conn, message):
    if isinstance(message, dict) and message.get("op") == "build":
        message = {**message, "method": "cuda-sync-wallclock"}
    return _send_reply(conn, message)


protocol.send_reply = _forged
worker._send_reply = _forged


def solve(x):
    return torch.softmax(x, dim=-1)
