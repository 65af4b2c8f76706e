"""FlashInfer Solutions -> gpuarena solution folders judged by the real harness on the CPU, and
gpuarena solutions -> FlashInfer Solutions (`pack_solution`), keeping their content hash."""

from __future__ import annotations

import json

import pytest

import gpuarena.solution_readers  # noqa: F401  (registers every format's reader)
from gpuarena.errors import FormatError
from gpuarena.harness.judge import RunOptions, evaluate
from gpuarena.interop import flashinfer_trace as fit
from gpuarena.interop.flashinfer_export import pack_solution
from gpuarena.interop.flashinfer_import import import_solution, solution_files
from gpuarena.interop.flashinfer_sidecar import UnsupportedFeature
from gpuarena.problems import resolve_problem
from gpuarena.solutions import load_solution
from gpuarena.solutions.model import Solution as GpuarenaSolution

from .conftest import RMSNORM, ROOT

SOLUTIONS = RMSNORM / "solutions"


def _judge(problem, folder, **options):
    defaults = dict(device="cpu", mode="test", timeout_s=120.0, budget_s=0.2)
    defaults.update(options)
    return evaluate(problem, load_solution(folder), RunOptions(**defaults))


@pytest.mark.harness
def test_an_honest_value_returning_solution_passes_on_a_destination_problem(rmsnorm_problem, tmp_path):
    folder = import_solution(SOLUTIONS / "python_returning.json", rmsnorm_problem, tmp_path / "s")
    manifest = load_solution(folder).manifest
    assert (manifest.entry_point, manifest.convention) == ("main.py:run", "return")  # called as written
    record = _judge(rmsnorm_problem, folder)
    assert record.status == "PASSED", record.reason + record.log[-2000:]
    assert len(record.workloads) == 3 and all(w.status == "PASSED" for w in record.workloads)


@pytest.mark.harness
def test_a_wrong_solution_is_judged_wrong(rmsnorm_problem, tmp_path):
    folder = import_solution(SOLUTIONS / "python_wrong.json", rmsnorm_problem, tmp_path / "s")
    assert load_solution(folder).manifest.entry_point == "wrong.py:run"  # destination-passing: called as is
    record = _judge(rmsnorm_problem, folder)
    assert record.status == "WRONG_VALUES", record.reason
    assert "output output" in record.reason


@pytest.mark.harness
def test_a_triton_solution_of_two_files_passes_under_the_interpreter(rmsnorm_problem, tmp_path, monkeypatch):
    pytest.importorskip("triton")
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    folder = import_solution(SOLUTIONS / "triton_dps.json", rmsnorm_problem, tmp_path / "s")
    solution = load_solution(folder)
    assert solution.manifest.language == "triton" and sorted(solution.sources) == ["main.py", "rmsnorm_kernel.py"]
    record = _judge(rmsnorm_problem, folder)
    assert record.status == "PASSED", record.reason + record.log[-2000:]


@pytest.mark.harness
def test_a_destination_passing_solution_gets_its_outputs_on_a_return_problem(softmax_problem, tmp_path):
    solution = {
        "name": "softmax_dps",
        "definition": "softmax_rows",
        "author": "gpuarena-tests",
        "spec": {
            "language": "python",
            "target_hardware": ["cpu"],
            "entry_point": "softmax.py::run",
            "destination_passing_style": True,
        },
        "sources": [
            {
                "path": "softmax.py",
                "content": "import torch\n\n\ndef run(logits, probs):\n    torch.softmax(logits, dim=-1, out=probs)\n",
            }
        ],
    }
    path = tmp_path / "softmax_dps.json"
    path.write_text(json.dumps(solution))
    folder = import_solution(path, softmax_problem, tmp_path / "s")
    record = _judge(softmax_problem, folder, workloads=["softmax-small-8x100", "softmax-mid-64x1000"])
    assert record.status == "PASSED", record.reason + record.log[-2000:]


def test_a_solution_for_another_definition_is_refused(softmax_problem):
    solution = fit.read_solution(SOLUTIONS / "python_returning.json")
    with pytest.raises(FormatError, match="names 'rmsnorm_h256', but .* was imported from 'softmax_rows'"):
        solution_files(solution, softmax_problem)


@pytest.mark.harness
def test_a_cpp_solution_bound_through_tvm_ffi_passes(rmsnorm_problem, tmp_path):
    """The spec's default binding for C++ and CUDA is tvm-ffi: gpuarena builds it with TVM-FFI."""
    pytest.importorskip("tvm_ffi")
    folder = import_solution(SOLUTIONS / "cpp_tvm_ffi.json", rmsnorm_problem, tmp_path / "s")
    solution = load_solution(folder)
    assert solution.manifest.language == "tvm-ffi" and solution.manifest.entry_point == "run"
    record = _judge(rmsnorm_problem, folder)
    assert record.status == "PASSED", record.reason + record.log[-2000:]


