"""Bytes and FLOPs for every dataset problem (issue 48): dataset/traffic.py derives a problem's
`bytes` and `flops` formulas from its reference, scripts/derive_traffic.py writes them into
problem.toml as text, and the loader evaluates them per workload to what a trace counts."""

from __future__ import annotations

import importlib.util
import math
import shutil
import textwrap
from pathlib import Path
from types import ModuleType

import pytest

from gpuarena.dataset.traffic import concrete, derive
from gpuarena.problems.loader import load_problem

REPO = Path(__file__).resolve().parents[2]
DATASET = REPO / "dataset" / "problems"

MAKE_INPUTS = """
def make_inputs(axes, dtype, device, generator):
    made = {}
    for name, rank in RANKS.items():
        shape = [axes[f"{name}_{d}"] for d in range(rank)]
        kind = DTYPES.get(name, dtype)
        if kind.is_floating_point:
            made[name] = torch.randn(shape, generator=generator, device=device).to(kind)
        else:
            made[name] = torch.randint(0, BELOW, shape, generator=generator, device=device).to(kind)
    for name, (size, dim) in EXPANDED.items():  # a stride-0 input: one row broadcast
        made[name] = made[name].narrow(dim, 0, 1).expand(made[name].shape)
    return made
"""


def _problem(
    root: Path,
    name: str,
    body: str,
    ranks: dict[str, int],
    workloads: list[dict[str, int]],
    dtype: str = "float32",
    extra: str = "",
) -> Path:
    folder = root / "level1" / name
    folder.mkdir(parents=True)
    header = f"import torch\n\nRANKS = {ranks!r}\nDTYPES = {{}}\nEXPANDED = {{}}\nBELOW = 4\n{extra}\n"
    (folder / "reference.py").write_text(header + textwrap.dedent(body) + MAKE_INPUTS)
    blocks = []
    for i, axes in enumerate(workloads):
        inline = ", ".join(f"{k} = {v}" for k, v in axes.items())
        blocks.append(f'[[workloads]]\nname = "w{i}"\naxes = {{ {inline} }}\ndtype = "{dtype}"\n')
    (folder / "problem.toml").write_text(
        f'name = "{name}"\nlevel = 1\nsummary = "a test"\ntags = ["harvested"]\n\n'
        f'[provenance]\noperator = "test"\n\n' + "\n".join(blocks)
    )
    return folder


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("derive_traffic", REPO / "scripts" / "derive_traffic.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


MATMUL_SHAPES = [
    {"a_0": 64, "a_1": 48, "b_0": 48, "b_1": 40},
    {"a_0": 8, "a_1": 96, "b_0": 96, "b_1": 24},
    {"a_0": 1, "a_1": 16, "b_0": 16, "b_1": 32},
]


def test_a_matmul_costs_2mnk_flops_and_reads_its_operands_once(tmp_path: Path) -> None:
    folder = _problem(tmp_path, "mm", "def reference(a, b):\n    return a @ b\n", {"a": 2, "b": 2}, MATMUL_SHAPES)
    problem = load_problem(folder)
    derived = derive(problem)
    assert derived.reason is None and derived.bytes and derived.flops
    for w in problem.spec.workloads:
        m, k, n = w.axes["a_0"], w.axes["a_1"], w.axes["b_1"]
        assert derived.counts[w.name] == ((m * k + k * n + m * n) * 4, 2 * m * n * k)
    _script().main([str(folder)])
    written = load_problem(folder)
    assert written.spec.bytes == derived.bytes and written.spec.flops == derived.flops
    for w in written.spec.workloads:
        m, k, n = w.axes["a_0"], w.axes["a_1"], w.axes["b_1"]
        assert written.spec.cost(w) == ((m * k + k * n + m * n) * 4, 2 * m * n * k)


def test_an_elementwise_problem_moves_its_inputs_and_outputs_once(tmp_path: Path) -> None:
    body = "def reference(x, y):\n    return torch.relu(x * y + x)\n"
    shapes = [{"x_0": 32, "x_1": 40, "y_0": 32, "y_1": 40}, {"x_0": 512, "x_1": 768, "y_0": 512, "y_1": 768}]
    folder = _problem(tmp_path, "ew", body, {"x": 2, "y": 2}, shapes, dtype="bfloat16")
    problem = load_problem(folder)
    derived = derive(problem)
    for w in problem.spec.workloads:
        numel = w.axes["x_0"] * w.axes["x_1"]
        moved, flops = derived.counts[w.name]
        assert moved == 3 * numel * 2  # x and y read, the output written, bfloat16
        assert flops == 3 * numel  # mul, add, relu: one FLOP an element each
    _script().main([str(folder)])
    for w in load_problem(folder).spec.workloads:
        numel = w.axes["x_0"] * w.axes["x_1"]
        assert load_problem(folder).spec.cost(w) == (3 * numel * 2, 3 * numel)


def test_broadcast_reduction_partial_and_expanded_reads(tmp_path: Path) -> None:
    """A bias broadcast is read once, not per row; a reduction counts its input's elements; an
    input gathered from counts the rows gathered; a stride-0 input counts one slice of it."""
    shapes = [{"x_0": 64, "x_1": 48, "b_0": 48}, {"x_0": 16, "x_1": 80, "b_0": 80}]
    folder = _problem(tmp_path, "bias", "def reference(x, b):\n    return (x + b).sum(-1)\n", {"x": 2, "b": 1}, shapes)
    for w in load_problem(folder).spec.workloads:
        rows, cols = w.axes["x_0"], w.axes["x_1"]
        assert concrete(load_problem(folder), w)[:2] == ((rows * cols + cols + rows) * 4, 2 * rows * cols)

    gather = "def reference(table, idx):\n    return table[idx]\n"
    extra = "BELOW = 4\nDTYPES = {'idx': torch.int64}\n"
    shapes = [{"table_0": 1000, "table_1": 64, "idx_0": 4}, {"table_0": 500, "table_1": 32, "idx_0": 8}]
    folder = _problem(tmp_path, "gather", gather, {"table": 2, "idx": 1}, shapes, extra=extra)
    derived = derive(load_problem(folder))
    assert derived.reason is None and derived.flops == "0"
    for w in load_problem(folder).spec.workloads:
        rows, width = w.axes["idx_0"], w.axes["table_1"]
        assert derived.counts[w.name] == (rows * width * 4 + rows * 8 + rows * width * 4, 0)

    extra = "EXPANDED = {'x': (0, 0)}\n"  # x's dim 0 has stride 0
    shapes = [{"x_0": 64, "x_1": 48}, {"x_0": 8, "x_1": 96}]
    folder = _problem(tmp_path, "expanded", "def reference(x):\n    return x * 2\n", {"x": 2}, shapes, extra=extra)
    derived = derive(load_problem(folder))
    assert derived.reason is None
    for w in load_problem(folder).spec.workloads:
        rows, cols = w.axes["x_0"], w.axes["x_1"]
        assert derived.counts[w.name] == (cols * 4 + rows * cols * 4, rows * cols)


def test_the_script_edits_text_only_is_idempotent_and_checks(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    script = _script()
    folder = _problem(tmp_path, "mm", "def reference(a, b):\n    return a @ b\n", {"a": 2, "b": 2}, MATMUL_SHAPES)
    toml = folder / "problem.toml"
    toml.write_text(toml.read_text().replace('tags = ["harvested"]', 'tags = [ "harvested" ]  # spacing kept'))
    before = toml.read_text()
    assert script.main(["--check", str(tmp_path)]) == 1
    assert "no bytes and no flops" in capsys.readouterr().out
    script.main([str(tmp_path)])
    after = toml.read_text()
    added = [line for line in after.splitlines() if line not in before.splitlines()]
    assert [line.split(" =")[0] for line in added] == ["bytes", "flops"]
    assert after.replace("\n".join(added) + "\n", "") == before  # every other byte as it was
    assert after.index("bytes =") < after.index("[provenance]")
    script.main([str(tmp_path)])
    assert toml.read_text() == after  # idempotent
    assert script.main(["--check", str(tmp_path)]) == 0
    # a stale formula is replaced in place
    toml.write_text(after.replace(load_problem(folder).spec.flops or "", "1"))
    script.main([str(tmp_path)])
    assert toml.read_text() == after


def test_a_jax_reference_gets_its_figures_too(tmp_path: Path) -> None:
    pytest.importorskip("jax")
    body = """
    import jax


    @jax.jit
    def reference(a, b):
        return jax.nn.relu(a @ b)
    """
    shapes = [{"a_0": 64, "a_1": 48, "b_0": 48, "b_1": 40}, {"a_0": 8, "a_1": 96, "b_0": 96, "b_1": 24}]
    folder = _problem(tmp_path, "jaxmm", body, {"a": 2, "b": 2}, shapes)
    toml = folder / "problem.toml"
    toml.write_text(toml.read_text().replace('operator = "test"', 'framework = "jax"\noperator = "test"'))
    derived = derive(load_problem(folder))
    assert derived.reason is None
    for w in load_problem(folder).spec.workloads:
        m, k, n = w.axes["a_0"], w.axes["a_1"], w.axes["b_1"]
        moved, flops = derived.counts[w.name]
        assert moved == (m * k + k * n + m * n) * 4
        assert 2 * m * n * k <= flops <= 2 * m * n * k + 2 * m * n  # the product, and the relu's compare


def test_a_jax_size_that_is_part_of_an_axis_is_written_as_that_part(tmp_path: Path) -> None:
    """A rotary split's halves (64 of a head's 128, 8 of 16 at the small size) are no input's axis:
    a JAX reference names them (dataset/jax_sizes.py), and the formula writes them as the head's
    half, the smallest part of an axis they are in every workload, so every problem keeps figures."""
    pytest.importorskip("jax")
    body = """
    import jax
    import jax.numpy as jnp


    @jax.jit
    def reference(x):
        first, second = jnp.split(x, 2, axis=-1)
        return jnp.concatenate([first * second, first + second], axis=-1)
    """
    shapes = [{"x_0": 48, "x_1": 128}, {"x_0": 6, "x_1": 16}]
    folder = _problem(tmp_path, "jaxhalves", body, {"x": 2}, shapes)
    toml = folder / "problem.toml"
    toml.write_text(toml.read_text().replace('operator = "test"', 'framework = "jax"\noperator = "test"'))
    derived = derive(load_problem(folder))
    assert derived.reason is None and derived.flops is not None
    assert "(x_1/2)" in derived.flops and "x_0/" not in derived.flops  # the head's half, no other axis
    for w in load_problem(folder).spec.workloads:
        rows, half = w.axes["x_0"], w.axes["x_1"] // 2
        assert derived.counts[w.name][1] == 2 * rows * half  # a product and a sum per pair


@pytest.mark.parametrize("name", ["add", "mm"])
def test_dataset_problems_carry_figures_that_match_their_trace(tmp_path: Path, name: str) -> None:
    """A harvested problem, its formulas as written into the dataset, evaluate to a fresh trace's
    counts in every workload (the dataset's own figures, not re-derived into it)."""
    found = sorted(p for p in (DATASET / "level1").glob(f"{name}-*") if (p / "problem.toml").is_file())
    if not found:
        pytest.skip(f"no {name} problem in the dataset")
    folder = tmp_path / "level1" / found[0].name
    shutil.copytree(found[0], folder)
    problem = load_problem(folder)
    if problem.spec.bytes is None:
        _script().main([str(folder)])
        problem = load_problem(folder)
    assert problem.spec.bytes and problem.spec.flops
    for w in problem.spec.workloads:
        moved, flops, _ = concrete(problem, w)
        cost = problem.spec.cost(w)
        assert math.isclose(cost[0] or 0, moved) and math.isclose(cost[1] or 0, flops)
    if name == "mm":
        w = problem.spec.workloads[0]
        a, b = (v for v in problem.module.INPUTS)
        m, k, n = w.axes[f"{a}_0"], w.axes[f"{a}_1"], w.axes[f"{b}_1"]
        assert problem.spec.cost(w)[1] == 2 * m * n * k


def test_a_causal_attention_counts_only_the_pairs_its_mask_keeps(tmp_path: Path) -> None:
    """A causal kernel skips the masked products: counting them would put the floor above it."""
    body = (
        "def reference(q, k, v):\n"
        "    return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)\n"
    )
    shapes = [
        {"q_0": 2, "q_1": 4, "q_2": 64, "q_3": 32, "k_0": 2, "k_1": 4, "k_2": 64, "k_3": 32, "v_0": 2, "v_1": 4}
        | {"v_2": 64, "v_3": 32},
        {"q_0": 1, "q_1": 8, "q_2": 48, "q_3": 16, "k_0": 1, "k_1": 8, "k_2": 48, "k_3": 16, "v_0": 1, "v_1": 8}
        | {"v_2": 48, "v_3": 16},
    ]
    folder = _problem(tmp_path, "causal", body, {"q": 4, "k": 4, "v": 4}, shapes)
    derived = derive(load_problem(folder))
    assert derived.reason is None
    for w in load_problem(folder).spec.workloads:
        b, h, s, d = (w.axes[f"q_{i}"] for i in range(4))
        kept = 4 * b * h * (s * (s + 1) // 2) * d  # both products over the pairs kept
        elementwise = derived.counts[w.name][1] - kept
        assert 0 <= elementwise <= 8 * b * h * s * s  # the softmax and scaling, no masked product


def test_a_grouped_mm_costs_2_rows_k_n(tmp_path: Path) -> None:
    found = sorted(p for p in (DATASET / "level1").glob("grouped_mm-*") if (p / "problem.toml").is_file())
    if not found:
        pytest.skip("no grouped_mm problem in the dataset")
    problem = load_problem(found[0])
    derived = derive(problem)
    for w in problem.spec.workloads:
        assert derived.counts[w.name][1] == 2 * w.axes["x_0"] * w.axes["x_1"] * w.axes["mat2_2"]


def test_a_merged_problem_whose_shapes_no_formula_covers_carries_each_workload_s_traced_figures(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """Merged models' shapes of one `mul`: a prefill's [1, seq, width] by [1, seq, 1] and a decode's
    [16, 1, width] by [16, 1, 1]. A symbolic trace specialises the axes of size 1, so each shape's
    formula misses the other's count (21 dataset problems had no figures); each workload then
    carries its own traced figures, which the speed of light and the floor use."""
    body = "def reference(x, o):\n    return x * o\n"
    shapes = [
        {"x_0": 1, "x_1": 64, "x_2": 32, "o_0": 1, "o_1": 64, "o_2": 1},
        {"x_0": 16, "x_1": 1, "x_2": 32, "o_0": 16, "o_1": 1, "o_2": 1},
    ]
    folder = _problem(tmp_path, "mulmerged", body, {"x": 3, "o": 3}, shapes, dtype="bfloat16")
    derived = derive(load_problem(folder))
    assert derived.reason is None and derived.complete
    assert derived.bytes is None or derived.flops is None, "a formula covers both shapes: the case is gone"
    script = _script()
    assert script.main(["--check", str(tmp_path)]) == 1
    before = (folder / "problem.toml").read_text()
    script.main([str(tmp_path)])
    after = (folder / "problem.toml").read_text()
    assert script.main(["--check", str(tmp_path)]) == 0
    capsys.readouterr()
    for w in load_problem(folder).spec.workloads:
        rows, width = w.axes["x_0"] * w.axes["x_1"], w.axes["x_2"]
        assert load_problem(folder).spec.cost(w) == ((2 * rows * width + rows) * 2, rows * width)
        assert (w.bytes is not None) == (derived.bytes is None) and (w.flops is not None) == (derived.flops is None)
    assert [line for line in before.splitlines() if line not in after.splitlines()] == []  # only lines added
    script.main([str(tmp_path)])
    assert (folder / "problem.toml").read_text() == after  # idempotent


def test_every_shipped_dataset_problem_has_both_figures_for_every_workload(capsys: pytest.CaptureFixture) -> None:
    """Issue 48: bytes and FLOPs for every problem, so each gets the speed of light and the floor
    check (from a formula, or a workload's own traced figures)."""
    assert _script().main(["--check", str(DATASET)]) == 0, capsys.readouterr().out
