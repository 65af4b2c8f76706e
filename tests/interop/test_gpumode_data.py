"""GPU MODE data that the importer used to refuse (issue 49): a generate_input drawing from the
global generators (bioml/trimul's weights), an input that is one value by design (trimul's mask
of ones), a @dataclass in data beside the tensors (amd/mla-decode's Config), and tasks that need
several GPUs (amd_distributed), refused up front.

The fixtures are GPU MODE-format folders written for these tests (fixtures/gpumode/README.md):
more/gated_py, more/configdata_py, invalid/distributed_py, submissions/gated_ok.py and
submissions/configdata_ok.py.
"""

from __future__ import annotations

import random
import shutil
from types import SimpleNamespace
from typing import NamedTuple

import numpy
import pytest
import torch

import gpuarena.solution_readers  # noqa: F401  (registers every format's reader)
from gpuarena.interop.gpumode import import_folder
from gpuarena.interop.gpumode_device import ON_DEVICE, SEEDED
from gpuarena.interop.gpumode_solution import META_INPUT, RUNTIME
from gpuarena.interop.gpumode_task import Case, multi_gpu
from gpuarena.problems import load_problem

from .conftest import FIXTURES

GM = FIXTURES / "gpumode"
GATED = GM / "more" / "gated_py"
CONFIG = GM / "more" / "configdata_py"
DISTRIBUTED = GM / "invalid" / "distributed_py"
SUBMISSIONS = GM / "submissions"


def _runtime() -> dict:
    namespace: dict = {}
    exec(compile(RUNTIME + ON_DEVICE + SEEDED, "gpumode_runtime", "exec"), namespace)
    return namespace


def _draw(problem, name: str, seed: int) -> dict:
    workload = next(w for w in problem.spec.workloads if w.name.startswith(name))
    generator = torch.Generator().manual_seed(seed)
    return problem.make_inputs(dict(workload.axes), workload.torch_dtype, torch.device("cpu"), generator)


@pytest.fixture(scope="module")
def gated(tmp_path_factory):
    outcome = import_folder(GATED, tmp_path_factory.mktemp("gated"))
    assert outcome.status == "imported", outcome.messages
    return load_problem(outcome.folder)


# -- the global generators, seeded as GPU MODE's eval.py seeds them --------------------------------


def test_draws_from_the_global_generator_are_reproducible_from_the_harness_seed(gated):
    # the import's own check asks make_inputs() for the same inputs twice from one seed
    first, again, other = _draw(gated, "test1", 4), _draw(gated, "test1", 4), _draw(gated, "test1", 5)
    for name in ("params_w", "params_gate", "params_offset"):  # the global generator's draws
        assert torch.equal(first[name], again[name]), name
        assert not torch.equal(first[name], other[name]), name  # a fresh, secret draw per seed
    assert torch.equal(first["x"], again["x"])


def test_seeding_the_global_generators_puts_their_state_back():
    rt = _runtime()
    torch_state, python_state = torch.get_rng_state(), random.getstate()
    with rt["seeded_globals"](7, "cpu"):
        a = torch.randn(4)
        r, n = random.random(), numpy.random.rand()
    with rt["seeded_globals"](7, "cpu"):
        assert torch.equal(torch.randn(4), a) and random.random() == r  # as set_seed(7) would
        assert numpy.random.rand() == n  # NumPy's seeded too (its state is not put back: the harness draws none)
    assert torch.equal(torch.get_rng_state(), torch_state) and random.getstate() == python_state


# -- an input that is one value by design ----------------------------------------------------------


def test_a_mask_of_ones_travels_as_a_constant_and_is_made_on_every_call(gated):
    full = _draw(gated, "test0", 3)
    # not a tensor a check calls degenerate; with the device its draw was made for
    assert full["mask"] == ("constant", (24,), "float32", 1.0, "cpu")
    drawn = _draw(gated, "test1", 3)
    assert isinstance(drawn["mask"], torch.Tensor) and set(drawn["mask"].unique().tolist()) <= {0.0, 1.0}
    (out,) = gated.reference(**full)
    params = {k: full[f"params_{k}"] for k in ("w", "gate", "offset")}
    assert torch.allclose(out, torch.sigmoid(params["gate"]) * (full["x"] @ params["w"]) + params["offset"])


def test_constant_of_says_one_value_only_for_more_than_one_element():
    rt = _runtime()
    assert rt["constant_of"](torch.full((2, 3), 2.5, dtype=torch.float16)) == ("constant", (2, 3), "float16", 2.5)
    assert rt["constant_of"](torch.tensor([1, 2])) is None
    assert rt["constant_of"](torch.ones(1)) is None  # one element: nothing to call constant
    made = rt["rebuild"](("t", 0), [("constant", (2, 2), "bool", True)], torch.device("cpu"))
    assert made.dtype == torch.bool and bool(made.all())


