"""Definition + workloads -> a gpuarena problem that `gpuarena check` accepts, and back; what
the problem format cannot carry is refused by name."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest
import torch

from gpuarena.errors import FormatError
from gpuarena.harness.problem_check import check_problem
from gpuarena.interop import flashinfer_trace as fit
from gpuarena.interop.flashinfer_export import export_definition
from gpuarena.interop.flashinfer_import import import_definition
from gpuarena.interop.flashinfer_problem import CPU_SMOKE, evaluate_constraint, problem_files
from gpuarena.interop.flashinfer_sidecar import SIDECAR, UnsupportedFeature
from gpuarena.problems import load_problem

from .conftest import INVALID, RMSNORM, SOFTMAX


def _definition(**changes):
    data = json.loads((RMSNORM / "definition.json").read_text())
    data.update(changes)
    return data


def _workloads(path=RMSNORM / "workloads.jsonl"):
    return [json.loads(line) for line in path.read_text().splitlines()]


def _write(tmp_path: Path, definition: dict, workloads: list[dict]) -> tuple[Path, Path]:
    d, w = tmp_path / "definition.json", tmp_path / "workloads.jsonl"
    d.write_text(json.dumps(definition))
    w.write_text("".join(json.dumps(line) + "\n" for line in workloads))
    return d, w


def _files(definition: dict, workloads: list[dict], **options):
    return problem_files(
        fit.parse_definition(definition),
        [fit.Trace.model_validate(w) for w in workloads],
        definition_path="definition.json",
        workloads_path="workloads.jsonl",
        **options,
    )


def test_the_imported_problem_passes_gpuarena_check(rmsnorm_problem, softmax_problem):
    for problem in (rmsnorm_problem, softmax_problem):
        report = check_problem(problem.path)
        assert report.ok, report.errors


def test_the_problem_says_what_the_definition_says(rmsnorm_problem):
    spec = rmsnorm_problem.spec
    assert spec.name == "rmsnorm_h256" and spec.convention == "destination" and spec.outputs == ["output"]
    assert rmsnorm_problem.input_names == ["hidden_states", "weight", "eps"]
    uuids = [e.workload.uuid for e in fit.read_workloads(RMSNORM / "workloads.jsonl")]
    assert [w.name for w in spec.workloads] == uuids
    assert [w.axes for w in spec.workloads] == [{"batch_size": b, "hidden_size": 256} for b in (1, 16, 100)]
    assert {w.dtype for w in spec.workloads} == {"float32"}
    assert "model:toy-256" in spec.tags and spec.provenance.models == ["toy-256"]
    assert (rmsnorm_problem.path / "README.md").read_text().startswith("# rmsnorm_h256")


def test_make_inputs_draws_declared_shapes_and_passes_the_scalar(rmsnorm_problem):
    generator = torch.Generator().manual_seed(3)
    inputs = rmsnorm_problem.make_inputs(
        {"batch_size": 5, "hidden_size": 256}, torch.float32, torch.device("cpu"), generator
    )
    assert inputs["hidden_states"].shape == (5, 256) and inputs["weight"].shape == (256,)
    assert inputs["eps"] == 1e-6
    with pytest.raises(ValueError, match="constant"):
        rmsnorm_problem.make_inputs(
            {"batch_size": 5, "hidden_size": 128}, torch.float32, torch.device("cpu"), generator
        )
    with pytest.raises(ValueError, match="fixed by its FlashInfer-Trace definition"):
        rmsnorm_problem.make_inputs({"batch_size": 5}, torch.bfloat16, torch.device("cpu"), generator)


def test_gpu_sized_workloads_run_on_cuda_only(softmax_problem):
    devices = {w.name: w.devices for w in softmax_problem.spec.workloads}
    assert devices["softmax-vocab-4096x32000"] == ["cuda"]
    assert devices["softmax-small-8x100"] == ["cpu", "cuda"]


@pytest.mark.parametrize("fixture", [RMSNORM, SOFTMAX])
def test_round_trip_gives_the_same_definition_and_workloads(fixture, tmp_path):
    import_definition(fixture / "definition.json", fixture / "workloads.jsonl", tmp_path / "p")
    definition, workloads = export_definition(load_problem(tmp_path / "p"))
    assert definition == fit.read_definition(fixture / "definition.json")
    assert workloads == fit.read_workloads(fixture / "workloads.jsonl")
    out = tmp_path / "w.jsonl"
    fit.write_jsonl(workloads, out)  # and through the file format again
    assert fit.read_workloads(out) == workloads
    assert [json.loads(line) for line in out.read_text().splitlines()] == _workloads(fixture / "workloads.jsonl")


def test_an_edited_reference_is_not_exported_as_the_definition(tmp_path):
    import_definition(RMSNORM / "definition.json", RMSNORM / "workloads.jsonl", tmp_path / "p")
    reference = tmp_path / "p" / "reference.py"
    reference.write_text(reference.read_text().replace("mean_square + eps", "mean_square + 2 * eps"))
    with pytest.raises(FormatError, match="differs from the definition's"):
        export_definition(load_problem(tmp_path / "p"))


def test_an_existing_folder_is_kept_unless_forced(tmp_path):
    (tmp_path / "p").mkdir()
    (tmp_path / "p" / "mine.txt").write_text("keep")
    with pytest.raises(Exception, match="--force"):
        import_definition(RMSNORM / "definition.json", RMSNORM / "workloads.jsonl", tmp_path / "p")
    assert (tmp_path / "p" / "mine.txt").exists()
    import_definition(RMSNORM / "definition.json", RMSNORM / "workloads.jsonl", tmp_path / "p", force=True)
    assert not (tmp_path / "p" / "mine.txt").exists() and (tmp_path / "p" / SIDECAR).exists()


def test_a_failed_import_leaves_nothing_behind(tmp_path):
    with pytest.raises(FormatError):  # its safetensors file is not there
        import_definition(RMSNORM / "definition.json", INVALID / "workloads_safetensors.jsonl", tmp_path / "p")
    assert list(tmp_path.iterdir()) == []


def test_the_import_runs_gpuarena_check_and_refuses_what_it_fails(tmp_path):
    """As the KernelBench and GPU MODE importers do: a reference whose output ignores its input
    (an all-ones weight scaled away here: every row's output the same) imports only when told."""
    from gpuarena.interop.flashinfer_import import FlashInferCheckFailed

    definition = _definition()
    definition["reference"] = definition["reference"].replace(
        "output = normed * weight.to(torch.float32)", "output = normed * 0 + 1.5"
    )
    assert "normed * 0 + 1.5" in definition["reference"]
    d, w = _write(tmp_path, definition, _workloads())
    with pytest.raises(FlashInferCheckFailed, match="constant") as refused:
        import_definition(d, w, tmp_path / "p")
    assert refused.value.findings and not (tmp_path / "p").exists()
    kept = import_definition(d, w, tmp_path / "p", keep_failing=True)
    assert kept.folder.is_dir() and any("constant" in note for note in kept.notes)
    assert import_definition(d, w, tmp_path / "q", check_device=None).folder.is_dir()  # not asked: not checked


def test_a_reference_that_disagrees_with_the_declared_shapes_is_caught(tmp_path):
    definition = _definition()
    definition["outputs"]["output"]["shape"] = ["batch_size"]
    d, w = _write(tmp_path, definition, _workloads())
    with pytest.raises(
        FormatError, match=r"output output of run\(\) .* is \[1, 256\] float32; the definition says \[1\]"
    ):
        import_definition(d, w, tmp_path / "p")


def test_when_no_workload_fits_the_cpu_a_smoke_workload_is_added_and_never_exported(tmp_path):
    big = [json.loads(json.dumps(line)) for line in _workloads(SOFTMAX / "workloads.jsonl")][2:]
    d, w = _write(tmp_path, json.loads((SOFTMAX / "definition.json").read_text()), big)
    result = import_definition(d, w, tmp_path / "p")
    assert any(CPU_SMOKE in note for note in result.notes)
    spec = load_problem(tmp_path / "p").spec
    smoke = spec.workloads[-1]
    assert smoke.name == CPU_SMOKE and smoke.devices == ["cpu"]
    assert smoke.axes["rows"] * smoke.axes["cols"] * 2 <= 1 << 24
    assert [e.workload.uuid for e in export_definition(load_problem(tmp_path / "p"))[1]] == ["softmax-vocab-4096x32000"]


# -- what the format cannot carry: refused, by name ----------------------------------------------


def _gap(definition: dict, workloads: list[dict]) -> UnsupportedFeature:
    with pytest.raises(UnsupportedFeature) as caught:
        _files(definition, workloads)
    return caught.value


def test_a_missing_safetensors_file_is_named(tmp_path):
    """Safetensors inputs import (test_flashinfer_recorded.py); a file that is not there is named."""
    with pytest.raises(FormatError) as caught:
        import_definition(RMSNORM / "definition.json", INVALID / "workloads_safetensors.jsonl", tmp_path / "p")
    assert caught.value.field == "workload.inputs.hidden_states"
    assert str(INVALID / "workloads_safetensors.jsonl") in str(caught.value)
    assert "the safetensors file blob/rmsnorm/b1.safetensors is not found" in str(caught.value)


TWO_DTYPES = """import torch


def run(hidden_states, weight, eps):
    x = hidden_states.to(torch.float32)
    inv_rms = torch.rsqrt((x * x).mean(dim=-1) + eps)
    output = (x * inv_rms[:, None] * weight.to(torch.float32)).to(torch.bfloat16)
    return output, inv_rms
"""


def _two_dtypes() -> dict:
    """RMSNorm with a bfloat16 output and its float32 1/rms, as attention has its output and
    a float32 lse (56 of FlashInfer-Trace's 156 definitions have outputs of several dtypes)."""
    definition = _definition(reference=TWO_DTYPES)
    definition["outputs"]["output"]["dtype"] = "bfloat16"
    definition["outputs"]["inv_rms"] = {"shape": ["batch_size"], "dtype": "float32"}
    return definition


def test_outputs_of_different_dtypes_import_with_the_least_precise_floats_tolerance(tmp_path):
    d, w = _write(tmp_path, _two_dtypes(), _workloads())
    import_definition(d, w, tmp_path / "two", convention="return")  # gpuarena check passes on the CPU
    problem = load_problem(tmp_path / "two")
    assert problem.spec.outputs == ["output", "inv_rms"]
    assert {wl.dtype for wl in problem.spec.workloads} == {"bfloat16"}  # its tolerance judges both
    workload = problem.spec.workloads[0]
    inputs = problem.make_inputs(
        dict(workload.axes), workload.torch_dtype, torch.device("cpu"), torch.Generator().manual_seed(1)
    )
    output, inv_rms = problem.reference(**inputs)
    assert output.dtype == torch.bfloat16 and inv_rms.dtype == torch.float32
    with pytest.raises(ValueError, match="dtypes are fixed"):
        problem.make_inputs(dict(workload.axes), torch.float32, torch.device("cpu"), torch.Generator())


@pytest.mark.harness
def test_a_solution_of_outputs_of_two_dtypes_is_judged_output_by_output(tmp_path):
    from gpuarena.harness.judge import RunOptions, evaluate
    from gpuarena.solutions import load_solution

    d, w = _write(tmp_path, _two_dtypes(), _workloads())
    import_definition(d, w, tmp_path / "two", convention="return")
    problem = load_problem(tmp_path / "two")
    honest = tmp_path / "honest.py"
    honest.write_text(TWO_DTYPES.replace("def run(", "def solve("))
    record = evaluate(problem, load_solution(honest), RunOptions(device="cpu", mode="test"))
    assert record.status == "PASSED", record.reason
    narrowed = tmp_path / "narrowed.py"  # its float32 output given in bfloat16
    narrowed.write_text(
        TWO_DTYPES.replace("def run(", "def solve(").replace(
            "return output, inv_rms", "return output, inv_rms.bfloat16()"
        )
    )
    record = evaluate(problem, load_solution(narrowed), RunOptions(device="cpu", mode="test"))
    assert record.status == "WRONG_DTYPE" and "inv_rms" in record.reason


def test_scalar_outputs_are_a_named_gap():
    definition = _definition()
    definition["outputs"]["total"] = {"shape": None, "dtype": "float32"}
    assert _gap(definition, _workloads()).feature == "scalar (non-tensor) outputs"


def test_scalars_that_differ_between_workloads_are_no_longer_a_gap():
    """Each workload keeps its own value (test_flashinfer_scalars.py runs them)."""
    workloads = _workloads()
    workloads[2]["workload"]["inputs"]["eps"]["value"] = 1e-5
    files, _ = _files(_definition(), workloads)
    sidecar = json.loads(files[SIDECAR])
    assert sidecar["workload_axis"] == "flashinfer_workload"
    assert [w["eps"]["value"] for w in sidecar["workload_inputs"]] == [1e-6, 1e-6, 1e-5]


def test_a_random_value_for_a_scalar_input_is_a_named_gap():
    workloads = _workloads()
    workloads[0]["workload"]["inputs"]["eps"] = {"type": "random"}
    assert _gap(_definition(), workloads).feature == "random values for scalar inputs"


def test_names_that_cannot_be_parameters_are_a_named_gap():
    definition = _definition()
    definition["inputs"] = {("class" if k == "weight" else k): v for k, v in definition["inputs"].items()}
    workloads = _workloads()
    for line in workloads:
        line["workload"]["inputs"]["class"] = line["workload"]["inputs"].pop("weight")
    assert _gap(definition, workloads).feature == "input names that are not Python parameter names"


def test_uuids_that_cannot_be_workload_names_are_a_named_gap():
    workloads = _workloads()
    workloads[0]["workload"]["uuid"] = "batch 1 / eps"
    assert _gap(_definition(), workloads).feature.startswith("workload uuids with characters")


def test_a_reference_defining_the_glue_names_is_a_named_gap():
    definition = _definition(
        reference="def make_inputs():\n    pass\n\ndef run(hidden_states, weight, eps):\n    return hidden_states\n"
    )
    assert "reference(), make_inputs() or fixed_inputs()" in _gap(definition, _workloads()).feature


# -- plain errors in the documents ------------------------------------------------------------


@pytest.mark.parametrize(
    "change, field, words",
    [
        (lambda w: w[0]["workload"]["axes"].pop("batch_size"), "workload.axes", "no size for variable axis batch_size"),
        (lambda w: w[0]["workload"]["axes"].update(hidden_size=256), "workload.axes", "constant axis hidden_size"),
        (
            lambda w: w[1]["workload"]["inputs"].pop("weight"),
            "workload.inputs",
            "the definition's are hidden_states, weight, eps",
        ),
        (
            lambda w: w[1]["workload"].update(uuid=w[0]["workload"]["uuid"]),
            "workload.uuid",
            "used by an earlier workload",
        ),
        (lambda w: w[2].update(definition="rmsnorm_h4096"), "definition", "not 'rmsnorm_h256'"),
        (
            lambda w: w[0]["workload"]["inputs"].update(weight={"type": "scalar", "value": 1.0}),
            "workload.inputs.weight",
            "the definition declares a tensor",
        ),
    ],
)
def test_workloads_that_do_not_fit_the_definition_name_line_and_field(change, field, words):
    workloads = _workloads()
    change(workloads)
    with pytest.raises(FormatError) as caught:
        _files(_definition(), workloads)
    assert caught.value.field == field and words in str(caught.value)
    assert caught.value.path.startswith("workloads.jsonl, workload ")


def test_constraints_are_checked_on_every_workload():
    definition = json.loads((SOFTMAX / "definition.json").read_text())
    workloads = _workloads(SOFTMAX / "workloads.jsonl")
    workloads[0]["workload"]["axes"]["cols"] = 1
    with pytest.raises(FormatError, match="violate the constraint 'cols >= 2'"):
        _files(definition, workloads)
    definition["constraints"] = ["__import__('os').system('true')"]
    with pytest.raises(UnsupportedFeature, match="constraints beyond arithmetic"):
        _files(definition, _workloads(SOFTMAX / "workloads.jsonl"))


def test_the_constraint_evaluator():
    sizes = {"H_qo": 32, "H_kv": 8, "H_r": 4}
    assert evaluate_constraint("H_qo == H_kv * H_r", sizes)
    assert evaluate_constraint("H_kv <= H_qo and H_qo % H_kv == 0", sizes)
    assert not evaluate_constraint("max(H_kv, H_r) > 8", sizes)
    with pytest.raises(ValueError):
        evaluate_constraint("H_qo.bit_length() > 2", sizes)


def test_run_must_take_the_inputs():
    definition = _definition(reference="def run(hidden_states, weight):\n    return hidden_states\n")
    with pytest.raises(FormatError) as caught:
        _files(definition, _workloads())
    assert caught.value.field == "reference" and "3 inputs" in str(caught.value)


def test_convention_and_level_options():
    files, _ = _files(_definition(tags=["fused"]), _workloads(), convention="return")
    spec = tomllib.loads(files["problem.toml"])
    assert spec["convention"] == "return" and spec["level"] == 2
