"""`gpuarena import gpumode` and GPU MODE submissions (custom_kernel) run unmodified.

The fixtures under fixtures/gpumode/ are GPU MODE-format folders written for these tests (see
their README.md): a vector add with an output buffer and a tolerance, a tuple output holding a
Python float, an integer histogram checked exactly, a checker with its own logic, two invalid
folders, and custom_kernel submissions right and wrong.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import gpuarena.solution_readers  # registers every format's reader
from gpuarena.harness.problem_check import check_problem
from gpuarena.interop.gpumode import (
    GPUMODE_DEFAULT,
    GpuModeError,
    checking_rule,
    import_folder,
    import_folders,
    read_task_yml,
)
from gpuarena.interop.gpumode_solution import ADAPTER_FILE, META_INPUT
from gpuarena.problems import load_problem
from gpuarena.solutions import load_solution
from gpuarena.solutions.loader import solution_from_upload

from .conftest import FIXTURES, ROOT

GM = FIXTURES / "gpumode"
SUBMISSIONS = GM / "submissions"


@pytest.fixture(scope="module")
def imported(tmp_path_factory):
    root = tmp_path_factory.mktemp("gpumode")
    outcomes = import_folders([GM], root)
    return root, {o.source.name: o for o in outcomes}


def gpuarena(*args: object) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "gpuarena", *map(str, args)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "COLUMNS": "200"},
    )


def test_import_writes_checked_problems_and_carries_over_a_checker_of_its_own(imported):
    root, outcomes = imported
    assert {name: o.status for name, o in outcomes.items()} == {
        "vectoradd_py": "imported",
        "rowstats_py": "imported",
        "histogram_py": "imported",
        "sortcheck_py": "imported",
        "argsort_py": "imported",
    }, "\n".join(
        f"{name} {o.status}: {' | '.join(o.messages)}" for name, o in outcomes.items() if o.status != "imported"
    )
    for name in ("vectoradd_py", "rowstats_py", "histogram_py", "sortcheck_py", "argsort_py"):
        folder = outcomes[name].folder
        assert folder == root / "level1" / name
        assert check_problem(folder).ok
        assert sorted(p.name for p in (folder / "gpumode").iterdir()) == [
            "reference.py",
            "task.py",
            "task.yml",
            "utils.py",
        ]
        assert (folder / "gpumode" / "reference.py").read_text() == (GM / name / "reference.py").read_text()
    for name in ("sortcheck_py", "argsort_py"):  # their check_implementation is their own logic
        problem = load_problem(outcomes[name].folder)
        assert problem.spec.checker == "check" and problem.checker is not None
        assert "the task's own check_implementation" in (outcomes[name].folder / "README.md").read_text()
    assert load_problem(outcomes["vectoradd_py"].folder).spec.checker is None  # a tolerance, read from its source


@pytest.mark.e2e
def test_a_carried_over_checker_judges_answers_the_reference_does_not_give(imported):
    _, outcomes = imported
    folder = outcomes["argsort_py"].folder
    cases = [("argsort_ties_reversed", "PASSED", ""), ("argsort_mostly_unsorted", "WRONG_VALUES", "keys out of order")]
    for submission, status, words in cases:
        run = gpuarena("run", folder, SUBMISSIONS / f"{submission}.py", "--device", "cpu", "--mode", "test", "--json")
        record = json.loads(run.stdout)
        assert record["status"] == status, (submission, record.get("reason"), run.stderr[-2000:])
        assert words in record["reason"]


def test_workloads_tolerance_and_time_limits_come_from_task_yml(imported):
    _, outcomes = imported
    problem = load_problem(outcomes["vectoradd_py"].folder)
    spec = problem.spec
    assert [w.name for w in spec.workloads] == ["test0-size64", "test1-size200", "bench0-size512", "bench1-size2048"]
    assert [w.axes for w in spec.workloads][0] == {"case": 0, "size": 64}
    assert [w.devices for w in spec.workloads][-1] == ["cuda"]  # 12M elements: GPU only
    assert [w.timed for w in spec.workloads] == [False, False, True, True]  # GPU MODE times its benchmarks only
    tol = spec.tolerance_for("float32")
    assert (tol.atol, tol.rtol) == (1e-3, 1e-3)
    assert spec.tolerance_as_stated == "GPU MODE"  # kept as the task states it: check reports, never refuses
    assert (spec.time_limits.test, spec.time_limits.benchmark, spec.time_limits.ranked) == (120, 180, 300)
    # C, which ref_kernel writes into, is a buffer made on every call, not an input
    assert problem.input_names == ["a", "b", META_INPUT]
    histogram = load_problem(outcomes["histogram_py"].folder)
    assert histogram.input_names == ["values", META_INPUT]  # `output`, never read, is a buffer
    assert histogram.spec.tolerance_for("uint8").atol == 0.0


def test_the_seed_comes_from_the_harness_and_data_is_rebuilt(imported):
    _, outcomes = imported
    problem = load_problem(outcomes["rowstats_py"].folder)
    workload = problem.spec.workloads[1]

    def draw(seed):
        generator = torch.Generator().manual_seed(seed)
        return problem.make_inputs(dict(workload.axes), workload.torch_dtype, torch.device("cpu"), generator)

    one, again, other = draw(1), draw(1), draw(2)
    assert torch.equal(one["x"], again["x"]) and not torch.equal(one["x"], other["x"])
    assert one[META_INPUT] == other[META_INPUT]  # the same in every draw: the supervisor insists
    assert ("s", 2.0) in one[META_INPUT][1][1]  # the float argument travels inside the layout
    y, rowmax, total = problem.reference(**one)
    assert y.shape == (48, 48) and rowmax.shape == (48,) and total.dim() == 0 and total.dtype == torch.float64
    assert problem.spec.outputs == ["output0", "output1", "output2"]


@pytest.mark.e2e
def test_import_and_run_submissions_from_the_command_line(tmp_path):
    out = tmp_path / "problems"
    done = gpuarena("import", "gpumode", GM / "vectoradd_py", GM / "rowstats_py", GM / "histogram_py", "-o", out)
    assert done.returncode == 0, done.stderr
    assert "3 of 3 folder(s) imported" in done.stderr
    cases = [
        ("vectoradd_py", "vectoradd_ok", "PASSED"),
        ("vectoradd_py", "vectoradd_wrong", "WRONG_VALUES"),
        ("rowstats_py", "rowstats_ok", "PASSED"),
        ("rowstats_py", "rowstats_wrong_scalar", "WRONG_VALUES"),
        ("histogram_py", "histogram_ok", "PASSED"),
        ("histogram_py", "histogram_off_by_one", "WRONG_VALUES"),
    ]
    for problem, submission, status in cases:
        run = gpuarena(
            "run",
            out / "level1" / problem,
            SUBMISSIONS / f"{submission}.py",
            "--device",
            "cpu",
            "--mode",
            "test",
            "--json",
        )
        record = json.loads(run.stdout)
        assert record["status"] == status, (submission, record.get("reason"), run.stderr[-2000:])
        assert run.returncode == (0 if status == "PASSED" else 1)
    assert (
        "integer output, compared exactly"
        in json.loads(
            gpuarena(
                "run",
                out / "level1" / "histogram_py",
                SUBMISSIONS / "histogram_off_by_one.py",
                "--device",
                "cpu",
                "--mode",
                "test",
                "--json",
            ).stdout
        )["reason"]
    )


@pytest.mark.e2e
def test_bad_folders_give_errors_that_name_the_file(tmp_path):
    missing = import_folder(GM / "invalid" / "no_task_yml", tmp_path)
    assert missing.status == "error"
    assert missing.messages[0].startswith(str(GM / "invalid" / "no_task_yml" / "task.yml") + ": not found")
    no_generate = import_folder(GM / "invalid" / "no_generate_input", tmp_path)
    assert no_generate.status == "error"
    assert str(GM / "invalid" / "no_generate_input" / "reference.py") in no_generate.messages[0]
    assert "defines no generate_input" in no_generate.messages[0]
    assert not any(tmp_path.rglob("*.toml"))  # nothing written
    done = gpuarena("import", "gpumode", GM / "invalid" / "no_task_yml", GM / "vectoradd_py", "-o", tmp_path / "out")
    assert done.returncode == 1 and "1 of 2 folder(s) imported" in done.stderr
    assert "no_task_yml/task.yml: not found" in done.stderr


def test_an_unreadable_checker_imports_when_told_how_to_judge(tmp_path):
    outcome = import_folder(GM / "sortcheck_py", tmp_path, exact=True)
    assert outcome.status == "imported", outcome.messages
    spec = load_problem(outcome.folder).spec
    assert spec.tolerance_for("float32").atol == 0.0
    assert spec.tolerance_as_stated is None  # the importer's rule, not the task's
    assert "in place of the task's check_implementation" in (outcome.folder / "README.md").read_text()


def test_a_buffer_the_same_in_every_draw_is_still_found_unread(tmp_path):
    """Two draws of a torch.empty buffer can get the same memory (zeros in a fresh process,
    one block reused in a busy one): the probe must still find it unread, or it becomes an input
    that is not reproducible from the generator."""
    task = tmp_path / "zeroed_py"
    shutil.copytree(GM / "histogram_py", task)
    source = (task / "reference.py").read_text()
    (task / "reference.py").write_text(
        source.replace("output = torch.empty(256, dtype=torch.int64)", "output = torch.zeros(256, dtype=torch.int64)")
    )
    assert "torch.zeros(256" in (task / "reference.py").read_text()
    outcome = import_folder(task, tmp_path / "out")
    assert outcome.status == "imported", outcome.messages
    assert load_problem(outcome.folder).input_names == ["values", META_INPUT]


def test_existing_folders_are_kept_unless_forced(tmp_path):
    assert import_folder(GM / "histogram_py", tmp_path).status == "imported"
    again = import_folder(GM / "histogram_py", tmp_path)
    assert again.status == "error" and "--force" in again.messages[0]
    assert import_folder(GM / "histogram_py", tmp_path, force=True).status == "imported"


def test_checking_rules_read_from_the_source():
    where = Path("reference.py")
    assert (
        checking_rule("check_implementation = make_match_reference(ref_kernel)", where).rtol,
        checking_rule("check_implementation = make_match_reference(ref_kernel)", where).atol,
    ) == GPUMODE_DEFAULT
    rule = checking_rule("check_implementation = make_match_reference(ref_kernel, rtol=2e-2, atol=1e-3)", where)
    assert (rule.atol, rule.rtol, rule.exact) == (1e-3, 2e-2, False)
    exact = checking_rule(
        "def check_implementation(data, output):\n    return verbose_allequal(output, ref_kernel(data))\n", where
    )
    assert exact.exact
    several = checking_rule(
        "def check_implementation(data, output):\n    e = ref_kernel(data)\n"
        "    return verbose_allclose(output[0], e[0], rtol=1e-2) + verbose_allclose(output[1], e[1])\n",
        where,
    )
    assert several.checker and "different tolerances" in several.how  # run as the problem's checker


def test_a_custom_kernel_file_becomes_a_solution_with_an_adapter():
    solution = load_solution(SUBMISSIONS / "vectoradd_ok.py")
    assert solution.manifest.entry_point == f"{ADAPTER_FILE}:solve"
    assert set(solution.sources) == {"vectoradd_ok.py", ADAPTER_FILE}
    uploaded = solution_from_upload("submission.py", (SUBMISSIONS / "vectoradd_ok.py").read_bytes())
    assert uploaded.manifest.entry_point == f"{ADAPTER_FILE}:solve"
    plain = solution_from_upload("s.py", b"def solve(x):\n    return x\n\ndef custom_kernel(data):\n    return data\n")
    assert plain.manifest.entry_point == "s.py:solve"  # solve() wins


def test_task_yml_lists_and_a_broken_one_named():
    for name in ("vectoradd_py", "rowstats_py", "histogram_py"):
        document = read_task_yml(GM / name / "task.yml")
        assert document["tests"] and all("seed" in t for t in document["tests"] + document["benchmarks"])
    assert read_task_yml(GM / "histogram_py" / "task.yml")["tests"][1] == {"size": 10000, "contention": 50, "seed": 12}


def test_a_task_yml_that_is_not_yaml_is_named(tmp_path):
    bad = tmp_path / "task.yml"
    bad.write_text("tests: [ {size: 1\n")
    with pytest.raises(GpuModeError, match="not valid YAML"):
        read_task_yml(bad)


@pytest.mark.gpu
def test_an_inline_cuda_submission_runs_unmodified(tmp_path):
    """A custom_kernel compiling CUDA with load_inline at import, on the GPU's workloads."""
    from gpuarena.harness.judge import RunOptions, evaluate
    from gpuarena.interop.gpumode import import_folder

    outcome = import_folder(GM / "vectoradd_py", tmp_path, check_device="cuda")
    assert outcome.status == "imported", outcome.messages
    record = evaluate(
        load_problem(outcome.folder),
        load_solution(SUBMISSIONS / "vectoradd_cuda.py"),
        RunOptions(device="cuda", mode="benchmark", budget_s=0.5),
    )
    assert record.status == "PASSED", (record.reason, record.log[-3000:])
    problem = load_problem(outcome.folder)
    timed = {w.name for w in problem.spec.workloads if w.timed}  # GPU MODE's tests are checked, never timed
    assert timed and all(bool(w.speedup) == (w.name in timed) for w in record.workloads)
