"""A GPU MODE task whose own data makes an input irrelevant on some entries (its gated_deltanet
chunk kernels: a one-chunk fwd_h multiplies w by a zero state; fwd_o's gate underflows where h
is read, so h never matters).

Two things went wrong there. The importer took such an input, read by ref_kernel but without
effect on the first entry and as large as an output, for an output buffer and made it
`torch.empty` on every call: on the other entries the reference then read garbage and the check
called it nondeterministic. And the check refused the task for the trivial answers its data
allows, though they are the reference's own output bit for bit and GPU MODE's check accepts
them. A problem kept as its peer states it now imports with those findings as notes; a finding
that a tolerance hides (not exact) still refuses it, and a problem not kept as stated is still
refused for the exact ones.

Fixture: more/chunkstate_py (fixtures/gpumode/README.md)."""

from __future__ import annotations

import shutil
from pathlib import Path

import torch

from gpuarena.harness.problem_check import check_problem
from gpuarena.interop.gpumode import import_folder
from gpuarena.problems import load_problem

from .conftest import FIXTURES

CHUNK_STATE = FIXTURES / "gpumode" / "more" / "chunkstate_py"
EXACTLY = "exactly, by the task's own data (GPU MODE's, kept as stated)"


def _imported(tmp_path: Path, task: Path = CHUNK_STATE) -> Path:
    outcome = import_folder(task, tmp_path / "out")
    assert outcome.status == "imported", outcome.messages
    assert outcome.folder is not None
    return outcome.folder


def test_an_input_read_but_without_effect_on_the_first_entry_stays_an_input(tmp_path):
    folder = _imported(tmp_path)
    problem = load_problem(folder)
    assert problem.input_names[:3] == ["k", "w", "u"]
    assert problem.module._BUFFERS == {}
    workload = next(w for w in problem.spec.workloads if w.name.startswith("test1"))
    generator = torch.Generator().manual_seed(5)
    inputs = problem.make_inputs(dict(workload.axes), workload.torch_dtype, torch.device("cpu"), generator)
    (first,) = problem.reference(**inputs)
    (again,) = problem.reference(**inputs)
    assert torch.equal(first, again)  # no buffer of garbage read


def test_exact_trivial_findings_of_a_task_kept_as_stated_are_notes(tmp_path):
    report = check_problem(_imported(tmp_path))
    assert report.ok, report.errors
    timed = [n for n in report.notes if n.startswith("workload bench0") and EXACTLY in n]
    assert any("does not depend on input w" in n for n in timed), report.notes
    assert any("returning input u unchanged passes" in n for n in timed), report.notes
    assert not any(n.startswith("workload bench1") and "does not depend" in n for n in report.notes)


def test_the_same_findings_refuse_a_problem_not_kept_as_stated(tmp_path):
    folder = _imported(tmp_path)
    toml = folder / "problem.toml"
    toml.write_text("\n".join(line for line in toml.read_text().splitlines() if "tolerance_as_stated" not in line))
    errors = check_problem(folder).errors
    assert any(e.startswith("workload bench0") and "does not depend on input w" in e for e in errors), errors


def test_a_finding_that_the_tolerance_hides_still_refuses_a_task_kept_as_stated(tmp_path):
    task = tmp_path / "nearly_py"
    shutil.copytree(CHUNK_STATE, task)
    reference = task / "reference.py"
    # a state of 1e-7 at the start: w matters, by far less than the task's atol of 1e-4
    reference.write_text(
        reference.read_text().replace(
            "state = torch.zeros(cols, device=u.device)", "state = torch.full((cols,), 1e-7, device=u.device)"
        )
    )
    outcome = import_folder(task, tmp_path / "out")
    assert outcome.status != "imported"
    text = "\n".join(outcome.messages)
    assert "bench0" in text and "does not depend on input w" in text, text
    assert EXACTLY not in text
