"""A Pallas solution of level1/softmax: JAX's kernel language, lowered to Triton on NVIDIA GPUs.

A file that imports jax is a JAX solution (Pallas kernels included): solve() takes and returns
JAX arrays, passed through DLPack without copies. The kernel handles one row (pallas_call over a
row; jax.vmap makes the rows the grid), in chunks of 2048 columns, so any row length works: a
first pass keeps a running maximum and a rescaled sum per lane, combined once at the end (an
online softmax), and a second pass writes exp(x - max) / sum. Arithmetic in float32, as
torch.softmax does for bfloat16. On the CPU the same kernel runs in Pallas's interpreter (slow,
but the same code: the CPU test runs it).

    gpuarena run level1/softmax examples/softmax/pallas.py --device cuda
"""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as plgpu

CHUNK = 2048


def _row_kernel(x_ref, y_ref):
    cols = x_ref.shape[0]
    chunks = pl.cdiv(cols, CHUNK)

    def load(i):
        idx = i * CHUNK + jnp.arange(CHUNK)
        mask = idx < cols
        x = plgpu.load(x_ref.at[idx], mask=mask, other=-jnp.inf).astype(jnp.float32)
        return jnp.where(mask, x, -jnp.inf), idx, mask

    def stats(i, carry):
        m, s = carry
        x, _, _ = load(i)
        m_new = jnp.maximum(m, x)
        s = s * jnp.exp(m - m_new) + jnp.where(x == -jnp.inf, 0.0, jnp.exp(x - m_new))
        return m_new, s

    m, s = jax.lax.fori_loop(0, chunks, stats, (jnp.full(CHUNK, -jnp.inf, jnp.float32), jnp.zeros(CHUNK, jnp.float32)))
    row_max = jnp.max(m)
    total = jnp.sum(jnp.where(m == -jnp.inf, 0.0, s * jnp.exp(m - row_max)))

    @pl.loop(0, chunks)
    def _(i):
        x, idx, mask = load(i)
        plgpu.store(y_ref.at[idx], (jnp.exp(x - row_max) / total).astype(y_ref.dtype), mask=mask)


@jax.jit
def solve(x):
    one_row = pl.pallas_call(
        _row_kernel,
        out_shape=jax.ShapeDtypeStruct(x.shape[1:], x.dtype),
        grid=(),
        compiler_params=plgpu.CompilerParams(num_warps=8),
        interpret=jax.default_backend() == "cpu",
    )
    return jax.vmap(one_row)(x)
