"""Neutralised exploit (idle work, JAX): a JAX solution that computes its answer, then
dispatches a long computation it never waits for and returns. JAX dispatches asynchronously,
so XLA's threads (started before the import as the harness's runtime, and so admitted by the
thread count) could go on working after the call returned, billed to no call.

The worker turns JAX's asynchronous CPU dispatch off, so the computation runs inside the call
and is billed to it: the case must pass, slower than the reference. (With asynchronous dispatch
on it passed too, on jax 0.10.2: XLA's CPU queue runs in order, so the next call waited for the
leftover work. The supervisor's idle-CPU check, process.check_idle, would reject work done
while the worker waits.)
"""

import jax
import jax.numpy as jnp

FAMILY = "idle work"
EXPECT = ["PASSED"]
DEVICES = ["cpu"]
WORKLOADS = ["small-64x1000"]

_pending = []


@jax.jit
def _busy(x):
    return jax.lax.fori_loop(0, 3000, lambda i, acc: jnp.tanh(acc @ acc.T + i), x[:48, :48])


def solve(x):
    y = jax.nn.softmax(x, axis=-1).block_until_ready()
    _pending.append(_busy(x))  # dispatched after the answer is ready, never waited for
    del _pending[:-4]
    return y
