"""FlashInfer-Trace workloads whose inputs are recorded tensors in safetensors files: read at
import time (paths relative to the data set's root, as FlashInfer-Bench resolves them), kept in
the problem folder as text, and passed to the reference and solutions exactly, in every draw.
The safetensors files are written here with the safetensors package."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch

from gpuarena.errors import FormatError
from gpuarena.harness.problem_check import check_problem
from gpuarena.interop import flashinfer_trace as fit
from gpuarena.interop.flashinfer_data import DATA_FILE
from gpuarena.interop.flashinfer_export import export_definition
from gpuarena.interop.flashinfer_import import import_definition
from gpuarena.problems import load_problem
from gpuarena.problems.pack import pack_problem, unpack_problem

from .conftest import FIXTURES, RMSNORM

safetensors_torch = pytest.importorskip("safetensors.torch")

RECORDED = FIXTURES / "recorded_rmsnorm"
WORKLOADS = Path("workloads") / "rmsnorm" / "rmsnorm_h256.jsonl"
BLOB = Path("blob") / "workloads" / "rmsnorm" / "rmsnorm_h256"
CPU = torch.device("cpu")


def _dataset(tmp_path: Path) -> tuple[Path, dict[str, torch.Tensor]]:
    """The fixture data set copied under tmp_path, with its two safetensors files written."""
    root = tmp_path / "dataset"
    shutil.copytree(RECORDED, root)
    (root / BLOB).mkdir(parents=True)
    generator = torch.Generator().manual_seed(11)
    tensors = {
        "step1.hidden_states": torch.randn(2, 256, generator=generator) * 2 + 0.25,
        "step1.weight": torch.rand(256, generator=generator) + 0.5,
        "step2.activations": torch.randn(2, 256, generator=generator) * 3,
    }
    safetensors_torch.save_file(
        {"hidden_states": tensors["step1.hidden_states"], "weight": tensors["step1.weight"]},
        root / BLOB / "step1.safetensors",
    )
    safetensors_torch.save_file({"activations": tensors["step2.activations"]}, root / BLOB / "step2.safetensors")
    return root, tensors


def _draw(problem, name: str, seed: int) -> dict:
    workload = next(w for w in problem.spec.workloads if w.name == name)
    return problem.make_inputs(dict(workload.axes), workload.torch_dtype, CPU, torch.Generator().manual_seed(seed))


def test_safetensors_inputs_are_the_recorded_tensors_in_every_draw(tmp_path):
    root, tensors = _dataset(tmp_path)
    import_definition(RMSNORM / "definition.json", root / WORKLOADS, tmp_path / "p")  # gpuarena check passes
    problem = load_problem(tmp_path / "p")
    assert [w.name for w in problem.spec.workloads] == ["captured-b2-step1", "captured-b2-step2", "drawn-b5"]
    for seed in (1, 2):
        first, second = _draw(problem, "captured-b2-step1", seed), _draw(problem, "captured-b2-step2", seed)
        assert torch.equal(first["hidden_states"], tensors["step1.hidden_states"])
        assert torch.equal(first["weight"], tensors["step1.weight"])
        assert torch.equal(second["hidden_states"], tensors["step2.activations"])  # same axes, its own data
        assert first["eps"] == second["eps"] == 1e-6
    assert not torch.equal(
        _draw(problem, "captured-b2-step2", 1)["weight"], _draw(problem, "captured-b2-step2", 2)["weight"]
    )
    assert problem.module.fixed_inputs(dict(problem.spec.workloads[0].axes)) == ["hidden_states", "weight"]
    assert problem.module.fixed_inputs(dict(problem.spec.workloads[2].axes)) == []
    inputs = _draw(problem, "captured-b2-step1", 3)
    assert problem.reference(**inputs).shape == (2, 256)
    assert check_problem(tmp_path / "p").ok  # recorded inputs need not change with the seed


def test_the_recorded_tensors_travel_with_the_problem_folder(tmp_path):
    root, tensors = _dataset(tmp_path)
    import_definition(RMSNORM / "definition.json", root / WORKLOADS, tmp_path / "p")
    shutil.rmtree(root)  # the user's files gone: the problem keeps its own copy
    assert (tmp_path / "p" / DATA_FILE).is_file()
    packed = pack_problem(load_problem(tmp_path / "p"))  # text only, as a server stores problems
    assert DATA_FILE in packed.files
    problem = unpack_problem(packed, tmp_path / "cache")
    assert torch.equal(_draw(problem, "captured-b2-step2", 7)["hidden_states"], tensors["step2.activations"])


def test_safetensors_workloads_round_trip(tmp_path):
    root, _ = _dataset(tmp_path)
    import_definition(RMSNORM / "definition.json", root / WORKLOADS, tmp_path / "p")
    definition, workloads = export_definition(load_problem(tmp_path / "p"))
    assert definition == fit.read_definition(RMSNORM / "definition.json")
    assert workloads == fit.read_workloads(root / WORKLOADS)  # the paths and keys as given


def test_paths_resolve_against_the_dataset_root_or_the_workloads_folder(tmp_path):
    root, tensors = _dataset(tmp_path)
    flat = tmp_path / "flat"  # no workloads/ folder: the paths are relative to the JSONL's folder
    shutil.copytree(root / "blob", flat / "blob")
    shutil.copy(root / WORKLOADS, flat / "w.jsonl")
    import_definition(RMSNORM / "definition.json", flat / "w.jsonl", tmp_path / "p")
    assert torch.equal(_draw(load_problem(tmp_path / "p"), "captured-b2-step1", 1)["weight"], tensors["step1.weight"])
    elsewhere = tmp_path / "elsewhere.jsonl"
    shutil.copy(root / WORKLOADS, elsewhere)
    import_definition(RMSNORM / "definition.json", elsewhere, tmp_path / "q", dataset_root=root)
    assert (tmp_path / "q" / DATA_FILE).is_file()


def _edited(tmp_path: Path, edit) -> FormatError:
    root, _ = _dataset(tmp_path)
    lines = [json.loads(line) for line in (root / WORKLOADS).read_text().splitlines()]
    edit(root, lines[0]["workload"]["inputs"])
    (root / WORKLOADS).write_text("".join(json.dumps(line) + "\n" for line in lines))
    with pytest.raises(FormatError) as caught:
        import_definition(RMSNORM / "definition.json", root / WORKLOADS, tmp_path / "p")
    assert not (tmp_path / "p").exists()
    return caught.value


def test_a_missing_file_is_named(tmp_path):
    error = _edited(tmp_path, lambda root, inputs: (root / BLOB / "step1.safetensors").unlink())
    assert error.field == "workload.inputs.hidden_states" and "captured-b2-step1" in str(error)
    assert f"the safetensors file {BLOB / 'step1.safetensors'} is not found" in str(error)


def test_a_missing_key_is_named(tmp_path):
    error = _edited(tmp_path, lambda root, inputs: inputs["weight"].update(tensor_key="gamma"))
    assert error.field == "workload.inputs.weight"
    assert "has no tensor 'gamma' (its keys: hidden_states, weight)" in str(error)


def test_a_shape_or_dtype_unlike_the_definitions_is_named(tmp_path):
    def wrong(root: Path, inputs: dict) -> None:
        safetensors_torch.save_file({"weight": torch.ones(128)}, root / BLOB / "step1.safetensors")
        inputs["hidden_states"] = {"type": "random"}

    error = _edited(tmp_path, wrong)
    assert "tensor 'weight'" in str(error) and "is [128] float32; the definition says [256] float32" in str(error)

    def narrow(root: Path, inputs: dict) -> None:
        safetensors_torch.save_file({"weight": torch.ones(256, dtype=torch.float16)}, root / BLOB / "step1.safetensors")
        inputs["hidden_states"] = {"type": "random"}

    error = _edited(tmp_path / "again", narrow)
    assert "is [256] float16; the definition says [256] float32" in str(error)


@pytest.mark.harness
def test_a_solution_is_judged_on_the_recorded_inputs(tmp_path):
    from gpuarena.harness.judge import RunOptions, evaluate
    from gpuarena.solutions import load_solution

    root, _ = _dataset(tmp_path)
    import_definition(RMSNORM / "definition.json", root / WORKLOADS, tmp_path / "p", convention="return")
    solution = tmp_path / "solution.py"
    solution.write_text(
        "import torch\n\n\n"
        "def solve(hidden_states, weight, eps):\n"
        "    return hidden_states * torch.rsqrt((hidden_states ** 2).mean(-1, keepdim=True) + eps) * weight\n"
    )
    record = evaluate(load_problem(tmp_path / "p"), load_solution(solution), RunOptions(device="cpu", mode="test"))
    assert record.status == "PASSED", record.reason
    assert [w.name for w in record.workloads] == ["captured-b2-step1", "captured-b2-step2", "drawn-b5"]


def test_a_git_lfs_pointer_is_named(tmp_path):
    def pointer(root: Path, inputs: dict) -> None:
        (root / BLOB / "step1.safetensors").write_text(
            "version https://git-lfs.github.com/spec/v1\noid sha256:0123\nsize 2048\n"
        )

    error = _edited(tmp_path, pointer)
    assert "is a Git LFS pointer, not its data" in str(error) and "git lfs pull" in str(error)
