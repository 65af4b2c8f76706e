"""`gpuarena import kernelbench` and KernelBench solution files (ModelNew) run unmodified.

The fixtures under fixtures/kernelbench/ are KernelBench-format files written for these
tests: level-1 ops without parameters, level-2 modules with Linear/Conv parameters and
scalar/tuple init inputs, two degenerate problems, two invalid files, and ModelNew solutions.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import gpuarena.solution_readers  # registers every format's reader
from gpuarena.harness.judge import RunOptions, evaluate
from gpuarena.harness.problem_check import check_problem
from gpuarena.interop.kernelbench import (
    CPU_MAX_ELEMENTS,
    SEED,
    import_file,
    import_files,
    read_file,
    size_constants,
    small_sizes,
)
from gpuarena.interop.kernelbench_solution import ADAPTER_FILE, INIT_INPUT
from gpuarena.problems import load_problem
from gpuarena.solutions import load_solution
from gpuarena.solutions.loader import solution_from_upload

from .conftest import FIXTURES, ROOT

KB = FIXTURES / "kernelbench"
SOLUTIONS = KB / "solutions"
MATMUL = KB / "level1" / "1_Matmul_Rectangular.py"
CONV = KB / "level2" / "7_Conv2d_ReLU_BiasAdd.py"
GEMM = KB / "level2" / "21_Gemm_Scale_Tanh.py"
CONSTANT = KB / "level2" / "33_Gemm_Max_SubtractMean.py"


@pytest.fixture(scope="module")
def imported(tmp_path_factory):
    """Every fixture problem imported once (the checks run as part of the import)."""
    root = tmp_path_factory.mktemp("kernelbench")
    outcomes = import_files([KB / "level1", KB / "level2", KB / "invalid"], root)
    return root, {o.source.name: o for o in outcomes}


def gpuarena(*args: object, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "gpuarena", *map(str, args)],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "COLUMNS": "200"},
    )


def test_import_writes_checked_problems_and_refuses_degenerate_ones(imported):
    root, outcomes = imported
    assert {name: o.status for name, o in outcomes.items()} == {
        "1_Matmul_Rectangular.py": "imported",
        "40_Add_IgnoresSecond.py": "failed-check",
        "7_Conv2d_ReLU_BiasAdd.py": "imported",
        "21_Gemm_Scale_Tanh.py": "imported",
        "33_Gemm_Max_SubtractMean.py": "failed-check",
        "no_model.py": "error",
        "get_inputs_raises.py": "error",
    }
    # the level comes from the folder above the file; the name from the file's
    assert sorted(p.relative_to(root).as_posix() for p in root.glob("level*/*")) == [
        "level1/1_matmul_rectangular",
        "level2/21_gemm_scale_tanh",
        "level2/7_conv2d_relu_biasadd",
    ]
    for folder in root.glob("level*/*"):
        report = check_problem(folder)
        assert report.ok, report.errors
    # degenerate problems are reported with the check's reasons, and not written
    assert any("does not depend on input b" in m for m in outcomes["40_Add_IgnoresSecond.py"].messages)
    assert any("is constant" in m for m in outcomes["33_Gemm_Max_SubtractMean.py"].messages)
    assert outcomes["33_Gemm_Max_SubtractMean.py"].folder is None
    # files that are not problems: the file and the reason, and nothing written for them
    assert "defines no class Model(nn.Module)" in outcomes["no_model.py"].messages[0]
    assert (
        "get_inputs() raised RuntimeError: this problem's inputs cannot be made"
        in outcomes["get_inputs_raises.py"].messages[0]
    )
    assert str(KB / "invalid" / "no_model.py") in outcomes["no_model.py"].messages[0]
    assert not list(root.glob("level*/no_model")) and not list(root.glob(".*"))  # no staging folders left


def test_workloads_are_the_files_sizes_plus_a_small_cpu_one(imported):
    root, _ = imported
    matmul = load_problem(root / "level1" / "1_matmul_rectangular")
    by_name = {w.name: w for w in matmul.spec.workloads}
    assert by_name["kernelbench"].axes == {"M": 1024, "K": 2048, "N": 512}
    assert by_name["kernelbench"].devices == ["cuda"]  # 3.7M elements: GPU only
    small = by_name["cpu-small"]
    assert small.devices == ["cpu", "cuda"] and set(small.axes) == {"M", "K", "N"}
    assert all(small.axes[k] <= by_name["kernelbench"].axes[k] for k in small.axes)
    assert matmul.input_names == ["A", "B", INIT_INPUT]  # forward's parameter names
    gen = torch.Generator().manual_seed(3)
    inputs = matmul.make_inputs(dict(small.axes), torch.float32, torch.device("cpu"), gen)
    assert inputs["A"].shape == (small.axes["M"], small.axes["K"]) and inputs["B"].shape == (
        small.axes["K"],
        small.axes["N"],
    )
    assert inputs["A"].numel() + inputs["B"].numel() + small.axes["M"] * small.axes["N"] <= CPU_MAX_ELEMENTS
    # the conv problem is small enough at its own sizes: one workload, on both kinds
    conv = load_problem(root / "level2" / "7_conv2d_relu_biasadd")
    assert [(w.name, w.devices) for w in conv.spec.workloads] == [("kernelbench", ["cpu", "cuda"])]
    assert conv.spec.level == 2 and conv.spec.provenance.framework == "kernelbench"
    assert conv.spec.tolerance_for("float32").atol == 1e-4  # KernelBench's fp32 tolerance


def test_reference_is_the_model_built_as_kernelbench_builds_it(imported):
    """torch.manual_seed(42), Model(*get_init_inputs()): the reference's parameters are those."""
    root, _ = imported
    problem = load_problem(root / "level2" / "21_gemm_scale_tanh")
    small = next(w for w in problem.spec.workloads if "cpu" in w.devices)  # its own sizes, under the CPU's caps
    inputs = problem.make_inputs(dict(small.axes), torch.float32, torch.device("cpu"), torch.Generator().manual_seed(5))
    init = inputs[INIT_INPUT]
    assert init[1] == SEED and init[2] == (small.axes["in_features"], small.axes["out_features"], 1.5)
    # the same init value in every draw (a scalar input may not change); forward's inputs differ
    again = problem.make_inputs(dict(small.axes), torch.float32, torch.device("cpu"), torch.Generator().manual_seed(6))
    assert again[INIT_INPUT] == init and not torch.equal(again["x"], inputs["x"])
    namespace: dict = {}
    exec(GEMM.read_text(), namespace)
    torch.manual_seed(SEED)
    model = namespace["Model"](*init[2])
    with torch.no_grad():
        expected = model(inputs["x"])
        got = problem.reference(**inputs)
    assert torch.equal(got, expected)


