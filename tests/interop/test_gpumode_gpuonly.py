"""GPU MODE tasks a machine without a GPU cannot run whole (issue 49): a ref_kernel that needs
CUDA (GPU MODE's nvfp4 tasks), a reference.py importing a package not installed here (its
amd_202602 tasks import AMD's aiter), a task whose every entry is GPU-sized (amd/moe), and data
holding an nn.Module of the task's own (mla-decode's KVCache).

The fixtures are GPU MODE-format folders written for these tests (fixtures/gpumode/README.md):
gpuonly/cudaref_py, gpuonly/needspkg_py, gpuonly/kvcache_py.
"""

from __future__ import annotations

import importlib.util
import shutil
import sys
from pathlib import Path

import pytest
import torch

from gpuarena.interop import gpumode
from gpuarena.interop.gpumode import import_folder
from gpuarena.interop.gpumode_needs import missing_modules, missing_text
from gpuarena.problems import load_problem

from .conftest import FIXTURES

GM = FIXTURES / "gpumode"
GPU_ONLY = GM / "gpuonly"
ROOT = Path(__file__).resolve().parents[2]
SUBMISSIONS = GM / "submissions"
CPU_ONLY = pytest.mark.skipif(torch.cuda.is_available(), reason="what a machine without a GPU says")


@CPU_ONLY
def test_a_ref_kernel_that_needs_cuda_is_imported_for_its_first_gpu_run_to_check(tmp_path):
    """A GPU-sized problem is a problem: written, marked unchecked on the GPU, never passed here."""
    outcome = import_folder(GPU_ONLY / "cudaref_py", tmp_path)
    assert outcome.status == "imported" and outcome.folder is not None, outcome.messages
    text = "\n".join(outcome.messages)
    assert "every workload runs on a GPU only (ref_kernel raised AssertionError" in text
    assert "so it was not checked here" in text and "its first run on a GPU checks it" in text
    assert "check_implementation was not run" in text
    assert "no workload runs on the CPU" not in text  # the check's generic finding is replaced
    assert load_problem(outcome.folder).spec.unchecked == ["cuda"]


@CPU_ONLY
def test_it_is_written_with_its_outputs_and_buffers_read_on_the_meta_device(tmp_path):
    outcome = import_folder(GPU_ONLY / "cudaref_py", tmp_path)
    assert outcome.folder is not None
    assert any(f"`gpuarena check {outcome.folder} --device cuda`" in m for m in outcome.messages)
    problem = load_problem(outcome.folder)
    assert problem.spec.outputs == ["output"]
    assert all(w.devices == ["cuda"] for w in problem.spec.workloads)
    assert [w.name for w in problem.spec.workloads] == ["test0-size32", "bench0-size64"]
    assert problem.input_names[:3] == ["a", "s", "b"]  # c, written by ref_kernel, is a buffer
    assert "c" not in problem.input_names
    glue = (outcome.folder / "reference.py").read_text()
    assert "_BUFFERS = {3: 'empty'}" in glue and "_OUTPUT = ('t',)" in glue


@CPU_ONLY
def test_a_ref_kernel_that_fails_on_the_meta_device_too_is_refused_with_both_errors(tmp_path):
    task = tmp_path / "needs_values_py"
    shutil.copytree(GPU_ONLY / "cudaref_py", task)
    reference = task / "reference.py"
    reference.write_text(reference.read_text().replace("    return c\n", "    return c * float(c.sum().item())\n"))
    outcome = import_folder(task, tmp_path / "out")
    assert outcome.status == "error"
    (message,) = outcome.messages
    assert "raised AssertionError" in message and "on the CPU, and" in message and "on the meta device" in message
    assert "--check-device cuda" in message


@pytest.mark.parametrize("keep_failing", [False, True])
def test_a_reference_importing_a_package_not_installed_is_refused_naming_it(tmp_path, keep_failing):
    """Nothing of the task can run, so nothing true can be written, kept or not."""
    outcome = import_folder(GPU_ONLY / "needspkg_py", tmp_path, keep_failing=keep_failing)
    assert outcome.status == "error" and outcome.folder is None
    (message,) = outcome.messages
    assert "reference.py imports `gpuarena_absent_vendor_kernels`, not installed here" in message
    assert "nothing of the task was run" in message and "not even with --keep-failing" in message
    assert 'requires = ["gpuarena_absent_vendor_kernels"]' in message  # what importing it there writes
    assert not (tmp_path / "level1").exists() or not any((tmp_path / "level1").iterdir())


