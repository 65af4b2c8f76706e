"""`gpuarena harvest jax:...`: a JAX model's primitives (level 1) and its layers' scopes (levels 2-4)
become problems whose references are JAX (the recorded primitives, bound with their recorded
parameters), checked, weighed by their measured share, and kept as JAX by `gpuarena dataset add`."""

from __future__ import annotations

import json
import math
import tomllib
from pathlib import Path

import pytest

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from typer.testing import CliRunner  # noqa: E402

from gpuarena.cli.app import app  # noqa: E402
from gpuarena.dataset import jax_harvest, jax_source, jax_trace  # noqa: E402
from gpuarena.dataset.assemble import add, model_slug  # noqa: E402
from gpuarena.dataset.jax_models import build_jax  # noqa: E402
from gpuarena.harness.problem_check import check_problem  # noqa: E402
from gpuarena.problems import load_problem  # noqa: E402


@pytest.fixture(scope="module")
def harvested(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("jax") / "tiny"
    # --min-share 0: every group is written or rejected on its merits, never dropped by a busy CPU's timing
    result = CliRunner().invoke(
        app, ["harvest", "jax:tiny-llama", "--seq", "16", "--repeats", "1", "--min-share", "0", "-o", str(out)]
    )
    assert result.exit_code == 0, result.output
    assert "wrote" in result.output
    return out


def test_a_jax_model_s_primitives_and_layers_become_checked_jax_problems(harvested):
    report = json.loads((harvested / "harvest.json").read_text())
    groups = report["groups"]
    written = [g for g in groups if g["status"] == "written"]
    assert {g["level"] for g in written} == {1, 2, 3, 4}  # primitives, norms, the MLP, attention and the layer
    assert math.isclose(sum(g["share"] for g in groups if g["kind"] == "op"), 1.0, rel_tol=1e-6)
    assert all(g["reasons"] for g in groups if g["status"] in ("metadata", "unsupported", "rejected", "below-share"))
    assert (harvested / "profile.jsonl").is_file() and report["command"].startswith("gpuarena harvest jax:tiny-llama")
    for group in written:
        folder = harvested / group["problem"]
        spec = tomllib.loads((folder / "problem.toml").read_text())
        assert spec["provenance"]["framework"] == "jax" and spec["level"] == group["level"]
        assert spec["name"].startswith("jax-") and "jax" in spec["tags"]
        assert "_p.bind(" in (folder / "reference.py").read_text()
    layer = next(g for g in written if g["op"] == "scope:tiny_llama/layer")
    assert layer["level"] == 4 and layer["calls"] == 2  # the two layers compute alike: one group
    assert check_problem(harvested / layer["problem"]).ok
    # the degenerate filter holds for JAX references too: the mask's comparison has a constant output
    assert any(g["status"] == "rejected" for g in groups)


def test_a_whole_forward_written_as_a_reference_computes_what_the_model_did():
    """The writer's lines (primitives, their parameters, literals, the inlined jit and
    custom-derivative calls) run on the forward's own inputs give the forward's outputs."""
    workload = build_jax("jax:tiny-llama", "prefill", batch=1, seq=8)
    trace = jax_trace.flatten(jax.make_jaxpr(workload.forward)(*workload.arguments))
    jax_trace.run(trace, workload.arguments, repeats=0)
    piece = jax_harvest.Piece(trace, trace.equations, lambda value, inside: value in trace.outputs)
    values = {**trace.constants, **dict(zip(trace.inputs, workload.arguments))}
    source = (
        "def whole("
        + ", ".join(f"x{k}" for k in range(len(piece.inputs)))
        + "):\n"
        + "".join(f"    {line}\n" for line in piece.lines)
    )
    scope: dict = {"jax": jax, "jnp": jnp}
    exec(jax_source.SIZES_SOURCE + "\n\n" + source, scope)  # as the template holds `_sizes`
    got = scope["whole"](*[values[i] for i in piece.inputs])
    np.testing.assert_allclose(np.asarray(got), np.asarray(workload.forward(*workload.arguments)), rtol=1e-5, atol=1e-5)


def test_a_scope_s_outputs_are_what_equations_outside_it_use_wherever_they_are():
    """A scope's equations need not be contiguous (an einsum's operand transposed inside the
    softmax's vmap scope, after the einsum that took the softmax): its outputs are the values an
    equation outside it takes, not those taken after its last equation."""

    def forward(x, v):
        with jax.named_scope("model"):
            with jax.named_scope("inner"):
                p = jax.nn.relu(x) * 2.0
            y = p + 1.0
            with jax.named_scope("inner"):
                vt = v.T * 3.0
            return y @ vt

    x, v = jnp.ones((4, 4)), jnp.ones((4, 4))
    trace = jax_trace.flatten(jax.make_jaxpr(forward)(x, v))
    jax_trace.run(trace, [x, v], repeats=0)
    inner = [e for e in trace.equations if e.scope == "model/inner"]
    piece = jax_harvest.Piece(trace, inner, jax_harvest._needed_outside(trace))
    assert len(piece.outputs) == 2 and piece.lines[-1].startswith("return (")  # relu's, used by the add, and v's


@pytest.mark.parametrize(
    "value",
    [
        jnp.dtype("bfloat16"),
        jax.lax.Precision.HIGHEST,
        (1,),
        ((1, 2), (0,)),
        float("-inf"),
        jax.lax.GatherDimensionNumbers(offset_dims=(1,), collapsed_slice_dims=(0,), start_index_map=(0,)),
        jax.lax.GatherScatterMode.FILL_OR_DROP,
        None,
        True,
        3,
    ],
)
def test_parameters_are_written_as_source_that_rebuilds_them(value):
    rebuilt = eval(jax_source.param_source(value), {"jax": jax, "jnp": jnp})
    assert rebuilt == value or (isinstance(value, float) and rebuilt == value)
    assert type(rebuilt) is type(value) or isinstance(value, np.dtype)


def test_a_parameter_that_cannot_be_written_says_why():
    with pytest.raises(jax_source.Unwritable, match="function"):
        jax_source.param_source(lambda x: x)


def test_the_dataset_keeps_a_jax_harvest_s_references_as_jax(harvested, tmp_path):
    dataset = add([harvested], tmp_path / "dataset", check=False)
    kept = [e.problem for e in dataset.entries if e.status == "kept"]
    assert kept
    for problem in kept:
        folder = tmp_path / "dataset" / problem
        assert load_problem(folder).spec.provenance.framework == "jax"
        assert "_p.bind(" in (folder / "reference.py").read_text()  # not rewritten as aten calls
    assert model_slug("jax:keras:LlamaBackbone,num_layers=4") == "jax-llama"
    assert model_slug("jax:tiny-llama") == "jax-tiny-llama"


def test_jax_harvests_refuse_what_they_cannot_do_with_a_reason(tmp_path):
    runner = CliRunner()
    if not _jax_gpus():  # a GPU's harvest: tests/gpu/test_jax_harvest_gpu.py
        refused = runner.invoke(app, ["harvest", "jax:tiny-llama", "--device", "cuda", "-o", str(tmp_path / "a")])
        assert refused.exit_code != 0 and "--device cuda: JAX has no gpu here" in refused.output
    refused = runner.invoke(app, ["harvest", "jax:tiny-llama", "--device", "tpu", "-o", str(tmp_path / "a")])
    assert refused.exit_code != 0 and "use cpu, cuda or cuda:N" in refused.output
    refused = runner.invoke(app, ["harvest", "jax:tiny-llama", "--phase", "decode", "-o", str(tmp_path / "b")])
    assert refused.exit_code != 0 and "prefill only" in refused.output
    refused = runner.invoke(app, ["harvest", "jax:nothing", "-o", str(tmp_path / "c")])
    assert refused.exit_code != 0 and "unknown JAX model" in refused.output
    assert not any(tmp_path.iterdir())


def _jax_gpus() -> int:
    import jax

    try:
        return len(jax.devices("gpu"))
    except RuntimeError:
        return 0
