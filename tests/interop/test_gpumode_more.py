"""`gpuarena import gpumode` on task folders shaped as GPU MODE's real ones are (issue 49): a
reference.py with a @dataclass, a generate_input that uses the seed as data, two groups with a
task of the same name, list arguments in task.yml, and a submission using torch.compile.

The fixtures are GPU MODE-format folders written for these tests (fixtures/gpumode/README.md):
groups/pmpp/sort_py and groups/pmpp_v2/sort_py, more/dataclass_py, more/listargs_py, and
submissions/vectoradd_compiled.py.
"""

from __future__ import annotations

import inspect
import sys
from pathlib import Path

import pytest
import torch

import gpuarena.solution_readers  # noqa: F401  (registers every format's reader)
from gpuarena.interop.gpumode import (
    SEED_BOUND,
    Case,
    GpuModeError,
    import_folder,
    import_folders,
    load_namespace,
    problem_names,
    read_task,
)
from gpuarena.interop.gpumode_solution import META_INPUT, adapter_source
from gpuarena.interop.gpumode_write import seed_bound
from gpuarena.problems import load_problem
from gpuarena.solutions import load_solution

from .conftest import FIXTURES

GM = FIXTURES / "gpumode"
GROUPS = GM / "groups"
MORE = GM / "more"
SUBMISSIONS = GM / "submissions"


def draw(problem, workload, seed: int) -> dict:
    generator = torch.Generator().manual_seed(seed)
    return problem.make_inputs(dict(workload.axes), workload.torch_dtype, torch.device("cpu"), generator)


# -- a reference.py with a @dataclass -------------------------------------------------------------


def test_a_reference_with_a_dataclass_is_run_as_a_module_of_its_own(tmp_path):
    outcome = import_folder(MORE / "dataclass_py", tmp_path)
    assert outcome.status == "imported", outcome.messages
    problem = load_problem(outcome.folder)  # the glue runs reference.py again, as the supervisor does
    workload = problem.spec.workloads[0]
    inputs = draw(problem, workload, 5)
    (softmax,) = problem.reference(**inputs)
    assert softmax.shape == (16, 40) and torch.allclose(softmax.sum(dim=1), torch.ones(16))
    namespace = read_task(MORE / "dataclass_py").namespace
    shape = namespace["Shape"](2, 3)
    assert shape.numel() == 6 and sys.modules[type(shape).__module__].__dict__ is namespace


def test_load_namespace_registers_the_module_only_where_it_ran(tmp_path):
    sources = {
        "utils.py": "",
        "task.py": "",
        "reference.py": "from __future__ import annotations\nimport dataclasses\n\n"
        "@dataclasses.dataclass\nclass P:\n    n: int\n\nraise RuntimeError('late')\n",
    }
    with pytest.raises(RuntimeError, match="late"):
        load_namespace(sources, tmp_path, "gpumode_reference_failing_probe")
    assert "gpumode_reference_failing_probe" not in sys.modules  # not left behind half made
    assert "task" not in sys.modules and "utils" not in sys.modules


# -- seeds ------------------------------------------------------------------------------------------


def test_seeds_are_drawn_in_gpu_modes_own_range_so_data_made_from_them_varies(tmp_path):
    outcome = import_folder(GROUPS / "pmpp" / "sort_py", tmp_path)
    assert outcome.status == "imported", outcome.messages
    problem = load_problem(outcome.folder)
    workload = problem.spec.workloads[0]  # 1000 normals around the seed, in float32
    firsts = []
    for seed in range(6):
        x = draw(problem, workload, seed)["data"]
        assert x.unique().numel() > x.numel() // 2, "the seed as data wiped out the normals"
        assert x.mean() < SEED_BOUND + 10
        firsts.append(float(x[0]))
    assert len(set(firsts)) == len(firsts)  # fresh in every draw
    assert seed_bound([Case("test", 0, {}, 4242)]) == SEED_BOUND == 2**16
    assert seed_bound([Case("test", 0, {}, 42), Case("bench", 0, {}, 93246)]) == 2**17  # the task's own range
    assert seed_bound([Case("test", 0, {}, 2**31 - 1)]) == 2**31 - 2**20


