"""JSON Schemas generated from the pydantic models (also shipped as *.schema.json here)."""

from __future__ import annotations

from typing import Any


def all_schemas() -> dict[str, dict[str, Any]]:
    from gpuarena.contracts.records import Evaluation
    from gpuarena.problems.model import ProblemSpec
    from gpuarena.solutions.model import PackedSolution, SolutionManifest

    return {
        "problem": ProblemSpec.model_json_schema(),
        "solution-manifest": SolutionManifest.model_json_schema(),
        "packed-solution": PackedSolution.model_json_schema(),
        "evaluation": Evaluation.model_json_schema(),
    }
