"""Two properties of real FlashInfer-Trace definitions: inputs marked `"optional": true`, which a
workload may leave out (run() then gets None), and fp8 inputs and outputs (float8_e4m3fn,
float8_e5m2)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch

from gpuarena.errors import FormatError
from gpuarena.interop import flashinfer_trace as fit
from gpuarena.interop.flashinfer_export import export_definition
from gpuarena.interop.flashinfer_import import import_definition
from gpuarena.interop.flashinfer_problem import problem_files
from gpuarena.interop.flashinfer_sidecar import UnsupportedFeature
from gpuarena.problems import load_problem

from .conftest import FIXTURES

OPTIONAL = FIXTURES / "optional_residual"
CPU = torch.device("cpu")


def _documents(fixture: Path = OPTIONAL) -> tuple[dict, list[dict]]:
    definition = json.loads((fixture / "definition.json").read_text())
    return definition, [json.loads(line) for line in (fixture / "workloads.jsonl").read_text().splitlines()]


def _write(tmp_path: Path, definition: dict, workloads: list[dict]) -> tuple[Path, Path]:
    d, w = tmp_path / "definition.json", tmp_path / "workloads.jsonl"
    d.write_text(json.dumps(definition))
    w.write_text("".join(json.dumps(line) + "\n" for line in workloads))
    return d, w


def _refused(definition: dict, workloads: list[dict], error: type[Exception] = UnsupportedFeature) -> Any:
    """The error the import raises for these documents (it must raise `error`)."""
    with pytest.raises(error) as caught:
        problem_files(
            fit.parse_definition(definition),
            [fit.Trace.model_validate(w) for w in workloads],
            definition_path="definition.json",
            workloads_path="workloads.jsonl",
        )
    return caught.value


def _inputs(problem, axes: dict[str, int]) -> dict:
    workload = problem.spec.workloads[0]
    return problem.make_inputs(axes, workload.torch_dtype, CPU, torch.Generator().manual_seed(5))


# -- optional inputs --------------------------------------------------------------------------


def _judged(problem_folder, path, code: str):
    """`code` written to `path` and judged on the CPU in test mode."""
    from gpuarena.harness.judge import RunOptions, evaluate
    from gpuarena.solutions import load_solution

    path.write_text(code)
    return evaluate(load_problem(problem_folder), load_solution(path), RunOptions(device="cpu", mode="test"))


def test_an_optional_input_the_workloads_omit_reaches_the_reference_as_none(tmp_path):
    import_definition(OPTIONAL / "definition.json", OPTIONAL / "workloads.jsonl", tmp_path / "p")  # checked on the CPU
    problem = load_problem(tmp_path / "p")
    assert problem.input_names == ["hidden_states", "residual", "weight", "eps"]
    inputs = _inputs(problem, {"batch_size": 3})
    assert inputs["residual"] is None and inputs["hidden_states"].shape == (3, 128)
    assert problem.reference(**inputs).shape == (3, 128)
    assert "optional" in (tmp_path / "p" / "README.md").read_text()


def test_an_optional_input_the_workloads_give_is_drawn(tmp_path):
    definition, workloads = _documents()
    for line in workloads:
        line["workload"]["inputs"]["residual"] = {"type": "random"}
    d, w = _write(tmp_path, definition, workloads)
    import_definition(d, w, tmp_path / "p")
    inputs = _inputs(load_problem(tmp_path / "p"), {"batch_size": 3})
    assert inputs["residual"].shape == (3, 128) and inputs["residual"].dtype == torch.float32


@pytest.mark.harness
def test_the_solution_gets_none_for_an_omitted_optional_input(tmp_path):
    import_definition(OPTIONAL / "definition.json", OPTIONAL / "workloads.jsonl", tmp_path / "p", convention="return")
    record = _judged(
        tmp_path / "p",
        tmp_path / "solution.py",
        "import torch\n\n\n"
        "def solve(hidden_states, residual, weight, eps):\n"
        "    assert residual is None, type(residual)\n"
        "    inv_rms = torch.rsqrt((hidden_states * hidden_states).mean(dim=-1, keepdim=True) + eps)\n"
        "    return hidden_states * inv_rms * weight\n",
    )
    assert record.status == "PASSED", record.reason


def test_an_optional_input_round_trips(tmp_path):
    import_definition(OPTIONAL / "definition.json", OPTIONAL / "workloads.jsonl", tmp_path / "p")
    definition, workloads = export_definition(load_problem(tmp_path / "p"))
    assert definition == fit.read_definition(OPTIONAL / "definition.json")
    assert definition.inputs["residual"].optional and not definition.inputs["weight"].optional
    assert workloads == fit.read_workloads(OPTIONAL / "workloads.jsonl")
    written = json.loads(fit.to_json(definition))  # as the export writes it
    assert written["inputs"]["residual"]["optional"] is True and "optional" not in written["inputs"]["weight"]


MIXED = FIXTURES / "optional_mixed"


def test_an_optional_input_given_by_some_workloads_only_is_none_where_left_out(tmp_path):
    """Two workloads of one batch size, one with the residual and one without: the gpuarena-only
    workload axis tells make_inputs() whose inputs it draws."""
    import_definition(OPTIONAL / "definition.json", MIXED / "workloads.jsonl", tmp_path / "p")  # checked on the CPU
    problem = load_problem(tmp_path / "p")
    drawn = {
        w.name: problem.make_inputs(dict(w.axes), w.torch_dtype, CPU, torch.Generator().manual_seed(5))
        for w in problem.spec.workloads
    }
    assert drawn["without-residual-b4"]["residual"] is None
    assert drawn["with-residual-b4"]["residual"].shape == (4, 128)
    assert drawn["with-residual-b9"]["residual"].shape == (9, 128)
    axes = [w.axes for w in problem.spec.workloads]
    assert [a["batch_size"] for a in axes] == [4, 4, 9] and [a["flashinfer_workload"] for a in axes] == [0, 1, 2]
    for inputs in drawn.values():
        assert problem.reference(**inputs).shape == inputs["hidden_states"].shape


def test_mixed_optional_presence_round_trips(tmp_path):
    import_definition(OPTIONAL / "definition.json", MIXED / "workloads.jsonl", tmp_path / "p")
    definition, workloads = export_definition(load_problem(tmp_path / "p"))
    assert definition == fit.read_definition(OPTIONAL / "definition.json")
    assert workloads == fit.read_workloads(MIXED / "workloads.jsonl")
    assert ["residual" in w.workload.inputs for w in workloads] == [True, False, True]


@pytest.mark.harness
def test_the_solution_gets_none_only_where_the_workload_leaves_the_input_out(tmp_path):
    import_definition(OPTIONAL / "definition.json", MIXED / "workloads.jsonl", tmp_path / "p", convention="return")
    code = (
        "import torch\n\n\n"
        "def solve(hidden_states, residual, weight, eps):\n"
        "    x = hidden_states if residual is None else hidden_states + residual\n"
        "    inv_rms = torch.rsqrt((x * x).mean(dim=-1, keepdim=True) + eps)\n"
        "    return x * inv_rms * weight\n"
    )
    record = _judged(tmp_path / "p", tmp_path / "solution.py", code)
    assert record.status == "PASSED", record.reason
    ignoring = code.replace("hidden_states if residual is None else hidden_states + residual", "hidden_states")
    record = _judged(tmp_path / "p", tmp_path / "ignoring.py", ignoring)
    assert record.status == "WRONG_VALUES"


def test_a_required_input_may_not_be_omitted():
    definition, workloads = _documents()
    del definition["inputs"]["residual"]["optional"]
    refused = _refused(definition, workloads, FormatError)
    assert refused.field == "workload.inputs" and "residual" in str(refused)


def test_an_output_cannot_be_optional():
    definition, _ = _documents()
    definition["outputs"]["output"]["optional"] = True
    with pytest.raises(FormatError, match="optional"):
        fit.parse_definition(definition)


# -- fp8 --------------------------------------------------------------------------------------

FP8_REFERENCE = """import torch