# -- folders of the same name --------------------------------------------------------------------


def test_tasks_of_the_same_name_in_two_groups_get_names_of_their_own(tmp_path):
    outcomes = import_folders([GROUPS / "pmpp", GROUPS / "pmpp_v2"], tmp_path)
    assert [(o.status, o.problem_id) for o in outcomes] == [
        ("imported", "level1/pmpp_sort_py"),
        ("imported", "level1/pmpp_v2_sort_py"),
    ], [o.messages for o in outcomes]
    assert "named pmpp_sort_py, not sort_py" in outcomes[0].messages[0]
    assert str(GROUPS / "pmpp_v2" / "sort_py") in outcomes[0].messages[0]
    assert load_problem(tmp_path / "level1" / "pmpp_v2_sort_py").spec.workloads[0].name == "test0-size777"
    alone = import_folders([GROUPS / "pmpp_v2" / "sort_py", GROUPS / "pmpp_v2"], tmp_path / "alone")
    assert [o.problem_id for o in alone] == ["level1/sort_py"]  # one folder, named twice: imported once
    assert not any(m.startswith("named ") for m in alone[0].messages)


def test_problem_names_go_up_as_far_as_they_must():
    names = problem_names([Path("/x/a/pmpp/t"), Path("/x/b/pmpp/t"), Path("/x/a/other"), Path("/y/A B")])
    assert list(names.values()) == ["a_pmpp_t", "b_pmpp_t", "other", "a_b"]
    assert list(problem_names([Path("/c/a b"), Path("/c/a_b")]).values()) == ["c_a_b", "c_a_b_2"]


# -- list arguments --------------------------------------------------------------------------------


def test_list_arguments_reach_generate_input_as_lists(tmp_path):
    outcome = import_folder(MORE / "listargs_py", tmp_path)
    assert outcome.status == "imported", outcome.messages
    assert outcome.workloads == [
        "test0-shape16x24-bounds-0.5x2.0",
        "test1-shape8x4x10-bounds-1.0x1.0",
        "bench0-shape256x512-bounds-0.25x3.0",
    ]
    problem = load_problem(outcome.folder)
    assert problem.spec.workloads[1].axes == {"case": 1}  # lists are no axes: the glue's table keeps them
    inputs = draw(problem, problem.spec.workloads[1], 3)  # generate_input refuses anything but lists
    assert inputs["x"].shape == (8, 4, 10)
    assert ("list", (("s", -1.0), ("s", 1.0))) in inputs[META_INPUT][1][1]
    (out,) = problem.reference(**inputs)
    assert out.abs().max() <= 2.0 and torch.equal(out, inputs["x"].clamp(-1, 1) * 2)
    assert read_task(MORE / "listargs_py").cases[0].args == {"shape": [16, 24], "bounds": [-0.5, 2.0]}


def test_arguments_other_than_numbers_strings_and_lists_are_still_named(tmp_path):
    folder = tmp_path / "mapped_py"
    folder.mkdir()
    for name in ("reference.py", "task.py"):
        (folder / name).write_text((MORE / "listargs_py" / name).read_text())
    (folder / "task.yml").write_text('tests:\n  - {"shape": {"rows": 2}, "seed": 1}\n')
    with pytest.raises(GpuModeError, match="'shape' = .* is not a name with a number, a string or a list"):
        read_task(folder)


# -- the stand-in task module of a submission -----------------------------------------------------


def test_the_stand_in_task_module_defines_gpu_modes_type_names_and_nothing_else(tmp_path):
    (tmp_path / "submission.py").write_text((SUBMISSIONS / "vectoradd_compiled.py").read_text())
    saved = sys.modules.pop("task", None)
    namespace = {"__name__": "gpumode_adapter_probe", "__file__": str(tmp_path / "gpumode_adapter.py")}
    try:
        exec(compile(adapter_source("submission.py"), namespace["__file__"], "exec"), namespace)
        task = sys.modules["task"]
        assert {"input_t", "output_t", "TestSpec"} <= set(vars(task))
        assert not hasattr(task, "__file__") and not hasattr(task, "anything_else")
        inspect.getmodule(test_the_stand_in_task_module_defines_gpu_modes_type_names_and_nothing_else)
        a, b = torch.randn(4, 4), torch.randn(4, 4)
        c = namespace["custom_kernel"]((a, b, torch.empty(4, 4)))  # torch.compile: dynamo reads every module
        assert torch.equal(c, a + b)
    finally:
        sys.modules.pop("task", None)
        sys.modules.pop("gpumode_submission_gpumode_adapter_probe", None)
        if saved is not None:
            sys.modules["task"] = saved
        from torch import _dynamo

        _dynamo.reset()


