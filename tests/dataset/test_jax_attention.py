"""cuDNN's fused attention in a JAX harvest (jax_source.attention_source): KerasHub's layers run
`dot_product_attention_fwd_wrapper` on a GPU, whose `MaskType` parameter kept the harvest from
writing the attention and every block that holds it (stop 72, Llama 2 7B, Mistral 7B and Gemma 2B
on an H200). It is written as the portable `jax.nn.dot_product_attention`, which computes on the
CPU what cuDNN's primitive computes: the primitive is traced here (tracing needs no GPU) and the
written reference is run against attention computed in NumPy."""

from __future__ import annotations

import numpy as np
import pytest

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402

from gpuarena.dataset import jax_source  # noqa: E402
from gpuarena.dataset.jax_harvest import Piece, level_of  # noqa: E402
from gpuarena.dataset.jax_trace import _info, flatten  # noqa: E402

fused = pytest.importorskip("jax._src.cudnn.fused_attention_stablehlo")


def _traced(q, k, v, bias, **params):
    """The primitive bound as cuDNN's `dot_product_attention` binds it, traced; the trace's
    values described as a harvest's run describes them."""
    empty = np.zeros((0,), dtype=np.float32)
    settings = (
        dict(
            scale=0.25,
            seed=42,
            dropout_rate=0.0,
            variadic_args=(bias is not None, False),
            mask_type=fused.MaskType.NO_MASK,
            layout=fused.AttentionLayout.BTNH.value,
            sliding_window_length=None,
            is_training=False,
        )
        | params
    )

    def forward(q, k, v, bias, *rest):
        return fused._dot_product_attention_fwd_p_wrapper.bind(q, k, v, bias, *rest, **settings)

    given = [q, k, v, empty if bias is None else bias] + [empty] * 6
    trace = flatten(jax.make_jaxpr(forward)(*given))
    (eqn,) = trace.equations
    for value_id, value in zip(trace.inputs, given):
        trace.info[value_id] = _info(value)
    out = np.zeros(q.shape, dtype=np.float32)
    trace.info[eqn.outputs[0]] = _info(out)
    return trace, eqn


def _written(trace, eqn):
    piece = Piece(trace, [eqn], lambda value, inside: value in trace.outputs)
    source = f"def reference({', '.join(f'x{i}' for i in range(len(piece.inputs)))}):\n"
    source += "".join(f"    {line}\n" for line in piece.lines)
    namespace = {"jax": jax, "jnp": jnp}
    exec(source, namespace)
    return piece, source, namespace["reference"]


def _attention(q, k, v, bias, scale, allowed):
    """(batch, tokens, heads, head_dim) attention in float64, key/value heads shared by groups
    of query heads; allowed[i, j]: query i may see key j."""
    heads, kv_heads = q.shape[2], k.shape[2]
    k, v = (np.repeat(t, heads // kv_heads, axis=2).astype(np.float64) for t in (k, v))
    scores = np.einsum("bthd,bshd->bhts", q.astype(np.float64), k) * scale
    if bias is not None:
        scores = scores + bias
    scores = np.where(allowed, scores, -np.inf)
    weights = np.exp(scores - scores.max(-1, keepdims=True))
    weights /= weights.sum(-1, keepdims=True)
    return np.einsum("bhts,bshd->bthd", weights, v)


def test_cudnn_attention_is_written_as_jax_nn_s_and_computes_the_same():
    rng = np.random.default_rng(0)
    q = rng.standard_normal((2, 8, 4, 16), dtype=np.float32)
    k, v = (rng.standard_normal((2, 8, 2, 16), dtype=np.float32) for _ in range(2))  # grouped heads
    bias = rng.standard_normal((1, 1, 8, 8), dtype=np.float32)
    trace, eqn = _traced(q, k, v, bias, mask_type=fused.MaskType.CAUSAL)
    piece, source, reference = _written(trace, eqn)
    assert "jax.nn.dot_product_attention(x0, x1, x2, bias=x3, scale=0.25, is_causal=True)" in source
    assert len(piece.inputs) == 4  # the six empty placeholders are written in, not drawn
    out = reference(q, k, v, bias)
    causal = np.tril(np.ones((8, 8), dtype=bool))
    np.testing.assert_allclose(np.asarray(out), _attention(q, k, v, bias, 0.25, causal), rtol=1e-5, atol=1e-5)
    assert level_of([eqn]) == 4


def test_heads_second_and_a_sliding_window_are_written_as_jax_nn_s():
    rng = np.random.default_rng(1)
    q, k, v = (rng.standard_normal((1, 2, 6, 8), dtype=np.float32) for _ in range(3))  # (batch, heads, tokens, dim)
    trace, eqn = _traced(q, k, v, None, layout=fused.AttentionLayout.BNTH.value, sliding_window_length=3)
    _, source, reference = _written(trace, eqn)
    assert "bias=None" in source and "local_window_size=(3 - 1, 0)" in source
    out = reference(q, k, v)
    tokens = np.arange(6)
    window = (tokens[None, :] <= tokens[:, None]) & (tokens[None, :] >= tokens[:, None] - 2)
    heads_third = [np.swapaxes(t, 1, 2) for t in (q, k, v)]
    expected = np.swapaxes(_attention(*heads_third, None, 0.25, window), 1, 2)
    np.testing.assert_allclose(np.asarray(out), expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    ("params", "why"),
    [
        ({"is_training": True}, "training outputs"),
        ({"dropout_rate": 0.1}, "dropout"),
        ({"mask_type": fused.MaskType.PADDING}, "the mask PADDING"),
    ],
)
def test_what_a_forward_pass_does_not_use_is_refused_with_the_reason(params, why):
    rng = np.random.default_rng(2)
    q, k, v = (rng.standard_normal((1, 4, 2, 8), dtype=np.float32) for _ in range(3))
    trace, eqn = _traced(q, k, v, None, **params)
    if params.get("is_training"):  # the softmax statistics are a second output
        trace.info[eqn.outputs[1]] = _info(np.zeros((1, 2, 4), dtype=np.float32))
    with pytest.raises(jax_source.Unwritable, match=why):
        _written(trace, eqn)
