"""A sample's weight is the dataset's, not its contributor's (issue 48): the weight in a
sample's problem.toml is ignored, and the problem joins the dataset with the weight the dataset
gives a problem of its level, its workloads weighted equally.

A harvested problem's weight is its operator's share of a model's time (docs/dataset.md), which
a contributor cannot measure for the dataset's suite; a hand-set weight would let a contributor
make their own problem count more. So an accepted sample's problem gets the median weight of the
shipped dataset's problems at its level that weigh anything (`SAMPLE_WEIGHTS`, from
dataset/problems; tests/dataset/test_sample_canonical.py checks they still are: since `dataset
weigh`, an op whose every call a kept fusion claims weighs 0, and a sample must weigh something). Pure text work on problem.toml:
the server runs it on accepted samples without running anything.
"""

from __future__ import annotations

import re
import tomllib
from typing import Any

SAMPLE_WEIGHTS = {1: 0.00105, 2: 0.00091, 3: 0.00100, 4: 0.00069}
"""The median weight of dataset/problems' problems of weight above 0, per level (2026-12-02, stop
73: 375 problems, weights of `gpuarena dataset weigh` from an H200's eager PyTorch and JAX times:
they sum to 1)."""
_WEIGHT_LINE = re.compile(r"^\s*weight\s*=.*$")
_HEADER = re.compile(r"^\s*\[")


def dataset_weight(level: Any) -> float:
    """The weight the dataset gives a sample's problem of this level."""
    return SAMPLE_WEIGHTS.get(level if isinstance(level, int) else 1, SAMPLE_WEIGHTS[1])


def contributor_weights(spec: dict[str, Any]) -> list[str]:
    """The weights problem.toml sets, as the contributor wrote them (for the report's note)."""
    found = [f"weight = {spec['weight']}"] if "weight" in spec else []
    for workload in spec.get("workloads") or []:
        if isinstance(workload, dict) and "weight" in workload:
            found.append(f"workload {workload.get('name', '?')}'s weight = {workload['weight']}")
    return found


def with_dataset_weight(text: str) -> tuple[str, list[str]]:
    """problem.toml with the dataset's weight: its top-level weight set to dataset_weight(level),
    every workload's weight removed (equal weights); and what was overridden. Raises ValueError
    where the weights cannot be rewritten (written inside an inline table)."""
    spec = tomllib.loads(text)
    overridden = contributor_weights(spec)
    weight = dataset_weight(spec.get("level"))
    lines, out, top = text.splitlines(), [], True
    line = f"weight = {weight}  # the dataset's weight for a sample of this level (docs/dataset.md)"
    for row in lines:
        if _HEADER.match(row) and top:
            top = False
            if "weight" not in spec:
                out.append(line)
        if _WEIGHT_LINE.match(row):
            if top:
                out.append(line)
            continue
        out.append(row)
    if top and "weight" not in spec:
        out.append(line)
    rewritten = "\n".join(out) + "\n"
    check = tomllib.loads(rewritten)
    if check.get("weight") != weight or contributor_weights({"workloads": check.get("workloads") or []}):
        raise ValueError(
            "problem.toml sets a weight inside an inline table, which the dataset cannot override "
            "(fix: write `weight = ...` on its own line, or leave the weights out)"
        )
    return rewritten, overridden


def weight_note(text: str) -> str:
    """What the check says of the weights problem.toml sets ('' where it sets none)."""
    spec = tomllib.loads(text)
    set_here = contributor_weights(spec)
    if not set_here:
        return ""
    return (
        f"problem.toml sets {', '.join(set_here)}: a sample's weight is the dataset's, so on acceptance "
        f"its problem gets weight {dataset_weight(spec.get('level'))} (the median of the dataset's level "
        f"{spec.get('level')} problems) and equal workload weights"
    )
