"""Tensors of a GPU MODE task's data that ref_kernel never reads, kept for submissions (nvfp4's
scale factors in a second, blocked layout): found at import by recording the ops ref_kernel
runs (interop/gpumode_reads.py, on the CPU and on the meta device), named in the glue's
`unread_inputs(axes)`, and spared `gpuarena check`'s "the output does not depend on input X"
(only that finding, only for those inputs).

The fixtures are GPU MODE-format folders written for these tests (fixtures/gpumode/README.md):
more/twolayouts_py, gpuonly/cudablocked_py, gpuonly/cudaref_py, submissions/twolayouts_blocked.py.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
import torch

from gpuarena.harness.problem_check import check_problem
from gpuarena.interop.gpumode import import_folder
from gpuarena.interop.gpumode_probe import _generate, _runtime
from gpuarena.interop.gpumode_reads import unread, unread_names
from gpuarena.interop.gpumode_task import read_task
from gpuarena.problems import load_problem

from .conftest import FIXTURES

GM = FIXTURES / "gpumode"
TWO_LAYOUTS = GM / "more" / "twolayouts_py"
CUDA_BLOCKED = GM / "gpuonly" / "cudablocked_py"
CPU_ONLY = pytest.mark.skipif(torch.cuda.is_available(), reason="what a machine without a GPU says")
REF_LINE = "    out.copy_(x * s[:, None])\n"


def _variant(tmp_path: Path, body: str, name: str = "variant_py") -> Path:
    """twolayouts_py with ref_kernel's computing line replaced by body."""
    task = tmp_path / name
    shutil.copytree(TWO_LAYOUTS, task)
    reference = task / "reference.py"
    reference.write_text(reference.read_text().replace(REF_LINE, body))
    return task


def _unread(folder: Path, meta: bool = False) -> set[int] | None:
    task = read_task(folder)
    rt = _runtime("cpu", task.namespace)
    return unread(task, _generate(task, task.cases[0], task.cases[0].seed, rt), rt, meta=meta)


def test_the_second_layout_is_named_unread_and_the_problem_imports_checked(tmp_path):
    outcome = import_folder(TWO_LAYOUTS, tmp_path)
    assert outcome.status == "imported", outcome.messages
    assert not any(m.startswith("workload ") for m in outcome.messages)
    problem = load_problem(outcome.folder)
    assert [problem.module.unread_inputs(dict(w.axes)) for w in problem.spec.workloads] == [["s_blocked"]] * 2
    assert check_problem(outcome.folder).ok


def _not_as_stated(folder: Path) -> None:
    """problem.toml without `tolerance_as_stated`: a finding that is exact refuses it again (with
    the line, exact findings are notes: tests/interop/test_gpumode_exact.py)."""
    toml = folder / "problem.toml"
    toml.write_text("\n".join(line for line in toml.read_text().splitlines() if "tolerance_as_stated" not in line))


def test_without_the_declaration_the_check_still_says_the_output_does_not_depend_on_it(tmp_path):
    """Only the problem's author says an input is unread: a glue that says nothing gets the finding."""
    outcome = import_folder(TWO_LAYOUTS, tmp_path)
    assert outcome.folder is not None, outcome.messages
    glue = outcome.folder / "reference.py"
    text = glue.read_text()
    text = re.sub(r"^_UNREAD = .*$", "_UNREAD = {}", text, flags=re.M)
    glue.write_text(re.sub(r"^_UNREAD_ELSEWHERE = .*$", "_UNREAD_ELSEWHERE = []", text, flags=re.M))
    notes = check_problem(outcome.folder).notes
    assert any("the output does not depend on input s_blocked" in n and "exactly" in n for n in notes), notes
    _not_as_stated(outcome.folder)
    errors = check_problem(outcome.folder).errors
    assert errors and all("the output does not depend on input s_blocked" in e for e in errors), errors


def test_an_input_read_and_then_ignored_is_still_degenerate(tmp_path):
    """Reading is what counts, not the values: an input ref_kernel reads but multiplies by zero
    is not unread, so the check calls the problem degenerate where it is not kept as GPU MODE
    states it (kept so, the finding is exact and a note)."""
    task = _variant(tmp_path, "    out.copy_(x * s[:, None] + 0 * s_blocked.sum())\n")
    outcome = import_folder(task, tmp_path / "out", keep_failing=True)
    assert outcome.folder is not None, outcome.messages
    assert "_UNREAD = {0: [], 1: []}" in (outcome.folder / "reference.py").read_text()
    _not_as_stated(outcome.folder)
    findings = check_problem(outcome.folder).errors
    assert findings and all("the output does not depend on input s_blocked" in m for m in findings), findings


