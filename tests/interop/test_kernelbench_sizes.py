"""KernelBench sizes as KernelBench's files write them (issue 49): expressions, constants
computed from others, chained assignments and tuples read as workload axes; a problem with no
CPU workload told what can be done; an import killed before it finished in nobody's way.

The fixtures under tests/fixtures/kernelbench_sizes/ are KernelBench-format files written
for these tests."""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from gpuarena.harness.problem_check import check_problem
from gpuarena.interop import kernelbench, staging
from gpuarena.interop.kernelbench import (
    CPU_MAX_ELEMENTS,
    SEED,
    import_file,
    import_files,
    read_file,
    size_constants,
    small_sizes,
    with_sizes,
)
from gpuarena.interop.kernelbench_solution import INIT_INPUT
from gpuarena.problems import load_problem
from gpuarena.problems.loader import discover

from .conftest import FIXTURES, ROOT

SIZES = ROOT / "tests" / "fixtures" / "kernelbench_sizes"
SWISH = SIZES / "level1" / "91_Swish_ExpressionSizes.py"
MATMUL = SIZES / "level1" / "92_Matmul_DerivedSizes.py"
CONV = SIZES / "level2" / "93_Conv2d_TupleKernel_Tanh.py"
GPU_ONLY = SIZES / "gpu_only" / "94_Softplus_FixedShape.py"
SMALL = FIXTURES / "kernelbench" / "level2" / "7_Conv2d_ReLU_BiasAdd.py"  # one small workload: a quick import


def _sizes(text: str) -> dict[str, int]:
    return size_constants(ast.parse(text))


def test_expressions_chains_and_tuples_are_sizes():
    assert _sizes("N = 2048 * 2\ndim = 16384 // 4\np = 2 ** 10\nq = (7 + 1) % 5\nr = -(-3)\n") == {
        "N": 4096,
        "dim": 4096,
        "p": 1024,
        "q": 3,
        "r": 3,
    }
    assert _sizes("a = b = 256\n") == {"a": 256, "b": 256}
    assert _sizes("kernel_size = (3, 5)\nshape = [128, 64 * 4]\nh, w = 32, 2 * 8\n") == {
        "kernel_size_0": 3,
        "kernel_size_1": 5,
        "shape_0": 128,
        "shape_1": 256,
        "h": 32,
        "w": 16,
    }
    # computed from other names: not sizes (the file computes them again); the literal
    # element of a tuple that names another constant still is one
    assert _sizes("N = 1024\nM = 4 * N\nshape = (M, 256)\n") == {"N": 1024, "shape_1": 256}
    # not integers, negative, too large to evaluate, or a name a tuple's element would take too
    # (t_0: neither is a size, so a workload's t_0 is never put in the wrong place)
    assert _sizes("x = 1 / 2\ny = 2 ** 100000\nz = 10 ** 30\nn = -4\nt = (3, 5)\nt_0 = 1\nu = 4 // 0\n") == {"t_1": 5}
    assert _sizes("N = 8\nt = (N, 5)\nt_0 = 1\n") == {"N": 8, "t_1": 5}
    assert _sizes("a = b = 3\nb = 4\n") == {"a": 3}  # b is assigned twice


