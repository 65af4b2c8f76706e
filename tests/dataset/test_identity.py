"""One problem per computation (issue 48): a problem's exact key is its reference's graph on its
shapes whatever its inputs are named, its family key the same graph on any shapes (dtypes and
layout kept); `gpuarena dataset distinct` counts them, `gpuarena dataset merge` folds a family
into one problem whose workloads are the members' shapes."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

from typer.testing import CliRunner

from gpuarena.cli.app import app
from gpuarena.dataset import traffic
from gpuarena.dataset.distinct import distinct, identities, kind, report
from gpuarena.dataset.identity import identity
from gpuarena.dataset.merge import _workloads, plan, write
from gpuarena.harness.problem_check import check_problem
from gpuarena.problems import load_problem
from gpuarena.problems.loader import discover
from gpuarena.problems.model import Workload

REPO = Path(__file__).resolve().parents[2]
DATASET = REPO / "dataset" / "problems"

RMSNORM = """
import torch

INPUTS = {{"{x}": 2, "{w}": 1}}
STRIDES = {strides}


def reference({x}, {w}):
    h = {x}.float()
    h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + {eps})
    return {w} * h.to({x}.dtype)


def make_inputs(axes, dtype, device, generator):
    made = {{}}
    for name, rank in INPUTS.items():
        shape = [axes[f"{{name}}_{{d}}"] for d in range(rank)]
        stride = STRIDES.get(name)
        if stride is None:
            made[name] = torch.randn(shape, generator=generator, device=device).to(dtype)
        else:  # a fixed layout, as a harvest records it: a slice of a wider storage
            storage = torch.randn(1 + sum((s - 1) * st for s, st in zip(shape, stride)), generator=generator)
            made[name] = storage.to(dtype).as_strided(shape, stride)
    return made