def test_an_unread_input_that_ignores_the_seed_is_still_found(tmp_path):
    """Only "does not depend on" is spared: an unread input the same for every seed is still one
    a solution could hard-code."""
    task = _variant(tmp_path, REF_LINE)
    reference = task / "reference.py"
    reference.write_text(
        reference.read_text().replace(
            "    s_blocked = s.reshape(rows // 4, 4).t().contiguous()\n",
            "    s_blocked = torch.arange(rows, device='cuda', dtype=torch.float32).reshape(4, rows // 4)\n",
        )
    )
    outcome = import_folder(task, tmp_path / "out")
    assert outcome.status == "failed-check", outcome.messages
    findings = [m for m in outcome.messages if m.startswith("workload ")]
    assert findings and all("input s_blocked is the same for two seeds" in m for m in findings), findings


@pytest.mark.parametrize(
    "body",
    [
        "    out.copy_(x * s_blocked.t().reshape(-1)[:, None])\n",  # through views of it
        "    out.copy_(x * s_blocked.data.t().reshape(-1)[:, None])\n",  # .data: no op, same storage
        "    out.copy_(x * torch.tensor(s_blocked.t().reshape(-1).tolist())[:, None])\n",  # no op at all
        "    out.copy_(x * torch.from_numpy(s_blocked.numpy().T.reshape(-1))[:, None])\n",
        "    out.copy_(x * s[:, None] * float(s_blocked[0, 0] > -1))\n",
    ],
)
def test_every_way_of_reading_an_input_counts(tmp_path, body):
    assert 2 not in (_unread(_variant(tmp_path, body)) or set())


@pytest.mark.parametrize("meta", [False, True])
@pytest.mark.parametrize(
    "body",
    [
        REF_LINE + "    _ = s_blocked.shape, s_blocked.dtype, s_blocked.device, s_blocked.numel(), len(s_blocked)\n",
        REF_LINE
        + "    _ = s_blocked.t().unsqueeze(0), s_blocked.view(-1), s_blocked.contiguous(), s_blocked.to(x.device)\n",
    ],
)
def test_its_shape_and_views_never_used_are_no_read(tmp_path, body, meta):
    assert _unread(_variant(tmp_path, body), meta=meta) == {2}


def test_on_the_meta_device_it_is_seen_too_without_values():
    assert _unread(TWO_LAYOUTS, meta=True) == {2}  # out (3), written, is read by no op but is a buffer
    assert unread_names({2, 3}, {3: "empty"}, ["x", "s", "s_blocked"]) == ["s_blocked"]


@CPU_ONLY
def test_a_ref_kernel_that_needs_cuda_names_its_unread_input_through_the_meta_device(tmp_path):
    """cudablocked_py: ref_kernel moves its scales to CUDA; the meta device's run names the
    blocked copy, so the first run on a GPU does not call the problem degenerate."""
    outcome = import_folder(CUDA_BLOCKED, tmp_path)
    assert outcome.status == "imported", outcome.messages
    problem = load_problem(outcome.folder)
    assert problem.spec.unchecked == ["cuda"]
    assert problem.input_names[:3] == ["a", "s", "s_blocked"]
    assert [problem.module.unread_inputs(dict(w.axes)) for w in problem.spec.workloads] == [["s_blocked"]] * 2
    glue = (outcome.folder / "reference.py").read_text()
    assert "_BUFFERS = {3: 'empty'}" in glue and "_UNREAD_ELSEWHERE = ['s_blocked']" in glue
    cudaref = import_folder(GM / "gpuonly" / "cudaref_py", tmp_path / "ref")
    assert load_problem(cudaref.folder).module.unread_inputs({"case": 0}) == []  # it reads all it gets


@pytest.mark.gpu
def test_on_the_gpu_its_first_run_checks_it_and_the_blocked_submission_passes(tmp_path):
    """Imported without CUDA's check (marked unchecked), its first run on a GPU checks it there,
    where the blocked scales would otherwise make it degenerate; imported with that check, it
    passes it at once."""
    from gpuarena.harness.judge import RunOptions, evaluate
    from gpuarena.harness.problem_pending import check_first
    from gpuarena.solutions import load_solution

    solution = load_solution(GM / "submissions" / "twolayouts_blocked.py")
    outcome = import_folder(CUDA_BLOCKED, tmp_path / "cpu")  # on the CPU: its ref_kernel needs CUDA
    assert outcome.status == "imported" and outcome.folder is not None, outcome.messages
    problem = load_problem(outcome.folder)
    assert problem.spec.unchecked == ["cuda"]
    report = check_problem(outcome.folder, "cuda")
    assert report.ok, report.errors
    assert check_first(problem, solution, "cuda", "test") is None
    record = evaluate(problem, solution, RunOptions(device="cuda", mode="test"))
    assert record.status == "PASSED", (record.reason, record.log[-3000:])
    checked = import_folder(CUDA_BLOCKED, tmp_path / "cuda", check_device="cuda")
    assert checked.status == "imported", checked.messages
    assert load_problem(checked.folder).module.unread_inputs({"case": 1}) == ["s_blocked"]