def test_each_workloads_sizes_are_put_in_place_and_derived_ones_follow():
    source = (
        "N = 512 * 2\nM = 4 * N\nin_c = out_c = 32\nkernel_size = (3, 5)\nshape = (M, 256)\n"
        "h, w = 64, 2 * 64\nb: int = 8 * 2\n"
    )
    sizes = _sizes(source)
    assert sizes == {
        "N": 1024,
        "in_c": 32,
        "out_c": 32,
        "kernel_size_0": 3,
        "kernel_size_1": 5,
        "shape_1": 256,
        "h": 64,
        "w": 128,
        "b": 16,
    }
    small = {name: value // 2 for name, value in sizes.items()}
    tree = with_sizes(ast.parse(source), small)
    assert size_constants(tree) == small  # read back as they were put: the two agree
    namespace: dict = {}
    exec(compile(tree, "<sizes>", "exec"), namespace)
    assert namespace["M"] == 4 * small["N"] and namespace["shape"] == (4 * small["N"], small["shape_1"])
    assert (namespace["in_c"], namespace["out_c"], namespace["kernel_size"]) == (16, 16, (1, 2))
    assert (namespace["h"], namespace["w"], namespace["b"]) == (32, 64, 8)
    # the glue of an imported problem holds this same substitution
    assert "def _substitute_sizes(tree, sizes):" in kernelbench._glue(["x"])


@pytest.fixture(scope="module")
def imported(tmp_path_factory):
    root = tmp_path_factory.mktemp("kernelbench_sizes")
    outcomes = import_files([SIZES / "level1", SIZES / "level2"], root)
    return root, {o.source.name: o for o in outcomes}


def _workloads(folder: Path) -> dict:
    return {w.name: w for w in load_problem(folder).spec.workloads}


def test_sizes_written_as_expressions_give_a_cpu_workload(imported):
    root, outcomes = imported
    assert {name: (o.status, o.workloads) for name, o in outcomes.items()} == {
        "91_Swish_ExpressionSizes.py": ("imported", ["kernelbench", "cpu-small"]),
        "92_Matmul_DerivedSizes.py": ("imported", ["kernelbench", "cpu-small"]),
        "93_Conv2d_TupleKernel_Tanh.py": ("imported", ["kernelbench", "cpu-small"]),
    }, {name: o.messages for name, o in outcomes.items()}
    swish = _workloads(root / "level1" / "91_swish_expressionsizes")
    assert swish["kernelbench"].axes == {"batch_size": 128, "dim": 16384} and swish["kernelbench"].devices == ["cuda"]
    assert swish["cpu-small"].devices == ["cpu", "cuda"]
    assert swish["cpu-small"].axes["batch_size"] * swish["cpu-small"].axes["dim"] * 2 <= CPU_MAX_ELEMENTS


def test_a_constant_computed_from_a_size_follows_it_in_every_workload(imported):
    root, _ = imported
    folder = root / "level1" / "92_matmul_derivedsizes"
    workloads = _workloads(folder)
    assert workloads["kernelbench"].axes == {"N": 1024, "K": 512}  # M = 4 * N and shape_a follow N
    problem = load_problem(folder)
    for workload in workloads.values():
        axes = dict(workload.axes)
        namespace = problem.module._namespace(axes)  # the glue's: the file run at these sizes
        assert (namespace["M"], namespace["shape_a"]) == (4 * axes["N"], (4 * axes["N"], axes["K"]))
    small = workloads["cpu-small"].axes
    assert small["N"] < 1024
    inputs = problem.make_inputs(dict(small), torch.float32, torch.device("cpu"), torch.Generator().manual_seed(1))
    assert inputs["A"].shape == (4 * small["N"], small["K"]) and inputs["B"].shape == (small["K"], small["N"])
    assert torch.equal(problem.reference(**inputs), inputs["A"] @ inputs["B"])


def test_tuple_and_chained_sizes_reach_the_model(imported):
    root, _ = imported
    folder = root / "level2" / "93_conv2d_tuplekernel_tanh"
    problem = load_problem(folder)
    workloads = _workloads(folder)
    assert workloads["kernelbench"].axes == {
        "batch_size": 8,
        "in_channels": 32,
        "out_channels": 32,
        "height": 128,
        "width": 128,
        "kernel_size_0": 3,
        "kernel_size_1": 5,
        "stride_0": 1,
        "stride_1": 2,
    }
    small = dict(workloads["cpu-small"].axes)
    assert (small["kernel_size_0"], small["kernel_size_1"], small["stride_0"], small["stride_1"]) == (3, 5, 1, 2)
    inputs = problem.make_inputs(small, torch.float32, torch.device("cpu"), torch.Generator().manual_seed(2))
    init = inputs[INIT_INPUT]
    assert init[2] == (small["in_channels"], small["out_channels"], (3, 5), (1, 2))  # the tuples rebuilt
    assert inputs["x"].shape == (small["batch_size"], small["in_channels"], small["height"], small["width"])
    namespace: dict = {}
    exec(CONV.read_text(), namespace)
    torch.manual_seed(SEED)
    model = namespace["Model"](*init[2])
    with torch.no_grad():
        assert torch.equal(problem.reference(**inputs), model(inputs["x"]))


def test_a_file_with_no_cpu_workload_is_imported_to_be_checked_by_its_first_gpu_run(tmp_path):
    """A GPU-sized problem is a problem (issue 49): written marked unchecked on the GPU, never
    refused for want of a GPU here, and never with advice to edit a file."""
    assert small_sizes(read_file(GPU_ONLY)) is None
    imported = import_file(GPU_ONLY, tmp_path)
    assert imported.status == "imported" and imported.folder is not None and imported.folder.is_dir()
    text = "\n".join(imported.messages)
    assert "its sizes are not top-level integer constants" in text
    assert "its first run on a GPU checks it" in text and f"gpuarena check {imported.folder} --device cuda" in text
    assert "problem.toml" not in text  # no advice to edit a file the user never wrote
    spec = load_problem(imported.folder).spec
    assert [(w.name, w.devices) for w in spec.workloads] == [("kernelbench", ["cuda"])]
    assert spec.unchecked == ["cuda"]


def _stale(out_dir: Path, pid: int) -> Path:
    """A work folder as a killed import leaves it: the problem's files, half written."""
    folder = out_dir.parent / f".{out_dir.name}.gpuarena-{pid}-abc123"
    folder.mkdir(parents=True)
    (folder / "problem.toml").write_text('name = "1_matmul"\n')
    return folder


def _dead_pid() -> int:
    return 4_194_304  # above any process id Linux hands out (pid_max is at most 2**22)


def test_what_a_killed_import_left_is_cleared_by_the_next(tmp_path):
    out_dir = tmp_path / "level2" / "7_conv2d_relu_biasadd"
    stale = _stale(out_dir, _dead_pid())
    legacy = out_dir.parent / f".{out_dir.name}.k3j_x9a0"  # an older gpuarena's mkdtemp folder
    legacy.mkdir()
    old = time.time() - 86400  # a day: past LEGACY_STALE_S
    os.utime(legacy, (old, old))
    running = _stale(out_dir, os.getppid())  # another import, still running: left alone
    outcome = import_file(SMALL, tmp_path)
    assert outcome.status == "imported", outcome.messages
    assert not stale.exists() and not legacy.exists() and running.exists()
    shutil.rmtree(running)
    assert [p.id for p in discover(tmp_path)] == ["level2/7_conv2d_relu_biasadd"]


def test_a_replaced_folder_is_never_left_half_deleted(tmp_path, monkeypatch):
    first = import_file(SMALL, tmp_path)
    assert first.status == "imported" and first.folder is not None
    real_rmtree = shutil.rmtree

    def killed_halfway(path, *args, **kwargs):  # deletes all files but one, then the import is stopped
        for file in sorted(Path(path).iterdir())[:-1]:
            file.unlink()
        raise KeyboardInterrupt

    monkeypatch.setattr(kernelbench.shutil, "rmtree", killed_halfway)
    with pytest.raises(KeyboardInterrupt):
        import_file(SMALL, tmp_path, force=True)
    monkeypatch.setattr(kernelbench.shutil, "rmtree", real_rmtree)
    assert check_problem(first.folder).ok  # the problem in place is whole
    monkeypatch.setattr(staging, "alive", lambda pid: False)  # as when the killed import's process is gone
    again = import_file(SMALL, tmp_path, force=True)
    assert again.status == "imported", again.messages
    assert sorted(p.name for p in first.folder.parent.iterdir()) == [first.folder.name]


@pytest.mark.e2e
def test_an_import_killed_during_its_check_does_not_block_the_next(tmp_path):
    out = tmp_path / "problems"
    kill = (
        "import os, signal, sys\n"
        "import gpuarena.harness.problem_check as check\n"
        "check.check_problem = lambda *a, **k: os.kill(os.getpid(), signal.SIGKILL)\n"
        "from gpuarena.interop.kernelbench import import_file\n"
        "import_file(sys.argv[1], sys.argv[2])\n"
    )
    killed = subprocess.run([sys.executable, "-c", kill, str(SMALL), str(out)], capture_output=True, timeout=300)
    assert killed.returncode == -9
    left = [p.name for p in (out / "level2").iterdir()]
    assert len(left) == 1 and left[0].startswith(".7_conv2d_relu_biasadd."), left  # its staging copy
    done = subprocess.run(
        [sys.executable, "-m", "gpuarena", "import", "kernelbench", str(SMALL), "-o", str(out)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    assert [p.name for p in (out / "level2").iterdir()] == ["7_conv2d_relu_biasadd"]
    assert check_problem(out / "level2" / "7_conv2d_relu_biasadd").ok


def test_a_model_whose_weights_are_large_and_data_small_is_checked_on_the_cpu(tmp_path):
    """Weights do not shrink with the batch: counted with the data, a whole model's (ResNet-18's
    11.7M at a batch of 2) kept level 3 off the CPU at any size. Under their own cap, its own
    sizes are checked on the CPU."""
    from gpuarena.interop.kernelbench_read import CPU_MAX_PARAMETERS

    source = tmp_path / "5_WideHead.py"
    source.write_text(
        "import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n"
        "    def __init__(self):\n        super().__init__()\n"
        "        self.head = nn.Linear(2048, 1024)\n\n"
        "    def forward(self, x):\n        return torch.tanh(self.head(x))\n\n\n"
        "batch_size = 4\n\n\ndef get_inputs():\n    return [torch.rand(batch_size, 2048)]\n\n\n"
        "def get_init_inputs():\n    return []\n"
    )
    assert 2048 * 1024 > CPU_MAX_ELEMENTS and 2048 * 1024 < CPU_MAX_PARAMETERS
    outcome = import_file(source, tmp_path / "out")
    assert outcome.status == "imported", outcome.messages
    assert [(w.name, w.devices) for w in load_problem(outcome.folder).spec.workloads] == [
        ("kernelbench", ["cpu", "cuda"])
    ]


def test_a_batch_under_16_halves_for_the_cpu_workload(tmp_path):
    """Sizes under 16 are kept (kernel sizes, strides), but a batch's halves down to 1: level 3's
    MobileNets take a batch of 10 at a fixed 224², and kept at 10 their input alone was over the
    CPU's cap, so they had no CPU workload."""
    source = tmp_path / "6_SmallBatch.py"
    source.write_text(
        "import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n"
        "    def __init__(self, classes):\n        super().__init__()\n"
        "        self.head = nn.Linear(3, classes)\n\n"
        "    def forward(self, x):\n        return self.head(x.mean(dim=(2, 3)))\n\n\n"
        "batch_size = 10\nclasses = 8\n\n\ndef get_inputs():\n    return [torch.rand(batch_size, 3, 224, 224)]\n\n\n"
        "def get_init_inputs():\n    return [classes]\n"
    )
    assert 10 * 3 * 224 * 224 > CPU_MAX_ELEMENTS
    small = small_sizes(read_file(source))
    assert small is not None and small["batch_size"] < 10 and small["classes"] == 8  # 8 < 16: kept
    outcome = import_file(source, tmp_path / "out")
    assert outcome.status == "imported", outcome.messages
    workloads = {w.name: w for w in load_problem(outcome.folder).spec.workloads}
    assert workloads["cpu-small"].axes["batch_size"] == small["batch_size"] and "cpu" in workloads["cpu-small"].devices


def test_a_model_that_cannot_run_on_meta_gets_a_cpu_workload_from_its_inputs(tmp_path):
    """Swin's forward calls .item(), which the meta device cannot run, so no shapes were known and
    a file whose inputs were over the cap had no CPU workload. Its inputs alone are halved on meta
    (the batch first: only a forward says which other sizes keep the model valid), then one CPU
    forward confirms the sizes."""
    source = tmp_path / "4_ItemInForward.py"
    source.write_text(
        "import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n"
        "    def __init__(self):\n        super().__init__()\n\n"
        "    def forward(self, x):\n        scale = float(x.abs().amax().item())\n"
        "        return x.mean(dim=(2, 3)) / (scale + 1.0)\n\n\n"
        "batch_size = 10\nimage_size = 224\n\n\n"
        "def get_inputs():\n    return [torch.rand(batch_size, 3, image_size, image_size)]\n\n\n"
        "def get_init_inputs():\n    return []\n"
    )
    outcome = import_file(source, tmp_path / "out")
    assert outcome.status == "imported", outcome.messages
    workloads = {w.name: w for w in load_problem(outcome.folder).spec.workloads}
    small = workloads["cpu-small"].axes
    assert small["image_size"] == 224 and small["batch_size"] < 10  # the batch halved, the image kept
    assert small["batch_size"] * 3 * 224 * 224 <= CPU_MAX_ELEMENTS


BROADCAST = '''import torch
import torch.nn as nn


class Model(nn.Module):
    """A margin loss: scores [batch, n] against signs [batch], which broadcast only while batch == n."""

    def __init__(self):
        super().__init__()

    def forward(self, scores, signs):
        return torch.mean(torch.clamp(1 - scores * signs, min=0))


batch_size = 4096
width = (4096,)


def get_inputs():
    return [torch.rand(batch_size, *width), torch.randint(0, 2, (batch_size,)).float() * 2 - 1]


def get_init_inputs():
    return []
'''


def test_sizes_that_must_stay_equal_are_halved_together(tmp_path):
    """KernelBench's 100_HingeLoss broadcasts [batch, n] * [batch]: halving one size at a time
    never gives a valid model, so it had no CPU workload; halving the equal ones together does."""
    source = tmp_path / "1_margin.py"
    source.write_text(BROADCAST)
    small = small_sizes(read_file(source))
    assert small is not None and small["batch_size"] == small["width_0"] < 4096
    imported = import_file(source, tmp_path / "out")
    assert imported.status == "imported", imported.messages
    assert "cpu-small" in imported.workloads and not load_problem(imported.folder).spec.unchecked


GROUPED = '''import torch
import torch.nn as nn


class Model(nn.Module):
    """A linear layer, a group norm and the minimum over the features, plus a bias per feature."""

    def __init__(self, in_features, out_features, num_groups, bias_shape):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.norm = nn.GroupNorm(num_groups, out_features)
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x):
        y = self.norm(self.linear(x))
        return torch.min(y, dim=1, keepdim=True)[0] + self.bias


batch_size = 512
in_features = 4096
out_features = 4096
num_groups = 512
bias_shape = (1, out_features, 1, 1)


def get_inputs():
    return [torch.rand(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features, num_groups, bias_shape]
'''


def test_sizes_that_lose_a_ratio_halved_one_at_a_time_are_halved_together(tmp_path):
    """KernelBench's level2/75: 8192 features in 512 groups, halved one size at a time to the
    CPU's cap, became 1024 features in 512 groups. Groups of two normalise to -1 and 1, so the
    minimum no longer depended on the input and the import was refused for a workload it had
    derived itself. Every size halved together keeps groups of 16: imported, and said so."""
    source = tmp_path / "75_grouped_min.py"
    source.write_text(GROUPED)
    one_at_a_time = small_sizes(read_file(source))
    assert one_at_a_time is not None and one_at_a_time["out_features"] // one_at_a_time["num_groups"] == 2
    imported = import_file(source, tmp_path / "out")
    assert imported.status == "imported", imported.messages
    small = {w.name: w for w in load_problem(imported.folder).spec.workloads}["cpu-small"].axes
    assert small["out_features"] // small["num_groups"] == 8 and small["batch_size"] < 512
    assert any("halved one at a time" in m and "does not depend on input x" in m for m in imported.messages)


DECAYING = '''import torch
import torch.nn as nn


class Model(nn.Module):
    """A recurrence whose state decays each step, from an initial state h0."""

    def __init__(self, decay):
        super().__init__()
        self.decay = decay

    def forward(self, x, h0):
        state = h0
        for step in range(x.shape[0]):
            state = self.decay * state + x[step]
        return state


steps = 64
width = 256


def get_inputs():
    return [torch.randn(steps, width), torch.randn(width)]


def get_init_inputs():
    return [0.8]
'''


def test_an_initial_state_that_fades_is_imported_and_the_import_says_so(tmp_path):
    """KernelBench's LSTMHn, LSTMCn and GRUHidden: after 512 steps a fresh h0 moves the output
    less than the tolerance. h0 is a small share of the inputs, so the problem is imported, and
    the import shows the check's note (problem_check.FADED_SHARE)."""
    source = tmp_path / "41_decaying_scan.py"
    source.write_text(DECAYING)
    imported = import_file(source, tmp_path / "out")
    assert imported.status == "imported", imported.messages
    assert any("does not depend on input h0" in n and "within the tolerance" in n for n in imported.notes), imported