"""


def _problem(
    root: Path,
    name: str,
    shapes: list[tuple[int, int]],
    x: str = "x",
    w: str = "weight",
    eps: float = 1e-6,
    dtype: str = "float32",
    weight: float = 0.1,
    strides: dict[str, list[int]] | None = None,
    outside: float = 0.0,
) -> Path:
    """A harvested-style level-2 RMSNorm: axes `{input}_{d}`, one workload per (rows, cols)."""
    folder = root / "level2" / name
    folder.mkdir(parents=True)
    (folder / "reference.py").write_text(RMSNORM.format(x=x, w=w, eps=eps, strides=strides or {}))
    workloads = "".join(
        f'\n[[workloads]]\nname = "{name}-{rows}x{cols}"\naxes = {{ {x}_0 = {rows}, {x}_1 = {cols}, {w}_0 = {cols} }}\n'
        f'dtype = "{dtype}"\n'
        for rows, cols in shapes
    )
    tolerance = f"\n[tolerance]\n{dtype} = {{ atol = 1e-4, rtol = 1e-4, l2 = 1e-4, outside = {outside} }}\n"
    (folder / "problem.toml").write_text(
        f'name = "{name}"\nlevel = 2\nsummary = "RMSNorm"\nweight = {weight}\ntags = ["{name}"]\n'
        f'[provenance]\noperator = "module:{name.capitalize()}RMSNorm"\nmodels = ["{name} prefill"]\n'
        f"{tolerance if outside else ''}{workloads}"
    )
    return folder


def _keys(folder: Path) -> tuple[str, str]:
    found = identity(load_problem(folder, root=folder.parents[1]))
    assert found.error is None
    return found.exact, found.family


def test_names_do_not_count_shapes_make_a_family_dtype_eps_and_layout_another(tmp_path: Path) -> None:
    llama = _keys(_problem(tmp_path, "llama", [(64, 256), (8, 32)]))
    renamed = _keys(_problem(tmp_path, "mistral", [(64, 256), (8, 32)], x="hidden_states", w="scale"))
    wider = _keys(_problem(tmp_path, "qwen", [(128, 512), (8, 64)]))
    other_eps = _keys(_problem(tmp_path, "phi", [(64, 256), (8, 32)], eps=1e-5))
    half = _keys(_problem(tmp_path, "half", [(64, 256), (8, 32)], dtype="float16"))
    strided = _keys(_problem(tmp_path, "sliced", [(64, 256), (8, 32)], strides={"x": [1, 64]}))
    assert renamed == llama  # the same computation on the same shapes, whatever its names
    assert wider[0] != llama[0] and wider[1] == llama[1]  # other shapes: one family
    for other in (other_eps, half, strided):  # another constant, dtype or layout: another computation
        assert other[1] != llama[1]


def test_distinct_counts_per_level_and_its_op_families(tmp_path: Path) -> None:
    _problem(tmp_path, "llama", [(64, 256), (8, 32)])
    _problem(tmp_path, "mistral", [(64, 256), (8, 32)], x="h")
    _problem(tmp_path, "qwen", [(128, 512), (8, 64)])
    _problem(tmp_path, "phi", [(64, 256), (8, 32)], eps=1e-5)
    found = distinct(tmp_path)
    assert (found.problems, found.exact, found.distinct) == (4, 3, 2)
    assert [g.problems for g in found.duplicate_groups] == [["level2/llama", "level2/mistral"]]
    assert [g.problems for g in found.families] == [["level2/llama", "level2/mistral", "level2/qwen"]]
    (level,) = found.levels
    assert (level.level, level.distinct, level.largest_kind, level.largest_share) == (2, 2, "norm", 1.0)
    assert level.dominated


def test_op_families_leave_out_the_model_and_the_framework() -> None:
    assert kind("aten.mul.Tensor", 1) == kind("jax.lax.mul", 1) == "mul"
    assert kind("torch.nn.functional.gelu(approximate='tanh')", 1) == "gelu"
    assert kind("module:LlamaRMSNorm+residual", 2) == kind("scope:gemma_backbone/final_normalization", 2) == "norm"
    # a model's own name leads its classes, and is no part of the family
    assert kind("module:WhisperEncoderLayer", 4) == kind("module:BartEncoderLayer", 4) == "encoderlayer"
    assert kind("module:EfficientNetBlock", 3) == kind("module:T5Block", 4) == "block"
    assert kind("module:SegformerMixFFN", 3) == "mlp" and kind("module:T5LayerNorm", 2) == "norm"
    assert kind("module:Qwen3MoeAttention", 4) == kind("scope:llama_backbone/transformer_layer/self_attention", 4)


JAX_REFERENCE = """
import jax
import jax.numpy as jnp

INPUTS = {{"{a}": {{"rank": 2, "dtype": "float32", "stride": None}}, "{b}": {{"rank": 1, "dtype": "float32", "stride": None}}}}


@jax.jit
def reference({a}, {b}):
    t0 = jax.lax.broadcast_in_dim_p.bind({b}, broadcast_dimensions=(1,), shape=({rows}, {cols}), sharding=None)
    t1 = jax.lax.mul_p.bind({a}, t0, out_dtype=None)
    return t1