def test_a_vendor_package_s_refusal_names_the_gpu_it_is_for(tmp_path):
    """GPU MODE's amd_202602 tasks import AMD's aiter: the refusal says which machine imports them,
    and the peer bench still files it under the package (bench/peer_refusals.py)."""
    why, fix = missing_text(["aiter"])
    assert (
        "reference.py imports `aiter` (`aiter` is AMD's ROCm kernel library, for AMD Instinct GPUs), not installed"
        in why
    )
    assert 'requires = ["aiter"]' in fix
    assert "(" not in missing_text(["gpuarena_absent_vendor_kernels"])[0].split(", not installed")[0]
    spec = importlib.util.spec_from_file_location("peer_refusals", ROOT / "bench" / "peer_refusals.py")
    assert spec is not None and spec.loader is not None
    refusals = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(refusals)
    assert refusals.classify([why]) == "needs package aiter"


def _vendor_package(root: Path) -> None:
    """A stand-in for the vendor library needspkg_py imports, as the task's own machine has it."""
    package = root / "gpuarena_absent_vendor_kernels"
    (package / "ops").mkdir(parents=True)
    (package / "__init__.py").write_text("VERSION = '1.0'\n")
    (package / "ops" / "__init__.py").write_text("import torch\n\n\ndef fused_add(a, b):\n    return torch.add(a, b)\n")


def test_imported_where_its_package_is_installed_it_requires_it_and_elsewhere_says_so(tmp_path, monkeypatch):
    """The aiter-like task imported where its vendor library is installed carries it in
    `requires`; where it is missing, check and run stop with one line naming it, and nothing of
    the problem (the task's reference.py, which imports the library) is run."""
    from gpuarena.harness.judge import RunOptions, evaluate
    from gpuarena.harness.problem_check import check_problem
    from gpuarena.solutions import load_solution

    _vendor_package(tmp_path / "site")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    outcome = import_folder(GPU_ONLY / "needspkg_py", tmp_path / "out")
    assert outcome.status == "imported", outcome.messages
    toml = (outcome.folder / "problem.toml").read_text()
    assert (
        'requires = ["gpuarena_absent_vendor_kernels"]' in toml
        and "torch" not in toml.split("requires")[1].split("\n")[0]
    )
    assert load_problem(outcome.folder).spec.requires == ["gpuarena_absent_vendor_kernels"]
    monkeypatch.undo()  # the library gone, as on another machine
    for name in [m for m in sys.modules if m.split(".")[0] == "gpuarena_absent_vendor_kernels"]:
        monkeypatch.delitem(sys.modules, name)
    problem = load_problem(outcome.folder)
    line = f"{problem.id} requires `gpuarena_absent_vendor_kernels` (problem.toml `requires`), not installed here"
    report = check_problem(outcome.folder)
    assert len(report.errors) == 1 and report.errors[0].startswith(line)
    solution = load_solution(SUBMISSIONS / "vectoradd_ok.py")
    record = evaluate(problem, solution, RunOptions(device="cpu", mode="test"))
    assert record.status == "ERROR" and record.reason.startswith(line)
    assert "gpuarena_absent_vendor_kernels" not in sys.modules


def test_requires_names_the_third_party_packages_of_every_task_file():
    from gpuarena.interop.gpumode_needs import required_packages

    reference = "import torch\nimport numpy as np\nimport os, math\nfrom task import input_t\nimport aiter\n"
    reference += "from aiter.ops import x\nfrom . import y\ndef f():\n    import inner_only\n"
    assert required_packages(reference, "import triton\nimport aiter\n", "from typing import Any\n") == [
        "aiter",
        "triton",
    ]


def test_missing_modules_leaves_out_the_tasks_own_files_and_what_is_installed():
    source = "import torch\nfrom task import input_t\nfrom utils import x\nimport os.path\nimport absent_a.b\n"
    source += "from absent_b import c\nfrom . import d\ndef f():\n    import absent_c\n"
    assert missing_modules(source) == ["absent_a", "absent_b"]


def test_a_task_whose_every_entry_is_gpu_sized_says_so_not_that_it_lacks_small_workloads(tmp_path, monkeypatch):
    monkeypatch.setattr(gpumode, "CPU_MAX_ELEMENTS", 1)
    outcome = import_folder(GM / "vectoradd_py", tmp_path)
    assert outcome.status == "imported" and load_problem(outcome.folder).spec.unchecked == ["cuda"]
    assert any(
        m.startswith("every workload runs on a GPU only (no entry's data is CPU-sized)") for m in outcome.messages
    )
    assert not any("add small workloads" in m for m in outcome.messages)


def test_data_holding_a_module_of_the_tasks_own_is_refused_naming_it(tmp_path):
    """mla-decode's KVCache: its forward, which a submission calls, is the task's code, which the
    solution's side does not get; refused, not approximated."""
    outcome = import_folder(GPU_ONLY / "kvcache_py", tmp_path)
    assert outcome.status == "error"
    (message,) = outcome.messages
    assert "data holds a Cache (a torch.nn.Module" in message and "cannot rebuild" in message


H200_NVFP4 = (
    "RuntimeError: CUDA error: CUBLAS_STATUS_NOT_SUPPORTED when calling `cublasLtMatmulAlgoGetHeuristic( "
    "ltHandle, computeDesc.descriptor(), Adesc.descriptor(), ...)`"
)