def test_data_of_constants_alone_is_rebuilt_on_the_device_its_draw_was_made_for():
    """linalg/eigh_py's lapack_zero case: its one input, a zero matrix, travels as a constant. With
    no tensor among the inputs the device was taken to be the CPU: on an H200 the task's own
    submissions computed there and were REJECTED ("output output0 is on cpu, expected cuda:0")."""
    rt = _runtime()
    zero = ("constant", (2, 3, 3), "float32", 0.0, "meta")  # meta stands for the GPU here
    assert rt["device_of"]([zero]) == torch.device("meta")
    assert rt["device_of"]([("constant", (2,), "float32", 0.0)]) == torch.device("cpu")  # imported before
    assert rt["device_of"]([zero, torch.zeros(1)]) == torch.device("cpu")  # a tensor says it first
    made = rt["rebuild"](("t", 0), [zero], rt["device_of"]([zero]))
    assert made.device.type == "meta" and made.shape == (2, 3, 3)


@pytest.mark.harness
def test_a_submission_to_the_gated_task_passes_on_the_cpu(gated):
    from gpuarena.harness.judge import RunOptions, evaluate
    from gpuarena.solutions import load_solution

    record = evaluate(gated, load_solution(SUBMISSIONS / "gated_ok.py"), RunOptions(device="cpu", mode="test"))
    assert record.status == "PASSED", (record.reason, record.log[-3000:])


# -- a dataclass in data --------------------------------------------------------------------------


def test_a_dataclass_in_data_reaches_the_reference_as_the_tasks_own_class(tmp_path):
    outcome = import_folder(CONFIG, tmp_path)
    assert outcome.status == "imported", outcome.messages
    problem = load_problem(outcome.folder)
    inputs = _draw(problem, "test0", 2)
    assert list(inputs) == ["config_weight", "x", "gpumode_data"]  # numbers and the tuple: in the layout
    (out,) = problem.reference(**inputs)  # ref_kernel asserts isinstance(config, Config)
    assert torch.allclose(out, (inputs["x"] @ inputs["config_weight"]) * 0.25)


def test_without_the_tasks_files_a_dataclass_of_the_same_fields_stands_in():
    task_side, solution_side = _runtime(), _runtime()  # the adapter has no OWN_CLASSES

    class Point(NamedTuple):
        x: int
        y: float

    config = SimpleNamespace(name="cfg", sizes=[2, 3], point=Point(1, 0.5), weight=torch.ones(2, 2))
    tensors, layout = task_side["flatten"]((config, torch.zeros(3)))
    assert len(tensors) == 2
    again = solution_side["rebuild"](layout, tensors, torch.device("cpu"))
    assert again[0].name == "cfg" and again[0].sizes == [2, 3] and again[0].weight is tensors[0]
    assert again[0].point.x == 1 and again[0].point._fields == ("x", "y")


def _edited(tmp_path, old: str, new: str):
    task = tmp_path / "configdata_py"
    shutil.copytree(CONFIG, task)
    reference = task / "reference.py"
    assert old in reference.read_text()
    reference.write_text(reference.read_text().replace(old, new))
    return import_folder(task, tmp_path / "out")


def test_a_dataclass_with_methods_of_its_own_is_refused_naming_them(tmp_path):
    outcome = _edited(
        tmp_path, "    weight: torch.Tensor\n", "    weight: torch.Tensor\n\n    def area(self):\n        return 0\n"
    )
    assert outcome.status == "error"
    assert "data holds a Config, a dataclass with methods of its own (area)" in outcome.messages[0]


def test_a_module_in_data_is_refused_saying_why(tmp_path):
    outcome = _edited(tmp_path, "    return config, x\n", "    return torch.nn.Linear(2, 2), x\n")
    assert outcome.status == "error"
    message = outcome.messages[0]
    assert "data holds a Linear (a torch.nn.Module" in message and "generate_input(**test0" in message


@pytest.mark.harness
def test_a_submission_reading_the_config_passes_on_the_cpu(tmp_path):
    from gpuarena.harness.judge import RunOptions, evaluate
    from gpuarena.solutions import load_solution

    outcome = import_folder(CONFIG, tmp_path)
    record = evaluate(
        load_problem(outcome.folder),
        load_solution(SUBMISSIONS / "configdata_ok.py"),
        RunOptions(device="cpu", mode="test"),
    )
    assert record.status == "PASSED", (record.reason, record.log[-3000:])


# -- tasks that need several GPUs ------------------------------------------------------------------


