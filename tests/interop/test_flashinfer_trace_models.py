"""The FlashInfer-Trace models and readers: the fixtures parse, bad files say file and field."""

from __future__ import annotations

import json
import math

import pytest

from gpuarena.errors import FormatError
from gpuarena.interop import flashinfer_trace as fit

from .conftest import INVALID, RMSNORM, SOFTMAX


def test_the_definitions_parse_with_their_axes_and_scalar_input():
    definition = fit.read_definition(RMSNORM / "definition.json")
    assert definition.var_axes == ["batch_size"]
    assert definition.const_axes == {"hidden_size": 256}
    assert list(definition.inputs) == ["hidden_states", "weight", "eps"]
    assert definition.inputs["eps"].shape is None
    softmax = fit.read_definition(SOFTMAX / "definition.json")
    assert softmax.var_axes == ["rows", "cols"] and softmax.constraints == ["cols >= 2"]


def test_workloads_are_workload_only_traces():
    entries = fit.read_workloads(RMSNORM / "workloads.jsonl")
    assert [e.workload.axes["batch_size"] for e in entries] == [1, 16, 100]
    assert all(e.is_workload_only and e.definition == "rmsnorm_h256" for e in entries)
    eps = entries[0].workload.inputs["eps"]
    assert isinstance(eps, fit.ScalarInput) and eps.value == 1e-6
    assert isinstance(entries[0].workload.inputs["weight"], fit.RandomInput)


def test_a_bare_workload_line_is_read_for_a_named_definition(tmp_path):
    path = tmp_path / "w.jsonl"
    path.write_text(
        json.dumps({"uuid": "u1", "axes": {"rows": 2, "cols": 3}, "inputs": {"logits": {"type": "random"}}}) + "\n"
    )
    assert fit.read_workloads(path, definition="softmax_rows")[0].definition == "softmax_rows"
    with pytest.raises(FormatError, match="line 1.*names no definition"):
        fit.read_workloads(path)


def test_solutions_parse_with_their_spec():
    triton = fit.read_solution(RMSNORM / "solutions" / "triton_dps.json")
    assert triton.spec.language == "triton" and triton.spec.destination_passing_style
    assert (triton.spec.entry_file, triton.spec.entry_function) == ("main.py", "run")
    python = fit.read_solution(RMSNORM / "solutions" / "python_returning.json")
    assert python.spec.destination_passing_style is False


@pytest.mark.parametrize(
    "path", [RMSNORM / "definition.json", SOFTMAX / "definition.json", RMSNORM / "solutions" / "triton_dps.json"]
)
def test_writing_and_reading_back_gives_the_same_document(path):
    model = fit.read_definition(path) if "definition" in path.name else fit.read_solution(path)
    again = type(model).model_validate_json(fit.to_json(model))
    assert again == model
    written, original = json.loads(fit.to_json(model)), json.loads(path.read_text())
    for part in (written, written.get("spec", {})):  # empty lists are written out, as FlashInfer-Bench does
        for key in [k for k, v in part.items() if v == []]:
            del part[key]
    assert written == original  # nothing added, nothing lost


def test_a_scalar_shape_is_written_as_null():
    text = fit.to_json(fit.read_definition(RMSNORM / "definition.json"))
    assert json.loads(text)["inputs"]["eps"]["shape"] is None


@pytest.mark.parametrize(
    "name, field, words",
    [
        ("definition_undefined_axis.json", None, "output 'output' has axis 'hidden'"),
        ("definition_bad_dtype.json", "inputs.weight.dtype", "Input should be"),
        ("solution_bad_entry_point.json", "spec.entry_point", "must be '<file path>::<function name>'"),
        ("solution_misspelt_field.json", "spec.destination_passing_styel", "Extra inputs are not permitted"),
    ],
)
def test_invalid_documents_name_the_file_and_the_field(name, field, words):
    path = INVALID / name
    with pytest.raises(FormatError) as caught:
        fit.read_definition(path) if name.startswith("definition") else fit.read_solution(path)
    assert caught.value.path == str(path)
    assert caught.value.field == field
    assert words in str(caught.value)


def test_a_bad_workload_line_is_named_by_file_line_and_field():
    path = INVALID / "workloads_bad_line.jsonl"
    with pytest.raises(FormatError) as caught:
        fit.read_workloads(path)
    assert caught.value.path == f"{path}, line 2"
    assert caught.value.field == "workload.axes.batch_size"