"""


def _jax(root: Path, name: str, rows: int, cols: int, a: str = "x0", b: str = "x1") -> Path:
    """A JAX problem as the harvester writes one: its sizes in its equations. Never imported here."""
    folder = root / "level1" / name
    folder.mkdir(parents=True)
    (folder / "reference.py").write_text(JAX_REFERENCE.format(a=a, b=b, rows=rows, cols=cols))
    (folder / "problem.toml").write_text(
        f'name = "{name}"\nlevel = 1\nsummary = "mul"\n[provenance]\nframework = "jax"\noperator = "jax.lax.mul"\n'
        f'[[workloads]]\nname = "{name}"\naxes = {{ {a}_0 = {rows}, {a}_1 = {cols}, {b}_0 = {cols} }}\n'
        'dtype = "float32"\n'
    )
    return folder


def test_jax_problems_are_keyed_from_their_source(tmp_path: Path) -> None:
    one = _keys(_jax(tmp_path, "jax-mul-a", 16, 64))
    renamed = _keys(_jax(tmp_path, "jax-mul-b", 16, 64, a="p", b="q"))
    wider = _keys(_jax(tmp_path, "jax-mul-c", 32, 128))
    assert renamed == one
    assert wider[0] != one[0] and wider[1] == one[1]
    # a JAX family joins only where it is an exact duplicate: its sizes are in its equations
    problems = discover(tmp_path)
    merged, _specs = plan(problems, identities(problems))
    (fold,) = merged.folds
    assert (fold.problem, fold.members, fold.exact) == ("level1/jax-mul-a", ["level1/jax-mul-b"], True)
    assert "only an exact duplicate joins" in merged.apart["level1/jax-mul-c"]


def test_merge_folds_a_family_into_one_problem_that_passes_check(tmp_path: Path) -> None:
    root = tmp_path / "problems"
    _problem(root, "llama", [(64, 256), (8, 32)], weight=0.3, outside=1e-6)
    _problem(root, "mistral", [(64, 256), (8, 32)], x="hidden_states", w="scale", weight=0.2, outside=4e-6)
    _problem(root, "qwen", [(128, 512), (8, 64)], weight=0.1)
    _problem(root, "sliced", [(32, 64)], strides={"x": [1, 32]}, weight=0.05)
    _problem(root, "sliced2", [(48, 64)], strides={"x": [1, 48]}, weight=0.01)  # column-major too
    problems = discover(root)
    merged, specs = plan(problems, identities(problems))
    assert merged.after == 3
    (fold,) = merged.folds
    assert (fold.problem, sorted(fold.members), fold.exact) == (
        "level2/llama",
        ["level2/mistral", "level2/qwen"],
        False,
    )
    assert "strides are fixed" in merged.apart["level2/sliced2"]  # its recorded strides fit only its shapes
    write(root, tmp_path / "merged", merged, specs)

    folder = tmp_path / "merged" / "level2" / "llama"
    spec = tomllib.loads((folder / "problem.toml").read_text())
    assert spec["weight"] == 0.6
    assert spec["provenance"]["models"] == ["llama prefill", "mistral prefill", "qwen prefill"]
    assert spec["tolerance"]["float32"]["outside"] == 4e-6  # the loosest member's
    names = {w["name"]: (w["axes"]["x_0"], w["axes"]["x_1"]) for w in spec["workloads"]}
    assert names == {
        "llama-64x256.mistral-64x256": (64, 256),  # a shape both models use: one workload naming both
        "llama-8x32.mistral-8x32": (8, 32),
        "qwen-128x512": (128, 512),
        "qwen-8x64": (8, 64),
    }
    assert not (tmp_path / "merged" / "level2" / "mistral").exists()
    assert (tmp_path / "merged" / "level2" / "sliced2").is_dir()
    merged_problem = load_problem(folder)  # bytes and FLOPs derived again, right for every joined shape
    assert spec["bytes"] and spec["flops"]
    for workload in merged_problem.spec.workloads:
        assert merged_problem.spec.cost(workload) == traffic.concrete(merged_problem, workload)[:2]
    checked = check_problem(folder, device="cpu")
    assert checked.ok, checked.errors
    again = distinct(tmp_path / "merged")
    assert (again.problems, again.distinct) == (3, 2)  # sliced and sliced2: one computation, two problems


def test_merge_keeps_dataset_json_in_step(tmp_path: Path) -> None:
    root = tmp_path / "problems"
    _problem(root, "llama", [(64, 256)], weight=0.3)
    _problem(root, "mistral", [(64, 256)], x="h", weight=0.2)
    entries = [
        {"problem": "level2/llama", "status": "kept", "weight": 0.3, "harvests": ["llama prefill"]},
        {"problem": "level2/mistral", "status": "kept", "weight": 0.2, "harvests": ["mistral prefill"]},
    ]
    index = {"harvests": ["h1", "h2"], "kept": 2, "left_out": 0, "left_out_share": 0.0, "entries": entries}
    (root / "dataset.json").write_text(json.dumps(index))
    result = CliRunner().invoke(
        app, ["dataset", "merge", str(root), "-o", str(tmp_path / "out"), "--json", str(tmp_path / "plan.json")]
    )
    assert result.exit_code == 0, result.output
    assert "2 problems -> 1" in result.output
    written = json.loads((tmp_path / "out" / "dataset.json").read_text())
    assert written["kept"] == 1
    assert written["entries"] == [
        {
            "problem": "level2/llama",
            "status": "kept",
            "weight": 0.5,
            "harvests": ["llama prefill", "mistral prefill"],
            "reasons": [],
            "merged": ["level2/mistral"],  # what `dataset weigh` maps the harvests' problem ids by
        }
    ]
    assert json.loads((tmp_path / "plan.json").read_text())["folds"][0]["members"] == ["level2/mistral"]
    refused = CliRunner().invoke(app, ["dataset", "merge", str(root), "-o", str(tmp_path / "out")])
    assert refused.exit_code != 0 and "not empty" in refused.output


def test_distinct_cli_reports_the_shipped_rmsnorms_as_one_computation(tmp_path: Path) -> None:
    """The shipped dataset is merged (issue 48): the four models' RMSNorm + residual are one problem
    whose workloads name them, and no two shipped level-2 problems compute alike on the same shapes."""
    out = tmp_path / "distinct.json"
    result = CliRunner().invoke(app, ["dataset", "distinct", str(DATASET / "level2"), "--json", str(out)])
    assert result.exit_code == 0, result.output
    found = json.loads(out.read_text())
    assert not [g for g in found["duplicate_groups"] if not any("jax-" in p for p in g["problems"])]
    residual = [p for p in (DATASET / "level2").iterdir() if p.name.endswith("rmsnorm_residual-9eb7422c")]
    names = " ".join(w.name for w in load_problem(residual[0], root=DATASET).spec.workloads)
    assert all(model in names for model in ("llama-prefill", "mistral-prefill", "qwen2-prefill", "qwen3-prefill"))
    assert found["distinct"] <= found["exact"] <= found["problems"]


def test_report_counts_an_untraceable_problem_alone(tmp_path: Path) -> None:
    folder = _problem(tmp_path, "broken", [(8, 32)])
    source = (folder / "reference.py").read_text().replace("    return weight * h", "    raise ValueError('no')")
    (folder / "reference.py").write_text(source)
    problems = discover(tmp_path)
    found = report(problems, identities(problems))
    assert found.untraced == ["level2/broken"] and found.distinct == 1


def test_a_shape_two_models_share_runs_where_either_ran() -> None:
    gpu = Workload(name="llama-prefill", axes={"x_0": 2048}, dtype="bfloat16", devices=["cuda"])
    cpu = Workload(name="tiny-prefill", axes={"x_0": 2048}, dtype="bfloat16", devices=["cpu"])
    other = Workload(name="llama-prefill", axes={"x_0": 4096}, dtype="bfloat16", devices=["cuda"])
    (joined, wider) = _workloads([("a", [gpu]), ("b", [cpu, other])])
    assert joined == {
        "name": "llama-prefill.tiny-prefill",
        "axes": {"x_0": 2048},
        "dtype": "bfloat16",
        "devices": ["cpu", "cuda"],
    }
    assert wider["name"] == "llama-prefill"
    (_, renamed) = _workloads([("a", [gpu]), ("b", [other])])
    assert renamed["name"] == "llama-prefill-2"  # another shape under a name taken: made unique