def test_sizes_are_halved_where_the_shapes_allow(tmp_path):
    source = (
        "import torch\nimport torch.nn as nn\n"
        "class Model(nn.Module):\n"
        "    def __init__(self, c):\n        super().__init__()\n        self.norm = nn.GroupNorm(groups, c)\n"
        "    def forward(self, x):\n        return self.norm(x)\n"
        "batch = 64\nchannels = 96\ngroups = 32\nlength = 4096\nhidden = channels * 2\n"
        "def get_inputs():\n    return [torch.randn(batch, channels, length)]\n"
        "def get_init_inputs():\n    return [channels]\n"
    )
    path = tmp_path / "norm.py"
    path.write_text(source)
    file = read_file(path)
    assert file.sizes == {"batch": 64, "channels": 96, "groups": 32, "length": 4096}  # hidden is derived
    small = small_sizes(file)
    assert small is not None and small["channels"] % small["groups"] == 0
    assert small["channels"] * small["batch"] * small["length"] * 2 <= CPU_MAX_ELEMENTS


def test_existing_folders_are_kept_unless_forced(tmp_path):
    first = import_file(CONV, tmp_path)
    assert first.status == "imported"
    marker = first.folder / "notes.txt"
    marker.write_text("mine")
    again = import_file(CONV, tmp_path)
    assert again.status == "error" and "exists and is not empty" in again.messages[0] and marker.read_text() == "mine"
    forced = import_file(CONV, tmp_path, force=True)
    assert forced.status == "imported" and not marker.exists()
    kept = import_file(CONSTANT, tmp_path, keep_failing=True)
    assert kept.status == "failed-check" and kept.folder is not None and (kept.folder / "problem.toml").is_file()