def run(a, a_scale, b):
    # each row of the fp8 matrix a has its own float32 scale
    x = a.to(torch.float32) * a_scale[:, None]
    return (x @ b.to(torch.float32).T).to(torch.bfloat16)
"""


def _fp8(dtype: str) -> tuple[dict, list[dict]]:
    definition = {
        "name": "gemm_rowscaled_n32_k64",
        "op_type": "gemm_fp8",
        "axes": {"M": {"type": "var"}, "N": {"type": "const", "value": 32}, "K": {"type": "const", "value": 64}},
        "inputs": {
            "a": {"shape": ["M", "K"], "dtype": dtype},
            "a_scale": {"shape": ["M"], "dtype": "float32"},
            "b": {"shape": ["N", "K"], "dtype": "bfloat16"},
        },
        "outputs": {"c": {"shape": ["M", "N"], "dtype": "bfloat16"}},
        "reference": FP8_REFERENCE,
    }
    random = {"type": "random"}
    workloads = [
        {
            "definition": definition["name"],
            "workload": {"uuid": f"m{m}", "axes": {"M": m}, "inputs": dict.fromkeys("a a_scale b".split(), random)},
        }
        for m in (4, 24)
    ]
    return definition, workloads


@pytest.mark.parametrize("dtype", ["float8_e4m3fn", "float8_e5m2"])
def test_fp8_inputs_import_and_are_drawn_on_the_cpu(dtype, tmp_path):
    d, w = _write(tmp_path, *_fp8(dtype))
    import_definition(d, w, tmp_path / "p")  # gpuarena check passes on the CPU
    problem = load_problem(tmp_path / "p")
    inputs = _inputs(problem, {"M": 4})
    assert inputs["a"].dtype == getattr(torch, dtype) and inputs["a"].shape == (4, 64)
    assert torch.isfinite(inputs["a"].float()).all() and inputs["a"].float().abs().sum() > 0
    assert problem.reference(**inputs).dtype == torch.bfloat16
    definition, _ = export_definition(problem)
    assert definition.inputs["a"].dtype == dtype


QUANTIZE = FIXTURES / "fp8_quantize"


def _quantize(tmp_path: Path, dtype: str) -> Path:
    """fp8_quantize imported, its fp8 output in `dtype` (checked on the CPU)."""
    definition, workloads = _documents(QUANTIZE)
    definition["outputs"]["q"]["dtype"] = dtype
    definition["reference"] = definition["reference"].replace("torch.float8_e4m3fn", f"torch.{dtype}")
    d, w = _write(tmp_path, definition, workloads)
    import_definition(d, w, tmp_path / "p")
    return tmp_path / "p"


@pytest.mark.parametrize("dtype", ["float8_e4m3fn", "float8_e5m2"])
def test_an_fp8_output_imports_and_is_judged_as_flashinfer_bench_judges_it(dtype, tmp_path):
    """FlashInfer-Bench compares every output upcast to float32 within atol = rtol = 1e-2."""
    import tomllib

    problem = load_problem(_quantize(tmp_path, dtype))
    assert [w.dtype for w in problem.spec.workloads] == ["float32", "float32"]
    tolerance = problem.spec.tolerance_for("float32")
    assert (tolerance.atol, tolerance.rtol) == (1e-2, 1e-2)
    assert tomllib.loads((problem.path / "problem.toml").read_text())["tolerance"]["float32"]["atol"] == 1e-2
    q, amax = problem.reference(**_inputs(problem, {"rows": 8}))
    assert q.dtype == getattr(torch, dtype) and q.shape == (8, 64) and amax.dtype == torch.float32
    definition, workloads = export_definition(problem)
    assert definition.outputs["q"].dtype == dtype
    assert workloads == fit.read_workloads(QUANTIZE / "workloads.jsonl")


def test_an_fp8_output_with_a_bfloat16_one_keeps_the_bfloat16_workload_dtype():
    from gpuarena.interop.flashinfer_problem import workload_dtype

    assert workload_dtype(["float8_e4m3fn", "bfloat16", "float32"]) == "bfloat16"
    assert workload_dtype(["float8_e5m2"]) == "float32"
    assert workload_dtype(["int32", "float8_e5m2"]) == "float32"


@pytest.mark.harness
def test_an_fp8_output_off_by_its_rounding_fails_and_the_exact_one_passes(tmp_path):
    folder = _quantize(tmp_path, "float8_e4m3fn")
    code = (
        "import torch\n\n\n"
        "def solve(x, q, amax):\n"
        "    wide = x.float()\n"
        "    amax.copy_(wide.abs().amax(dim=-1).clamp_min(1e-12))\n"
        "    q.copy_((wide * (448.0 / amax)[:, None]).to(torch.float8_e4m3fn))\n"
    )
    record = _judged(folder, tmp_path / "solution.py", code)
    assert record.status == "PASSED", record.reason
    coarse = code.replace("[:, None]).to(", "[:, None]).to(torch.float8_e5m2).to(")  # one bit of mantissa less
    record = _judged(folder, tmp_path / "coarse.py", coarse)
    assert record.status == "WRONG_VALUES", record.reason


def test_float4_is_a_named_gap_naming_the_dtype():
    definition, workloads = _fp8("float4_e2m1")
    gap = _refused(definition, workloads)
    assert gap.feature == "the dtype float4_e2m1" and "'a'" in gap.detail and "\n" not in str(gap)


def test_flashinfer_benchs_own_loaders_read_the_fixture_and_the_export(fib, tmp_path):
    """Its models do not list `optional` and ignore it; they read the definitions all the same."""
    theirs = fib.load_json_file(fib.Definition, OPTIONAL / "definition.json")
    assert list(theirs.inputs) == ["hidden_states", "residual", "weight", "eps"]
    assert len(fib.load_jsonl_file(fib.Trace, OPTIONAL / "workloads.jsonl")) == 2
    import_definition(OPTIONAL / "definition.json", OPTIONAL / "workloads.jsonl", tmp_path / "p")
    definition, workloads = export_definition(load_problem(tmp_path / "p"))
    (tmp_path / "d.json").write_text(fit.to_json(definition))
    fit.write_jsonl(workloads, tmp_path / "w.jsonl")
    assert list(fib.load_json_file(fib.Definition, tmp_path / "d.json").inputs) == list(definition.inputs)
    assert [t.workload.uuid for t in fib.load_jsonl_file(fib.Trace, tmp_path / "w.jsonl")] == [
        "residual-omitted-b3",
        "residual-omitted-b40",
    ]
    d, _ = _write(tmp_path, *_fp8("float8_e5m2"))
    assert fib.load_json_file(fib.Definition, d).inputs["a"].dtype == "float8_e5m2"
