"""`gpuarena check` on an input whose effect on the output fades under the tolerance.

KernelBench's LSTMHn, LSTMCn and GRUHidden at their published sizes (512 steps) return a state
that a fresh initial state h0 (and c0) moves by less than 1e-4: the check refused all three as
"the output does not depend on input h0". The initial state is 2-5% of their inputs, and a
solution that skips it still runs the whole recurrence, so such a problem passes with a note.
Where the inputs whose effect fades hold more than FADED_SHARE of the input bytes, a solution
could skip much of its data: refused, as is an input the output ignores bit for bit."""

from __future__ import annotations

from pathlib import Path

from gpuarena.harness.problem_check import FADED_SHARE, check_problem

TOML = """name = "decaying_scan"
level = 2
summary = "A scan whose state decays each step, from an initial state h."
tags = ["test-fixture"]
convention = "return"
outputs = ["state"]

[[workloads]]
name = "scan"
axes = {{ steps = 64, width = 256, starts = {starts} }}
dtype = "float32"
"""

REFERENCE = """import torch


def reference(x, h):
    state = {start}
    for step in range(x.shape[0]):
        state = 0.8 * state + x[step]
    return state


def make_inputs(axes, dtype, device, generator):
    x = torch.randn(axes["steps"], axes["width"], generator=generator, device=device)
    h = torch.randn(axes["starts"], axes["width"], generator=generator, device=device)
    return {{"x": x.to(dtype), "h": h.to(dtype)}}
"""

FADES = "h.mean(0)"
"""After 64 steps h's effect is 0.8^64 (6e-7) of it: under float32's tolerance, yet it moves the
output's last bits (halving 64 times would round it away: bit for bit no effect)."""


def _problem(tmp_path: Path, start: str, starts: int) -> Path:
    folder = tmp_path / "decaying_scan"
    folder.mkdir()
    (folder / "problem.toml").write_text(TOML.format(starts=starts))
    (folder / "reference.py").write_text(REFERENCE.format(start=start))
    return folder


def test_a_small_input_whose_effect_fades_is_a_note(tmp_path: Path) -> None:
    # h is 1 row of 65: 1.5% of the inputs
    report = check_problem(_problem(tmp_path, FADES, starts=1))
    assert report.ok, report.errors
    assert any("does not depend on input h" in n and "1.5%" in n for n in report.notes), report.notes


def test_inputs_whose_effect_fades_refuse_the_problem_where_they_hold_much_of_the_data(tmp_path: Path) -> None:
    # h is 16 rows of 80: 20% of the inputs, more than FADED_SHARE
    assert 16 / 80 > FADED_SHARE
    errors = check_problem(_problem(tmp_path, FADES, starts=16)).errors
    assert any("does not depend on input h" in e for e in errors), errors


def test_a_small_input_the_output_ignores_bit_for_bit_is_refused(tmp_path: Path) -> None:
    # the problem's own mistake, at any size: h is read nowhere
    errors = check_problem(_problem(tmp_path, "torch.zeros_like(h[0])", starts=1)).errors
    assert any("does not depend on input h" in e for e in errors), errors