@pytest.mark.harness
@pytest.mark.parametrize(
    "submission",
    [
        "vectoradd_compiled.py",  # torch.compile, which the stand-in task module must not break
        # nn.Parameters built in every call, as GPU MODE's trimul submission does: under autograd each
        # kept output held its graph and every activation (102 GiB of an H200, REJECTED for the memory);
        # the adapter calls custom_kernel without autograd, as the glue calls ref_kernel
        "vectoradd_parameters.py",
    ],
)
def test_a_submission_passes_through_the_adapter(tmp_path, submission):
    from gpuarena.harness.judge import RunOptions, evaluate

    outcome = import_folder(GM / "vectoradd_py", tmp_path)
    assert outcome.status == "imported", outcome.messages
    record = evaluate(
        load_problem(outcome.folder),
        load_solution(SUBMISSIONS / submission),
        RunOptions(device="cpu", mode="test"),
    )
    assert record.status == "PASSED", (record.reason, record.log[-3000:])


FLOAT64_REFERENCE = """import torch
from task import input_t, output_t
from utils import make_match_reference


def ref_kernel(data: input_t) -> output_t:
    a, b, c = data
    return (a.double() + b.double()).cumsum(dim=1)  # in float64, as GPU MODE's prefixsum_py


def generate_input(size: int, seed: int) -> input_t:
    gen = torch.Generator().manual_seed(seed)
    a = torch.randn(size, size, generator=gen) * 3 + 1
    b = torch.randn(size, size, generator=gen) * 2 - 1
    return a, b, torch.empty(size, size)


check_implementation = make_match_reference(ref_kernel, rtol=1e-3, atol=1e-3)
"""

FLOAT32_SUBMISSION = (
    "import torch\n\n\ndef custom_kernel(data):\n    a, b, c = data\n"
    "    return torch.cumsum(a + b, dim=1)  # float32: GPU MODE compares values, whatever the dtype\n"
)


@pytest.mark.e2e
@pytest.mark.parametrize("as_stated", [True, False])
def test_an_output_of_another_float_dtype_is_judged_by_value_where_the_task_s_check_does(tmp_path, as_stated):
    """GPU MODE's verbose_allclose compares values whatever the dtypes: its prefixsum_py reference
    returns float64 and its own submissions float32, which gpuarena called WRONG_DTYPE on an H200
    (issue 49). With the task's check kept as stated the output is converted and judged by value;
    with a tolerance given to the importer instead, the dtype is gpuarena's to insist on."""
    import json
    import shutil
    import subprocess

    task = tmp_path / "cumsum_py"
    shutil.copytree(GM / "vectoradd_py", task)
    (task / "reference.py").write_text(FLOAT64_REFERENCE)
    options = {} if as_stated else {"atol": 1e-3, "rtol": 1e-3}
    outcome = import_folder(task, tmp_path / "out", **options)
    assert outcome.status == "imported" and outcome.folder is not None, outcome.messages
    assert (load_problem(outcome.folder).spec.tolerance_as_stated == "GPU MODE") is as_stated
    submission = tmp_path / "submission.py"
    submission.write_text(FLOAT32_SUBMISSION)
    run = subprocess.run(
        [sys.executable, "-m", "gpuarena", "run", str(outcome.folder), str(submission)]
        + ["--device", "cpu", "--mode", "test", "--json"],
        capture_output=True,
        text=True,
    )
    record = json.loads(run.stdout)
    assert record["status"] == ("PASSED" if as_stated else "WRONG_DTYPE"), (record.get("reason"), run.stderr[-2000:])