RETURNING_CPP = """// RMSNorm of float32 rows on the CPU, its output allocated and returned (value-returning).
#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/extra/c_env_api.h>
#include <tvm/ffi/function.h>

#include <cmath>

namespace ffi = tvm::ffi;

ffi::Tensor run(ffi::TensorView hidden_states, ffi::TensorView weight, double eps) {
  ffi::Tensor out = ffi::Tensor::FromEnvAlloc(TVMFFIEnvTensorAlloc, hidden_states.shape(), hidden_states.dtype(),
                                              hidden_states.device());
  const int64_t rows = hidden_states.size(0), cols = hidden_states.size(1);
  const float* x = static_cast<const float*>(hidden_states.data_ptr());
  const float* w = static_cast<const float*>(weight.data_ptr());
  float* y = static_cast<float*>(out.data_ptr());
  for (int64_t r = 0; r < rows; ++r) {
    float squares = 0.f;
    for (int64_t c = 0; c < cols; ++c) squares += x[r * cols + c] * x[r * cols + c];
    const float inv_rms = 1.f / std::sqrt(squares / cols + static_cast<float>(eps));
    for (int64_t c = 0; c < cols; ++c) y[r * cols + c] = x[r * cols + c] * inv_rms * w[c];
  }
  return out;
}

TVM_FFI_DLL_EXPORT_TYPED_FUNC(run, run);
"""


@pytest.mark.harness
def test_a_value_returning_cpp_solution_passes_on_a_destination_problem(rmsnorm_problem, tmp_path):
    """Before, a C++/CUDA solution in the other convention than its problem's was refused (no
    Python adapter can sit between the harness and a compiled entry point): now its manifest
    says its own convention and the harness calls it so."""
    pytest.importorskip("tvm_ffi")
    solution = {
        "name": "rmsnorm_returning_cpp",
        "definition": "rmsnorm_h256",
        "author": "gpuarena-tests",
        "spec": {
            "language": "cpp",
            "target_hardware": ["cpu"],
            "entry_point": "rmsnorm.cc::run",
            "destination_passing_style": False,
        },
        "sources": [{"path": "rmsnorm.cc", "content": RETURNING_CPP}],
    }
    path = tmp_path / "returning_cpp.json"
    path.write_text(json.dumps(solution))
    folder = import_solution(path, rmsnorm_problem, tmp_path / "s")
    manifest = load_solution(folder).manifest
    assert (manifest.language, manifest.entry_point, manifest.convention) == ("tvm-ffi", "run", "return")
    record = _judge(rmsnorm_problem, folder)
    assert record.status == "PASSED", record.reason + record.log[-2000:]
    packed = pack_solution(folder, problem=rmsnorm_problem)
    assert packed.spec.destination_passing_style is False  # exported in its own convention


@pytest.mark.parametrize(
    "spec, language",
    [
        ({"language": "cuda", "binding": "tvm-ffi", "entry_point": "k.cu::run"}, "tvm-ffi"),
        ({"language": "cuda", "entry_point": "k.cu::run"}, "tvm-ffi"),
        ({"language": "cpp", "entry_point": "k.cu::run"}, "tvm-ffi"),
        ({"language": "cuda", "binding": "torch", "entry_point": "k.cu::run"}, "cuda"),
        ({"language": "tilelang", "entry_point": "k.py::run"}, "tilelang"),
    ],
)
def test_each_language_takes_its_builder(rmsnorm_problem, spec, language):
    """C++ and CUDA by their binding; TileLang as gpuarena's tilelang language."""
    file = spec["entry_point"].split("::")[0]
    solution = fit.Solution.model_validate(
        {
            "name": "s",
            "definition": "rmsnorm_h256",
            "author": "a",
            "spec": {"target_hardware": ["NVIDIA_H100"], **spec},
            "sources": [{"path": file, "content": "// kernel" if file.endswith(".cu") else "def run(): pass\n"}],
        }
    )
    assert f'language = "{language}"' in solution_files(solution, rmsnorm_problem)["solution.toml"]


@pytest.mark.parametrize(
    "spec, feature",
    [
        ({"language": "cpp", "binding": "torch", "entry_point": "k.cu::run"}, "cpp solutions bound with torch"),
    ],
)
def test_languages_gpuarena_cannot_build_are_named_gaps(rmsnorm_problem, spec, feature):
    solution = fit.Solution.model_validate(
        {
            "name": "s",
            "definition": "rmsnorm_h256",
            "author": "a",
            "spec": {"target_hardware": ["NVIDIA_H100"], **spec},
            "sources": [{"path": "k.cu", "content": "// kernel"}],
        }
    )
    with pytest.raises(UnsupportedFeature) as caught:
        solution_files(solution, rmsnorm_problem)
    assert caught.value.feature == feature


