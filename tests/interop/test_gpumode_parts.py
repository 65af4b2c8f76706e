"""A GPU MODE task whose entries make data of different layouts (issue 49: `nvfp4_group_gemm`'s 2
to 8 groups an entry, `amd/moe`'s 17 or 29 tensors): imported as one problem a layout, each
checked, and a submission run unmodified against each.

Fixtures (fixtures/gpumode/README.md): more/groupscale_py, whose entries have 2, 3 or 4 groups of
(x, s) and one output a group, and submissions/groupscale_ok.py.
"""

from __future__ import annotations

import shutil

import pytest

import gpuarena.solution_readers  # noqa: F401  (registers every format's reader)
from gpuarena.interop.gpumode import import_folder, import_folders
from gpuarena.problems import load_problem
from gpuarena.solutions import load_solution

from .conftest import FIXTURES

GM = FIXTURES / "gpumode"
GROUPS = GM / "more" / "groupscale_py"


def test_entries_of_three_layouts_become_three_problems_each_with_its_entries(tmp_path):
    outcome = import_folder(GROUPS, tmp_path)
    assert outcome.status == "imported", outcome.messages
    assert [p.problem_id for p in outcome.parts] == [f"level1/groupscale_py_layout{k}" for k in (1, 2, 3)]
    by_part = [p.workloads for p in outcome.parts]
    # numbered as the layouts first appear; each keeps its entries' own names, tests and benchmarks
    assert by_part == [
        ["test0-groups2-rows16-cols8", "test2-groups2-rows32-cols8", "bench1-groups2-rows64-cols32"],
        ["test1-groups3-rows16-cols8"],
        ["bench0-groups4-rows64-cols32"],
    ]
    assert all("3 layouts" in p.messages[0] for p in outcome.parts)
    for part, groups in zip(outcome.parts, (2, 3, 4)):
        problem = load_problem(part.folder)
        assert problem.spec.outputs == [f"output{g}" for g in range(groups)]  # one output a group
    # the CLI's list: one line a problem written, none for the folder as a whole
    again = import_folders([GROUPS], tmp_path / "again")
    assert [o.problem_id for o in again] == [p.problem_id for p in outcome.parts]


def test_a_checker_that_cannot_read_the_reference_s_own_output_is_said_not_raised(tmp_path):
    """A check_implementation that raises on ref_kernel's own output (GPU MODE's make_match_reference
    on a list of outputs) is the task's error, said with what it raised: the import went on to a
    traceback before."""
    folder = tmp_path / "groupscale_py"
    shutil.copytree(GROUPS, folder)
    reference = folder / "reference.py"
    text = reference.read_text()
    text = text[: text.index("def check_implementation")] + (
        "from utils import make_match_reference\n\n"
        "check_implementation = make_match_reference(ref_kernel, rtol=1e-5, atol=1e-5)\n"
    )
    reference.write_text(text)
    outcome = import_folder(folder, tmp_path / "out")
    assert outcome.status == "error"
    said = " ".join(outcome.messages)
    assert "check_implementation rejects ref_kernel's own output" in said and "AttributeError" in said


def test_an_entry_whose_data_cannot_be_made_here_is_kept_with_the_first_layout(tmp_path):
    """On a machine without a GPU some entries make no data (a CUDA call in generate_input): their
    layout is unknown, so they go with the first one, as in a task of one layout; never dropped."""
    folder = tmp_path / "groupscale_py"
    shutil.copytree(GROUPS, folder)
    yml = folder / "task.yml"
    yml.write_text(yml.read_text() + '  - {"groups": 3, "rows": 128, "cols": 32, "seed": 46}\n')
    reference = folder / "reference.py"
    reference.write_text(
        reference.read_text().replace(
            '    gen = torch.Generator(device="cuda")\n',
            '    if rows == 128:\n        raise RuntimeError("Torch not compiled with CUDA enabled")\n'
            '    gen = torch.Generator(device="cuda")\n',
        )
    )
    outcome = import_folder(folder, tmp_path / "out")
    assert outcome.status == "imported", outcome.messages
    first = outcome.parts[0]
    assert "bench2-groups3-rows128-cols32" in first.workloads
    assert sum(len(p.workloads) for p in outcome.parts) == 6
    assert any("not probed" in m for m in first.messages)


@pytest.mark.harness
def test_a_submission_runs_unmodified_against_each_layout_s_problem(tmp_path):
    from gpuarena.harness.judge import RunOptions, evaluate

    outcome = import_folder(GROUPS, tmp_path)
    assert outcome.status == "imported", outcome.messages
    right = load_solution(GM / "submissions" / "groupscale_ok.py")
    wrong_file = tmp_path / "first_two_groups.py"
    wrong_file.write_text(
        "from task import input_t, output_t\n\n\n"
        "def custom_kernel(data: input_t) -> output_t:\n"
        "    return [x * s[:, None] for x, s in data[:2]]  # right for two groups only\n"
    )
    wrong = load_solution(wrong_file)
    for part in outcome.parts:
        record = evaluate(load_problem(part.folder), right, RunOptions(device="cpu", mode="test"))
        assert record.status == "PASSED", (part.problem_id, record.reason, record.log[-2000:])
    first, second = (load_problem(p.folder) for p in outcome.parts[:2])
    assert evaluate(first, wrong, RunOptions(device="cpu", mode="test")).status == "PASSED"
    assert evaluate(second, wrong, RunOptions(device="cpu", mode="test")).status != "PASSED"