def test_a_model_new_file_becomes_a_solution_with_an_adapter():
    solution = load_solution(SOLUTIONS / "conv_new.py")
    assert solution.manifest.entry_point == f"{ADAPTER_FILE}:solve"
    assert solution.sources["conv_new.py"] == (SOLUTIONS / "conv_new.py").read_text()  # unmodified
    assert "MODEL_FILE = 'conv_new.py'" in solution.sources[ADAPTER_FILE]
    uploaded = solution_from_upload("conv_new.py", (SOLUTIONS / "conv_new.py").read_bytes())
    assert uploaded.hash == solution.hash
    # a file with its own solve() stays as it is, ModelNew or not
    plain = solution_from_upload("s.py", b"class ModelNew:\n    pass\n\ndef solve(x):\n    return x\n")
    assert plain.manifest.entry_point == "s.py:solve" and list(plain.sources) == ["s.py"]


def test_a_solution_file_given_to_the_importer_is_refused_without_running_it(tmp_path):
    outcome = import_file(SOLUTIONS / "gemm_tanh_cuda.py", tmp_path)  # would need nvcc if it ran
    assert outcome.status == "error" and "it is a KernelBench solution" in outcome.messages[0]


@pytest.mark.harness
def test_model_new_on_a_problem_not_from_kernelbench_says_so():
    problem = load_problem(ROOT / "problems" / "level1" / "add")
    record = evaluate(problem, load_solution(SOLUTIONS / "matmul_new.py"), RunOptions(device="cpu", mode="test"))
    assert record.status == "RUNTIME_ERROR"
    assert "imported with `gpuarena import kernelbench`" in record.reason


@pytest.mark.e2e
def test_import_and_run_model_new_files_from_the_command_line(tmp_path):
    out = tmp_path / "problems"
    done = gpuarena("import", "kernelbench", KB / "level1", KB / "level2", "-o", out)
    assert done.returncode == 1, done.stderr  # two degenerate problems: reported, not imported
    assert "3 of 5 file(s) imported" in done.stderr
    assert "FAILED CHECK" in done.stderr and "33_Gemm_Max_SubtractMean.py" in done.stderr
    assert "is constant, so a constant answer would pass" in done.stderr
    cases = [
        ("level1/1_matmul_rectangular", "matmul_new", "PASSED"),
        ("level1/1_matmul_rectangular", "matmul_wrong", "WRONG_VALUES"),
        ("level2/7_conv2d_relu_biasadd", "conv_new", "PASSED"),
        # parameters made in another order than Model's differ, as in KernelBench's eval
        ("level2/7_conv2d_relu_biasadd", "conv_other_order", "WRONG_VALUES"),
    ]
    for problem, solution, status in cases:
        run = gpuarena(
            "run", out / problem, SOLUTIONS / f"{solution}.py", "--device", "cpu", "--mode", "test", "--json"
        )
        record = json.loads(run.stdout)
        assert record["status"] == status, (solution, record.get("reason"), run.stderr[-2000:])
        assert run.returncode == (0 if status == "PASSED" else 1)


@pytest.mark.harness
def test_a_load_inline_cpp_model_new_runs_unmodified(tmp_path):
    """A ModelNew compiling C++ with torch.utils.cpp_extension.load_inline at import (CPU
    build, about a minute on two cores)."""
    outcome = import_file(GEMM, tmp_path)
    assert outcome.status == "imported", outcome.messages
    record = evaluate(
        load_problem(outcome.folder),
        load_solution(SOLUTIONS / "gemm_tanh_cpp.py"),
        RunOptions(device="cpu", mode="test"),
    )
    assert record.status == "PASSED", (record.reason, record.log[-3000:])


@pytest.mark.gpu
def test_a_load_inline_cuda_model_new_runs_unmodified(tmp_path):
    outcome = import_file(GEMM, tmp_path, check_device="cuda")
    assert outcome.status == "imported", outcome.messages
    record = evaluate(
        load_problem(outcome.folder),
        load_solution(SOLUTIONS / "gemm_tanh_cuda.py"),
        RunOptions(device="cuda", mode="benchmark", budget_s=0.5),
    )
    assert record.status == "PASSED", (record.reason, record.log[-3000:])
    assert all(w.speedup for w in record.workloads)