def test_a_task_that_needs_several_gpus_is_refused_before_it_runs(tmp_path):
    outcome = import_folder(DISTRIBUTED, tmp_path)
    assert outcome.status == "error"
    message = outcome.messages[0]
    assert message.startswith(f"{DISTRIBUTED}: needs 4 GPUs / torch.distributed")
    assert "multi_gpu: true" in message and "rank" in message and "reference.py uses torch.distributed" in message
    assert "gpuarena ran a task" not in message  # refused before reference.py ran
    assert not any(tmp_path.rglob("*.toml"))


def test_each_sign_of_a_multi_gpu_task_is_enough_alone():
    cases = [Case("test", 0, {"size": 8}, 1)]
    plain = "import torch\ndef generate_input(size, seed):\n    return torch.ones(size)\n"
    assert multi_gpu({}, plain, cases) is None
    by_rank = plain.replace("(size, seed)", "(rank, size, seed)")
    assert "needs several GPUs" in (multi_gpu({}, by_rank, cases) or "")
    assert multi_gpu({}, by_rank, [Case("test", 0, {"size": 8, "rank": 0}, 1)]) is None  # task.yml gives it
    for source in (plain + "from torch import distributed\n", plain + "x = torch.distributed.get_rank\n"):
        assert "reference.py uses torch.distributed" in (multi_gpu({}, source, cases) or "")
    assert "multi_gpu: true" in (multi_gpu({"multi_gpu": True}, plain, cases) or "")


@pytest.mark.gpu
@pytest.mark.parametrize(("task", "submission"), [(GATED, "gated_ok.py"), (CONFIG, "configdata_ok.py")])
def test_on_the_gpu_the_globals_are_seeded_on_cuda_and_the_config_carried(tmp_path, task, submission):
    """The import checked on CUDA (the probe's seeding of CUDA's generator, data made there), then
    the submission judged there in benchmark mode."""
    from gpuarena.harness.judge import RunOptions, evaluate
    from gpuarena.solutions import load_solution

    outcome = import_folder(task, tmp_path, check_device="cuda")
    assert outcome.status == "imported", outcome.messages
    record = evaluate(
        load_problem(outcome.folder),
        load_solution(SUBMISSIONS / submission),
        RunOptions(device="cuda", mode="benchmark", budget_s=0.3),
    )
    assert record.status == "PASSED", (record.reason, record.log[-3000:])


# -- a tensor ref_kernel ignores that a submission reads ------------------------------------------

TWO_LAYOUTS = GM / "more" / "twolayouts_py"


@pytest.mark.harness
def test_a_tensor_the_reference_ignores_stays_an_input_with_its_data(tmp_path):
    """The blocked copy of the scales: ref_kernel neither reads nor writes it, a submission reads
    it (as nvfp4's rearranged scale factors), so it is an input, not an emptied buffer."""
    from gpuarena.harness.judge import RunOptions, evaluate
    from gpuarena.solutions import load_solution

    outcome = import_folder(TWO_LAYOUTS, tmp_path)
    assert outcome.status == "imported" and outcome.folder is not None, outcome.messages
    problem = load_problem(outcome.folder)
    assert problem.input_names == ["x", "s", "s_blocked", META_INPUT]  # out, written, is a buffer
    assert "_BUFFERS = {3: 'empty'}" in (outcome.folder / "reference.py").read_text()
    workload = problem.spec.workloads[0]
    inputs = problem.make_inputs(dict(workload.axes), workload.torch_dtype, torch.device("cpu"), torch.Generator())
    assert torch.equal(inputs["s_blocked"], inputs["s"].reshape(-1, 4).t())
    record = evaluate(
        problem, load_solution(SUBMISSIONS / "twolayouts_blocked.py"), RunOptions(device="cpu", mode="test")
    )
    assert record.status == "PASSED", (record.reason, record.log[-3000:])
    # the glue names it unread (interop/gpumode_reads.py), so gpuarena check does not call the
    # problem degenerate for it (tests/interop/test_gpumode_reads.py)
    assert not any(m.startswith("workload ") for m in outcome.messages)
    assert problem.module.unread_inputs(dict(workload.axes)) == ["s_blocked"]


def test_a_declared_output_the_reference_replaces_is_still_a_buffer(tmp_path):
    """pmpp_v2's `data, output = data; output = ...`: the data's output tensor, ignored by a
    ref_kernel that returns its own, is a buffer (as many elements as the output); the blocked
    scales, which match no output, stay an input."""
    task = tmp_path / "replaces_py"
    shutil.copytree(TWO_LAYOUTS, task)
    reference = task / "reference.py"
    reference.write_text(reference.read_text().replace("    out.copy_(x * s[:, None])\n", "    out = x * s[:, None]\n"))
    outcome = import_folder(task, tmp_path / "out", keep_failing=True)
    assert outcome.folder is not None, outcome.messages
    assert load_problem(outcome.folder).input_names == ["x", "s", "s_blocked", META_INPUT]
    assert "_BUFFERS = {3: 'empty'}" in (outcome.folder / "reference.py").read_text()
