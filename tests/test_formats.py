"""Problem and solution formats: loading, errors that name file, field and fix, packing, hashing."""

from __future__ import annotations

import json
import shutil

import pytest
import torch

from conftest import EXAMPLES, FIXTURES
from gpuarena.errors import FormatError
from gpuarena.problems import load_problem, resolve_problem
from gpuarena.problems.model import evaluate_formula
from gpuarena.schemas import all_schemas
from gpuarena.solutions import load_solution
from gpuarena.solutions.loader import pack


@pytest.fixture
def problem_copy(tmp_path):
    target = tmp_path / "axpy_dest"
    shutil.copytree(FIXTURES / "problems" / "axpy_dest", target)
    return target


def test_bundled_problem_loads_by_id():
    problem = resolve_problem("level1/softmax")
    assert problem.id == "level1/softmax"
    assert problem.input_names == ["x"]
    assert problem.spec.level == 1
    assert problem.spec.workloads_for("cpu") and len(problem.spec.workloads_for("cuda")) > len(
        problem.spec.workloads_for("cpu")
    )


@pytest.mark.parametrize(
    "edit, field, words",
    [
        (lambda t: t.replace("level = 1", "level = 7"), "level", "use 1, 2, 3 or 4"),
        (
            lambda t: t.replace('dtype = "float32"', 'dtype = "float33"', 1),
            "workloads[0].dtype",
            "unknown dtype 'float33'",
        ),
        (lambda t: t.replace("summary = ", "sumary = "), "summary", "add this field"),
        (lambda t: 'colour = "red"\n' + t, "colour", "remove it"),
        (lambda t: t.replace('bytes = "3 * n * dtype_bytes"', 'bytes = "3 * m"'), None, "unknown name 'm'"),
        (lambda t: t.replace('bytes = "3 * n * dtype_bytes"', "bytes = \"__import__('os')\""), "bytes", "may only use"),
    ],
)
def test_schema_errors_name_file_field_and_fix(problem_copy, edit, field, words):
    toml = problem_copy / "problem.toml"
    toml.write_text(edit(toml.read_text()))
    with pytest.raises(FormatError) as info:
        load_problem(problem_copy)
    message = str(info.value)
    assert "problem.toml" in message
    if field:
        assert f"field '{field}'" in message
    assert words in message
    assert "fix:" in message


def test_invalid_toml_names_the_line(problem_copy):
    (problem_copy / "problem.toml").write_text('name = "x"\nlevel = \n')
    with pytest.raises(FormatError, match="not valid TOML.*line 2"):
        load_problem(problem_copy)


def test_reference_without_make_inputs_is_named(problem_copy):
    (problem_copy / "reference.py").write_text("def reference(x):\n    return x\n")
    with pytest.raises(FormatError, match="make_inputs"):
        _ = load_problem(problem_copy).module


def test_formula_arithmetic():
    assert evaluate_formula("2 * rows * cols * dtype_bytes", {"rows": 3, "cols": 5, "dtype_bytes": 2}) == 60
    assert evaluate_formula("n ** 2 // 4 - 1", {"n": 4}) == 3


def test_single_file_solution_language_is_detected():
    assert load_solution(EXAMPLES / "softmax" / "pytorch.py").manifest.language == "pytorch"
    assert load_solution(EXAMPLES / "softmax" / "triton.py").manifest.language == "triton"


def test_cuda_folder_solution_has_manifest_and_sources():
    solution = load_solution(EXAMPLES / "softmax" / "cuda")
    assert solution.manifest.language == "cuda"
    assert "softmax.cu" in solution.sources


def test_pack_roundtrip_and_hash(tmp_path):
    solution = load_solution(EXAMPLES / "softmax" / "triton.py")
    packed = tmp_path / "s.json"
    packed.write_text(pack(solution))
    again = load_solution(packed)
    assert again.hash == solution.hash and again.sources == solution.sources
    data = json.loads(packed.read_text())
    data["sources"]["triton.py"] += "\n# edited after packing\n"
    packed.write_text(json.dumps(data))
    with pytest.raises(FormatError, match="does not match"):
        load_solution(packed)


def test_hash_depends_on_sources_and_build_options(tmp_path):
    folder = tmp_path / "sol"
    shutil.copytree(EXAMPLES / "softmax" / "cuda", folder)
    first = load_solution(folder).hash
    manifest = folder / "solution.toml"
    manifest.write_text(manifest.read_text().replace('"-O3"', '"-O2"'))
    assert load_solution(folder).hash != first


def test_bad_solution_inputs_are_explained(tmp_path):
    with pytest.raises(FormatError, match="not found"):
        load_solution(tmp_path / "missing.py")
    (tmp_path / "kernel.cu").write_text("")
    with pytest.raises(FormatError, match="must be a .py file"):
        load_solution(tmp_path / "kernel.cu")
    folder = tmp_path / "f"
    folder.mkdir()
    (folder / "solution.toml").write_text('language = "fortran"\n')
    with pytest.raises(FormatError, match="language"):
        load_solution(folder)


def test_schemas_are_generated_and_shipped():
    from pathlib import Path

    import gpuarena.schemas

    schemas = all_schemas()
    assert set(schemas) == {"problem", "solution-manifest", "packed-solution", "evaluation"}
    assert "workloads" in schemas["problem"]["properties"]
    assert "speedup" in json.dumps(schemas["evaluation"])
    shipped = Path(gpuarena.schemas.__file__).parent
    for name, body in schemas.items():
        assert json.loads((shipped / f"{name}.schema.json").read_text()) == body, (
            f"regenerate: gpuarena schema -o {shipped}"
        )


def test_each_dtype_names_torch_s_dtype_of_its_size():
    """problem.toml's dtypes are names with their sizes (so a server reads problems without torch):
    each is torch's dtype of that name, of that many bytes an element."""
    from gpuarena.problems.model import DTYPES, Workload

    for name, size in DTYPES.items():
        dtype = Workload(name="w", axes={}, dtype=name).torch_dtype
        assert isinstance(dtype, torch.dtype) and str(dtype) == f"torch.{name}" and dtype.itemsize == size, name
