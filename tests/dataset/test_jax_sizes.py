"""A JAX reference's sizes at a smaller workload (dataset/jax_sizes.py): a GPU harvest's layer is
traced at the model's sizes (Llama 2 7B: 2048 tokens, width 4096), and its body holds them (a
broadcast's `shape`, a split's `sizes`, the RMSNorm's mean over 4096). The CPU checks it at
`scale_down`'s workload, every size divided by one factor: 12 of the 81 problems of stop 72's
harvests failed there ("Sum of sizes 128 must be equal to dimension 3"). The layer traced again at
half the model's sizes tells which numbers are sizes; written as S(n), the reference computes at
the small shapes what the model computes at them."""

from __future__ import annotations

import ast
import json
import tomllib

import numpy as np
import pytest

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402

from gpuarena.dataset import jax_harvest, jax_identity, jax_sizes, jax_source, jax_trace  # noqa: E402
from gpuarena.dataset.assemble import add  # noqa: E402
from gpuarena.dataset.small_workload import scale_down  # noqa: E402

HEADS = 4


def _layer(x, w, scale=None):
    """An RMSNorm (a mean over the width: a literal of it), heads of width // HEADS, a rotary-style
    split of each head in halves, a table broadcast over the tokens, and a scale of 1/sqrt(head)."""
    tokens, width = x.shape[1], x.shape[2]
    y = x * jax.lax.rsqrt(jnp.mean(x * x, axis=-1, keepdims=True) + 1e-6) * w
    heads = y.reshape(x.shape[0], tokens, HEADS, width // HEADS)
    first, second = jnp.split(heads, 2, axis=-1)
    table = jnp.broadcast_to(jnp.arange(tokens, dtype=x.dtype)[None, :, None, None], first.shape) / tokens
    out = jnp.concatenate([first * table - second, second * table + first], axis=-1)
    return out.reshape(x.shape) * (scale or (width // HEADS) ** -0.5)


def _inputs(tokens: int, width: int, seed: int = 0) -> list:
    rng = np.random.default_rng(seed)
    return [
        jnp.asarray(rng.standard_normal((1, tokens, width)), dtype=jnp.float32),
        jnp.asarray(rng.standard_normal((width,)), dtype=jnp.float32),
    ]


def _piece(tokens: int, width: int, scale: float | None = None) -> jax_harvest.Piece:
    args = _inputs(tokens, width)
    trace = jax_trace.flatten(jax.make_jaxpr(lambda x, w: _layer(x, w, scale))(*args))
    jax_trace.run(trace, args, repeats=0)
    return jax_harvest.Piece(trace, trace.equations, lambda value, inside: value in trace.outputs)


def _function(piece: jax_harvest.Piece):
    source = f"def reference({', '.join(f'x{k}' for k in range(len(piece.inputs)))}):\n"
    source += "".join(f"    {line}\n" for line in piece.lines)
    namespace = {"jax": jax, "jnp": jnp}
    exec(jax_source.SIZES_SOURCE + "\n\n" + source, namespace)
    return source, namespace["reference"]


def _sized(tokens: int = 256, width: int = 512, scale: float | None = None) -> jax_harvest.Piece:
    piece = _piece(tokens, width, scale)
    piece.size_by(_piece(tokens // 2, width // 2, scale))
    return piece


def test_a_layer_traced_at_model_sizes_computes_the_model_at_smaller_workloads():
    recorded = {"x0_0": 1, "x0_1": 256, "x0_2": 512, "x1_0": 512}
    piece = _sized()
    source, reference = _function(piece)
    assert piece.sized and source.splitlines()[1] == "    S = _sizes(((1, 256, 512), (512,)), (x0, x1, ))"
    assert "new_sizes=(1, S(256), 4, S(128))" in source and "S(512.0)" in source  # heads stay 4
    assert "sizes=(S(64), S(64))" in source  # the half head: a size below 32 too, in a smaller model
    named = jax_sizes.sizes_in(source)
    for axes in (recorded, scale_down(recorded, named), {"x0_0": 1, "x0_1": 32, "x0_2": 64, "x1_0": 64}):
        x, w = _inputs(axes["x0_1"], axes["x0_2"], seed=1)
        # the scale is a float that is not a size: a constant of the problem, kept as recorded
        expected = _layer(x, w, scale=128**-0.5)
        np.testing.assert_allclose(np.asarray(reference(x, w)), np.asarray(expected), rtol=2e-5, atol=2e-5)
    assert scale_down(recorded, named) == {"x0_0": 1, "x0_1": 128, "x0_2": 256, "x1_0": 256}


def test_without_the_second_trace_the_small_workload_contradicts_the_body():
    """The failure of stop 72's harvests, kept: the recorded numbers at smaller inputs."""
    piece = _piece(256, 512)
    source, reference = _function(piece)
    assert not piece.sized and "S(" not in source
    with pytest.raises((TypeError, ValueError)):
        reference(*_inputs(128, 256))


def test_shapes_no_one_factor_makes_are_refused_with_the_reason():
    _, reference = _function(_sized())
    with pytest.raises(ValueError, match="divided by one factor"):
        reference(*_inputs(128, 128))  # the tokens halved, the width quartered
    with pytest.raises(ValueError, match="does not divide by the workload's factor 128"):
        reference(*_inputs(2, 4))  # a head's half, 64, does not divide by 128
    assert scale_down({"x_0": 2048, "x_1": 4096}, [64]) == {"x_0": 128, "x_1": 256}  # f kept at 16: 64 / 16 = 4


def test_which_numbers_are_sizes_is_read_by_place():
    assert jax_sizes.sized_lines(
        ["y = f(x, shape=(1, 64, 8), scale=0.125)"], ["y = f(x, shape=(1, 32, 8), scale=0.17)"]
    ) == ["y = f(x, shape=(1, S(64), 8), scale=0.125)"]
    assert jax_sizes.sized_lines(["t12 = g(x0, 'float32', 64)"], ["t12 = g(x0, 'float32', 32)"]) == [
        "t12 = g(x0, 'float32', S(64))"
    ]
    assert jax_sizes.sized_lines(["y = f(x, 64)"], ["y = h(x, 32)"]) is None  # another primitive
    assert jax_sizes.sized_lines(["y = f(x, 64)"], ["y = f(x, 16)"]) is None  # an integer by another ratio
    assert jax_sizes.sized_lines(["y = f(x)"], ["y = f(x)", "z = y"]) is None
    assert jax_sizes.sizes_in("a = S(64) + S(4096.0) + S(8)") == [64, 8]


def _family(source: str) -> str:
    """The family text jax_identity keys a reference by: its body renamed, its sizes blanked."""
    function = ast.parse(source).body[0]
    assert isinstance(function, ast.FunctionDef)
    return jax_identity.family_text(jax_identity.renamed(function)[0])


def test_one_layer_at_two_widths_is_one_family_and_its_axes_still_count():
    big, _ = _function(_sized(256, 512, scale=0.125))
    small, _ = _function(_sized(64, 128, scale=0.125))
    assert big != small and _family(big) == _family(small)
    other, _ = _function(_sized(64, 128))  # its own scale: another constant, another family
    assert _family(other) != _family(small)
    assert "dimension=3" in big and _family(big.replace("dimension=3", "dimension=2")) != _family(big)


def _scoped(x, w):
    with jax.named_scope("model"):
        with jax.named_scope("layer_0"):
            return _layer(x, w)


@pytest.mark.parametrize("halved", [True, False])
def test_a_gpu_harvest_s_layer_passes_the_cpu_s_check_at_its_small_workload(tmp_path, halved):
    """harvest_jax with the model at half its sizes, its folder assembled as a GPU harvest's (the
    recorded shapes for the GPU, scale_down's for the CPU), checked on the CPU."""
    out = tmp_path / "harvest"
    jax_harvest.harvest_jax(
        _scoped,
        _inputs(512, 1024),
        out,
        model="jax:test-layer",
        phase="prefill",
        sizes={"batch": 1, "seq": 512},
        command="test",
        min_share=0.0,
        repeats=0,
        halved=(_scoped, _inputs(256, 512)) if halved else None,
    )
    report = json.loads((out / "harvest.json").read_text())
    layer = next(g for g in report["groups"] if g["op"] == "scope:model/layer")
    assert layer["status"] == "written", layer
    report["device"] = "cuda"  # as `--device cuda` writes it: the recorded workload is the GPU's
    (out / "harvest.json").write_text(json.dumps(report))
    dataset = add([out], tmp_path / "dataset", check=True)
    entry = next(e for e in dataset.entries if e.problem == layer["problem"])
    if not halved:
        assert entry.status == "left-out" and "workload small" in entry.reasons[0]
        return
    assert entry.status == "kept", entry.reasons
    spec = tomllib.loads((tmp_path / "dataset" / layer["problem"] / "problem.toml").read_text())
    small = next(w for w in spec["workloads"] if w["name"] == "small")
    assert small["axes"]["x0_1"] < 512 and small["devices"] == ["cpu"]