@pytest.mark.parametrize("name", ["python_returning", "python_wrong", "triton_dps", "cpp_tvm_ffi"])
def test_import_then_pack_gives_the_solution_back_with_its_hash(rmsnorm_problem, tmp_path, name):
    original = fit.read_solution(SOLUTIONS / f"{name}.json")
    folder = import_solution(SOLUTIONS / f"{name}.json", rmsnorm_problem, tmp_path / "s")
    packed = pack_solution(folder, problem=rmsnorm_problem)
    assert packed == original
    assert packed.content_hash == original.content_hash
    # and through gpuarena's own pack (which keeps only the sources): same content hash
    gpuarena_pack = tmp_path / "pack.json"
    from gpuarena.solutions.loader import pack

    gpuarena_pack.write_text(pack(load_solution(folder)))
    again = pack_solution(gpuarena_pack, problem=rmsnorm_problem, name=original.name, author=original.author)
    assert again.content_hash == original.content_hash and again.spec.entry_point == original.spec.entry_point


def test_pack_then_import_gives_the_gpuarena_solution_back_with_its_hash(tmp_path):
    problem = resolve_problem("level1/softmax")
    for example in ("pytorch.py", "triton.py"):
        original: GpuarenaSolution = load_solution(ROOT / "examples" / "softmax" / example)
        packed = pack_solution(ROOT / "examples" / "softmax" / example, problem=problem, author="tests")
        assert packed.definition == "softmax" and packed.spec.destination_passing_style is False
        assert packed.spec.entry_point == f"{example}::solve"
        path = tmp_path / f"{example}.json"
        path.write_text(fit.to_json(packed))
        folder = import_solution(path, problem, tmp_path / example.removesuffix(".py"))
        back = load_solution(folder)
        assert back.hash == original.hash  # manifest and sources alike
        assert fit.sources_hash(back.sources) == packed.content_hash == fit.sources_hash(original.sources)


def test_a_cuda_folder_packs_with_the_torch_binding(tmp_path):
    folder = tmp_path / "cuda"
    folder.mkdir()
    (folder / "softmax.cu").write_text((ROOT / "examples" / "softmax" / "cuda" / "softmax.cu").read_text())
    (folder / "solution.toml").write_text('language = "cuda"\nentry_point = "solve"\nsources = ["softmax.cu"]\n')
    packed = pack_solution(folder, problem=resolve_problem("level1/softmax"))
    assert packed.spec.language == "cuda" and packed.spec.binding == "torch"
    assert packed.spec.entry_point == "softmax.cu::solve"
    path = tmp_path / "cuda.json"
    path.write_text(fit.to_json(packed))
    back = load_solution(import_solution(path, resolve_problem("level1/softmax"), tmp_path / "back"))
    assert back.hash == load_solution(folder).hash


def test_build_flags_are_a_named_gap_when_packing(tmp_path):
    folder = tmp_path / "s"
    folder.mkdir()
    (folder / "main.py").write_text("def solve(x):\n    return x.clone()\n")
    (folder / "solution.toml").write_text(
        'language = "pytorch"\nentry_point = "main.py:solve"\n[build]\nextra_cflags = ["-O3"]\n'
    )
    with pytest.raises(UnsupportedFeature, match="a FlashInfer-Trace Solution cannot carry compiler flags"):
        pack_solution(folder, problem=resolve_problem("level1/softmax"))
    with pytest.raises(UnsupportedFeature, match="compiler flags"):
        pack_solution(ROOT / "examples" / "softmax" / "cuda", problem=resolve_problem("level1/softmax"))


def test_the_tvm_ffi_example_packs_as_cuda_bound_with_tvm_ffi_and_comes_back(tmp_path):
    folder = tmp_path / "tvm_ffi"
    folder.mkdir()
    (folder / "softmax.cu").write_text((ROOT / "examples" / "softmax" / "tvm_ffi" / "softmax.cu").read_text())
    (folder / "solution.toml").write_text('language = "tvm-ffi"\nentry_point = "solve"\nsources = ["softmax.cu"]\n')
    problem = resolve_problem("level1/softmax")
    packed = pack_solution(folder, problem=problem)
    assert (packed.spec.language, packed.spec.binding, packed.spec.entry_point) == (
        "cuda",
        "tvm-ffi",
        "softmax.cu::solve",
    )
    path = tmp_path / "packed.json"
    path.write_text(fit.to_json(packed))
    assert load_solution(import_solution(path, problem, tmp_path / "back")).hash == load_solution(folder).hash


def test_a_jax_solution_is_a_named_gap_when_packing():
    with pytest.raises(UnsupportedFeature, match="FlashInfer-Trace has no such language"):
        pack_solution(ROOT / "examples" / "softmax" / "jax.py", problem=resolve_problem("level1/softmax"))
