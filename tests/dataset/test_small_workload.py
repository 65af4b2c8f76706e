"""A problem's CPU-sized workload made less small where the CPU's check finds it degenerate
(small_workload.halved_factor): Gemma 2B's JAX decoder block, divided by 32 (64 tokens of width
64), gave an output that a fresh query weight still passed, where every input mattered at its
recorded size on the H200 (stop 73), so the dataset left out Gemma's whole layer."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest

from gpuarena.dataset.small_workload import DEGENERATE, degenerate_small, halved_factor, scale_down, shrink

REPO = Path(__file__).resolve().parents[2]
GEMMA = REPO / "dataset" / "harvests" / "jax-gemma-prefill"


def _spec(recorded: dict[str, int], small: dict[str, int]) -> dict:
    return {
        "workloads": [
            {"name": "gemma-prefill", "axes": recorded, "devices": ["cuda"]},
            {"name": "small", "axes": small, "devices": ["cpu"]},
        ]
    }


def test_the_factor_halves_down_to_the_recorded_sizes_and_no_further():
    recorded = {"x_0": 1, "x_1": 2048, "x_2": 4096, "w_0": 8}
    spec = _spec(recorded, scale_down(recorded))
    factors = []
    while (spec := halved_factor(spec)) is not None:
        small = spec["workloads"][1]["axes"]
        factors.append(recorded["x_2"] // small["x_2"])
        assert small["x_0"] == 1 and small["w_0"] == 8  # what the factor never divided stays
        assert recorded["x_1"] // small["x_1"] == factors[-1]  # one factor for every divided size
    assert factors == [8, 4, 2, 1]  # scale_down's 16, halved until the recorded sizes


def test_no_factor_to_halve_is_said_as_none():
    recorded = {"x_0": 2048, "x_1": 4096}
    assert halved_factor(_spec(recorded, shrink(recorded))) is None  # an op's renumbered sizes: 40, 48
    assert halved_factor(_spec(recorded, dict(recorded))) is None
    assert halved_factor({"workloads": [{"name": "small", "axes": recorded}]}) is None


def test_only_a_degenerate_small_workload_is_tried_again():
    lost = f"{DEGENERATE} x3 (a fresh x3 gives a passing output)"
    assert degenerate_small([lost, lost.replace("x3", "x7")])
    assert not degenerate_small([lost, "workload small: ValueError: Sum of sizes 128 must be equal"])
    assert not degenerate_small([])
    faded = f"{lost}, within the tolerance though not bit for bit"  # a note: the check passed
    assert degenerate_small([], [faded]) and not degenerate_small([], ["workload small: outputs differ by rounding"])


@pytest.mark.harness
def test_gemma_s_decoder_block_is_kept_at_the_factor_where_every_input_matters(tmp_path):
    """The shipped Gemma 2B harvest (an H200's, at its published size) assembled here: its decoder
    block's small workload is halved from 32 until the CPU's check passes."""
    from gpuarena.dataset.assemble import add

    report = json.loads((GEMMA / "harvest.json").read_text())
    (block,) = [g for g in report["groups"] if g["op"] == "scope:gemma_backbone/decoder_block"]
    made = add([GEMMA], tmp_path / "dataset")
    entry = next(e for e in made.entries if e.problem == block["problem"])
    assert entry.status == "kept", entry.reasons
    spec = tomllib.loads((tmp_path / "dataset" / block["problem"] / "problem.toml").read_text())
    recorded, small = (w["axes"] for w in spec["workloads"])
    assert recorded["x0_1"] == 2048 and 2048 // small["x0_1"] < 32  # less small than scale_down's 32