def test_broken_json_and_missing_files_are_reported(tmp_path):
    bad = tmp_path / "d.json"
    bad.write_text('{"name": "x",')
    with pytest.raises(FormatError, match="is not valid JSON"):
        fit.read_definition(bad)
    with pytest.raises(FormatError, match="not found"):
        fit.read_solution(tmp_path / "absent.json")


def test_definition_rules_of_the_schema():
    base = json.loads((RMSNORM / "definition.json").read_text())
    no_run = dict(base, reference="def forward(x):\n    return x\n")
    with pytest.raises(FormatError, match="no top-level function run"):
        fit.parse_definition(no_run)
    overlap = json.loads(json.dumps(base))
    overlap["outputs"]["weight"] = overlap["outputs"].pop("output")
    with pytest.raises(FormatError, match="both an input and an output: weight"):
        fit.parse_definition(overlap)
    untyped = json.loads(json.dumps(base))
    del untyped["axes"]["batch_size"]["type"]
    with pytest.raises(FormatError) as caught:
        fit.parse_definition(untyped)
    assert caught.value.field == "axes.batch_size"
    nulls = dict(base, tags=None, constraints=None)  # the docs give null as their default
    assert fit.parse_definition(nulls).tags == []


def test_solution_rules_of_the_schema():
    base = json.loads((RMSNORM / "solutions" / "triton_dps.json").read_text())
    for change, words in [
        (lambda s: s["sources"].append(dict(s["sources"][0])), "source paths repeated: main.py"),
        (lambda s: s["spec"].update(entry_point="kernel.py::run"), "'kernel.py' is not among the sources"),
        (lambda s: s["sources"][1].update(path="../escape.py"), "must not contain '..'"),
        (lambda s: s["spec"].update(target_hardware=[]), "at least 1 item"),
        (lambda s: s["spec"].update(language="rust"), "Input should be"),
    ]:
        data = json.loads(json.dumps(base))
        change(data)
        with pytest.raises(FormatError, match=words):
            fit.parse_solution(data)


def _evaluation(**fields):
    base = {
        "status": "PASSED",
        "environment": {"hardware": "NVIDIA H100", "libs": {"torch": "2.8"}},
        "timestamp": "2025-01-01T00:00:00Z",
        "correctness": {"max_relative_error": 1e-6, "max_absolute_error": 1e-7},
        "performance": {"latency_ms": 0.5, "reference_latency_ms": 1.0, "speedup_factor": 2.0},
    }
    base.update(fields)
    return base


def test_evaluation_fields_follow_the_status():
    fit.TraceEvaluation.model_validate(_evaluation())
    with pytest.raises(ValueError, match="performance must be given when status is PASSED"):
        fit.TraceEvaluation.model_validate(_evaluation(performance=None))
    with pytest.raises(ValueError, match="performance must be null when status is INCORRECT_NUMERICAL"):
        fit.TraceEvaluation.model_validate(_evaluation(status="INCORRECT_NUMERICAL"))
    with pytest.raises(ValueError, match="correctness must be null when status is RUNTIME_ERROR"):
        fit.TraceEvaluation.model_validate(_evaluation(status="RUNTIME_ERROR", performance=None))
    fit.TraceEvaluation.model_validate(_evaluation(status="TIMEOUT", performance=None, correctness=None))


def test_nan_errors_are_written_as_strings_and_read_back():
    evaluation = fit.TraceEvaluation.model_validate(
        _evaluation(
            status="INCORRECT_NUMERICAL",
            performance=None,
            correctness={"max_relative_error": float("nan"), "max_absolute_error": 2.0},
        )
    )
    text = evaluation.model_dump_json()
    assert '"max_relative_error":"NaN"' in text
    assert math.isnan(fit.TraceEvaluation.model_validate_json(text).correctness.max_relative_error)


def test_the_sources_hash_is_over_sorted_sources():
    assert fit.sources_hash({"b.py": "2", "a.py": "1"}) == fit.sources_hash({"a.py": "1", "b.py": "2"})
    assert fit.sources_hash({"a.py": "1"}) != fit.sources_hash({"a.py": "1 "})