def test_the_words_of_a_gpu_without_what_the_reference_needs_are_told_from_a_broken_reference():
    """As GPU MODE's nvfp4 tasks failed on an H200 (issue 49), and errors that are the task's own."""
    assert gpumode.beyond_this_gpu(H200_NVFP4)
    assert gpumode.beyond_this_gpu("CUDA error: no kernel image is available for execution on the device")
    assert not gpumode.beyond_this_gpu("RuntimeError: The size of tensor a (64) must match the size of tensor b (32)")
    assert not gpumode.beyond_this_gpu("AssertionError: c must be on CUDA")


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
def test_a_ref_kernel_this_gpu_cannot_run_is_written_for_one_that_can(tmp_path):
    """Imported on a GPU where ref_kernel raises cuBLAS's NOT_SUPPORTED: written with its outputs
    read on the meta device, marked unchecked on CUDA, the GPU it failed on named."""
    outcome = import_folder(GPU_ONLY / "newergpu_py", tmp_path, check_device="cuda")
    assert outcome.status == "imported" and outcome.folder is not None, outcome.messages
    text = "\n".join(outcome.messages)
    assert f"ref_kernel needs another GPU than this {torch.cuda.get_device_name()}" in text
    assert "CUBLAS_STATUS_NOT_SUPPORTED" in text and "marked `unchecked`" in text
    spec = load_problem(outcome.folder).spec
    assert spec.unchecked == ["cuda"] and all(w.devices == ["cuda"] for w in spec.workloads)


def test_the_meta_probe_makes_what_ref_kernel_builds_on_the_default_device_on_meta_too():
    """amd/moe's ref_kernel builds its experts' layers on the default device at full size, then
    swaps their weights for the data's: on the CPU the meta probe built them for real, past the
    8 GB an import is given. They are meta tensors there now, like the data."""
    from types import SimpleNamespace

    from gpuarena.interop.gpumode_device import ON_DEVICE
    from gpuarena.interop.gpumode_gpu import meta_probe
    from gpuarena.interop.gpumode_solution import RUNTIME

    built: list[str] = []

    def ref_kernel(data):
        x, w = data
        layer = torch.nn.Linear(w.shape[1], w.shape[0], bias=False)
        built.append(layer.weight.device.type)
        layer.weight = torch.nn.Parameter(w)
        return layer(x)

    rt: dict = {}
    exec(compile(RUNTIME + ON_DEVICE, "gpumode_runtime", "exec"), rt)
    task = SimpleNamespace(namespace={"ref_kernel": ref_kernel})
    out, buffers = meta_probe(task, (torch.ones(2, 64), torch.ones(32, 64)), rt)  # type: ignore[arg-type]
    assert built == ["meta"] and out.device.type == "meta" and out.shape == (2, 32) and buffers == {}


def test_a_checker_out_of_memory_on_a_gpu_sized_entry_leaves_the_check_to_a_gpu():
    """amd/moe's check_implementation calls ref_kernel again, on 5.8 GB of layers: on the CPU it
    ran out of memory on an entry too large to run there anyway, and the import called that the
    checker rejecting ref_kernel's own output. Out of memory is no verdict: a GPU checks it. Any
    other error, or running out on an entry the CPU runs, still rejects."""
    from types import SimpleNamespace

    from gpuarena.interop.gpumode_gpu import own_output_verdict

    def runs_out(data, output):
        raise RuntimeError("DefaultCPUAllocator: can't allocate memory: you tried to allocate 58720256 bytes")

    def breaks(data, output):
        raise KeyError("router.weight")

    data, out = (torch.ones(2),), torch.ones(2)
    notes: list[str] = []
    verdict = own_output_verdict(
        SimpleNamespace(namespace={"check_implementation": runs_out}), data, out, True, notes, "test1"
    )  # type: ignore[arg-type]
    assert verdict == (True, "") and notes == [
        "check_implementation ran out of memory here on test1, a GPU-sized entry: a GPU checks it"
    ]
    ok, why = own_output_verdict(
        SimpleNamespace(namespace={"check_implementation": runs_out}), data, out, False, [], "t"
    )  # type: ignore[arg-type]
    assert not ok and "can't allocate memory" in why
    ok, why = own_output_verdict(SimpleNamespace(namespace={"check_implementation": breaks}), data, out, True, [], "t")  # type: ignore[arg-type]
    assert not ok and why.startswith("it raised KeyError")
    gpu_out = RuntimeError("CUDA out of memory. Tried to allocate 20.00 GiB")

    def gpu_runs_out(data, output):
        raise gpu_out

    ok, why = own_output_verdict(
        SimpleNamespace(namespace={"check_implementation": gpu_runs_out}), data, out, True, [], "t"
    )  # type: ignore[arg-type]
    assert not ok and "CUDA out of memory" in why  # on a GPU the import is the first GPU run