def test_size_constants_are_top_level_constant_integers_assigned_once():
    import ast

    tree = ast.parse(
        "a = 4\nb: int = 8\nc = a * 2\nd = 1.5\ne = True\nf = 3\nf = 4\ng = h = 2\nk = -1\n"
        "def get_inputs():\n    inner = 5\n"
    )
    # c is computed from a (the file computes it again from each workload's a), f is assigned twice
    assert size_constants(tree) == {"a": 4, "b": 8, "g": 2, "h": 2}


@pytest.mark.harness
def test_init_inputs_holding_a_list_build_the_model_on_both_sides(tmp_path):
    """ResNet's get_init_inputs() gives `layers = [3, 4, 23, 3]`: the model caches on both sides
    were keyed by the init args, and a list does not hash (TypeError: unhashable type: 'list',
    10 of KernelBench's level-3 networks)."""
    model = (
        "import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n"
        "    def __init__(self, widths, classes):\n        super().__init__()\n"
        "        sizes = [16, *widths, classes]\n"
        "        self.layers = nn.Sequential(*[nn.Linear(a, b) for a, b in zip(sizes, sizes[1:])])\n\n"
        "    def forward(self, x):\n        return self.layers(x)\n\n\n"
        "batch_size = 8\nwidths = [32, 24]\nclasses = 10\n\n\n"
        "def get_inputs():\n    return [torch.rand(batch_size, 16)]\n\n\n"
        "def get_init_inputs():\n    return [widths, classes]\n"
    )
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "7_ListInit.py").write_text(model)
    outcome = import_file(tmp_path / "src" / "7_ListInit.py", tmp_path / "out", level=3)
    assert outcome.status == "imported", outcome.messages
    solution = tmp_path / "new.py"
    solution.write_text(model.replace("class Model(", "class ModelNew(").split("\n\n\nbatch_size")[0] + "\n")
    record = evaluate(load_problem(outcome.folder), load_solution(solution), RunOptions(device="cpu", mode="test"))
    assert record.status == "PASSED", record.reason


CLOSURE = (
    "import torch\nimport torch.nn as nn\n\n\n"
    "class Model(nn.Module):\n"
    "    def __init__(self, width):\n"
    "        super().__init__()\n"
    "        self.mlp = nn.ModuleDict(dict(up=nn.Linear(width, 2 * width), down=nn.Linear(2 * width, width)))\n"
    "        m = self.mlp\n"
    "        self.mlpf = lambda x: m.down(torch.tanh(m.up(x)))  # as 44_MiniGPTBlock's MLP forward\n\n"
    "    def forward(self, x):\n"
    "        return x + self.mlpf(x)\n\n\n"
    "batch_size = 64\nwidth = 48\n\n\n"
    "def get_inputs():\n    return [torch.randn(batch_size, width)]\n\n\n"
    "def get_init_inputs():\n    return [width]\n"
)


def test_each_device_and_dtype_gets_a_model_of_its_own_not_a_copy(tmp_path):
    """KernelBench @423217d's level3/44_MiniGPTBlock calls its MLP through a lambda over the first
    model's modules: a copy moved to the GPU still called the CPU's (the check failed on an H200,
    "mat1 is on cuda:0, different from other tensors on cpu"). Here the dtype stands for the
    device: the reference in float64 after float32 must use float64 parameters throughout."""
    path = tmp_path / "44_Closure.py"
    path.write_text(CLOSURE)
    outcome = import_file(path, tmp_path / "out")
    assert outcome.status == "imported", outcome.messages
    problem = load_problem(outcome.folder)
    small = next(w for w in problem.spec.workloads if "cpu" in w.devices)
    for dtype in (torch.float32, torch.float64):
        inputs = problem.make_inputs(dict(small.axes), dtype, torch.device("cpu"), torch.Generator().manual_seed(3))
        with torch.no_grad():
            got = problem.reference(**inputs)
        assert got.dtype == dtype
    namespace: dict = {}
    exec(CLOSURE, namespace)
    torch.manual_seed(SEED)
    model = namespace["Model"](*inputs[INIT_INPUT][2]).to(torch.float64)
    with torch.no_grad():
        assert torch.equal(got, model(inputs["x"]))
