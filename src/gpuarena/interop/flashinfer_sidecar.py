"""What an imported FlashInfer-Trace problem or solution folder keeps beside gpuarena's own
files: the names and formats the import writes, the `UnsupportedFeature` error, the
flashinfer.json sidecars, and reading them back (for `flashinfer_export`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Final, Literal

import pydantic
from pydantic import BaseModel, ConfigDict

from gpuarena.errors import FormatError, GpuarenaError
from gpuarena.interop.flashinfer_trace import Definition, InputSource, field_path

SIDECAR = "flashinfer.json"
"""The file in an imported problem or solution folder that keeps what gpuarena's own files cannot."""
PROBLEM_FORMAT: Final = "gpuarena.flashinfer-definition/1"
SOLUTION_FORMAT: Final = "gpuarena.flashinfer-solution/1"
REFERENCE_HEADER = "# gpuarena: the FlashInfer-Trace definition's reference, verbatim, down to the marker line below."
REFERENCE_END = "# ---- gpuarena: end of the FlashInfer-Trace reference ----"
ADAPTER_FILE = "flashinfer_adapter.py"
ADAPTER_HEADER = (
    "# gpuarena: adapter written by `gpuarena import flashinfer-solution`; not part of the FlashInfer solution."
)
LANGUAGES = {"python": "pytorch", "triton": "triton", "cuda": "cuda", "tilelang": "tilelang"}
"""FlashInfer solution language -> gpuarena solution language (C++/CUDA bound with torch)."""


def gpuarena_language(language: str, binding: str | None) -> str | None:
    """The gpuarena language of a FlashInfer BuildSpec (None: gpuarena has none for it). C++ and
    CUDA are bound with tvm-ffi unless the spec says torch, as FlashInfer-Bench reads it."""
    if language in ("cuda", "cpp") and binding in (None, "tvm-ffi"):
        return "tvm-ffi"
    return LANGUAGES.get(language) if language != "cpp" else None


def flashinfer_language(language: str, sources: list[str]) -> tuple[str, str | None]:
    """A gpuarena language as FlashInfer's (language, binding): tvm-ffi is CUDA where a .cu
    source is among the files, else C++."""
    if language == "tvm-ffi":
        return ("cuda" if any(s.endswith(".cu") for s in sources) else "cpp"), "tvm-ffi"
    for flashinfer, ours in LANGUAGES.items():
        if ours == language:
            return flashinfer, "torch" if language == "cuda" else None
    raise UnsupportedFeature(
        "solution",
        f"{language} solutions",
        "FlashInfer-Trace has no such language",
        target="a FlashInfer-Trace Solution",
    )


class UnsupportedFeature(GpuarenaError):
    """The FlashInfer-Trace document needs something gpuarena's formats cannot carry yet."""

    def __init__(self, where: Path | str, feature: str, detail: str, target: str = "gpuarena's format"):
        self.where, self.feature, self.detail = str(where), feature, detail
        super().__init__(f"{where}: {target} cannot carry {feature} yet: {detail}")


class ProblemSidecar(BaseModel):
    """flashinfer.json in an imported problem folder."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    format: Literal["gpuarena.flashinfer-definition/1"] = PROBLEM_FORMAT
    definition: Definition
    """The FlashInfer-Trace definition, as imported."""
    scalars: dict[str, int | float | bool] = {}
    """Scalar input name -> its value in every workload; one whose value differs between
    workloads is taken from workload_inputs, and this is its value for a workload without the
    workload axis (the CPU smoke: that of the workload it was made from)."""
    omitted: list[str] = []
    """Optional inputs that every workload leaves out: make_inputs() passes None for them."""
    cpu_smoke: str | None = None
    """The gpuarena-only CPU workload the import added, if any (never exported)."""
    workload_axis: str | None = None
    """The gpuarena-only axis whose value numbers the FlashInfer workload (an index into
    workload_inputs), where the workloads' inputs differ beyond axes and dtype; never exported."""
    workload_inputs: list[dict[str, InputSource]] = []
    """Each FlashInfer workload's inputs as it gave them, by workload_axis: safetensors inputs
    come from flashinfer_inputs.json, scalars have its own values, an optional input it leaves
    out is None."""


class SolutionSidecar(BaseModel):
    """flashinfer.json in an imported solution folder: the Solution's fields but its sources."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    format: Literal["gpuarena.flashinfer-solution/1"] = SOLUTION_FORMAT
    solution: dict[str, Any]
    """name, definition, author, description and spec of the FlashInfer Solution."""


# -- reading an imported problem -------------------------------------------------------------


def read_problem_sidecar(folder: Path | str) -> ProblemSidecar | None:
    """The sidecar of a problem imported from FlashInfer-Trace; None for any other problem."""
    path = Path(folder) / SIDECAR
    if not path.is_file():
        return None
    try:
        return ProblemSidecar.model_validate_json(path.read_text(encoding="utf-8"))
    except pydantic.ValidationError as exc:
        first = exc.errors()[0]
        raise FormatError(
            path,
            field_path(first["loc"]) or None,
            str(first["msg"]).removeprefix("Value error, "),
            "import the definition again with `gpuarena import flashinfer`",
        ) from None


def reference_block(reference_source: str, where: Path | str) -> str:
    """The verbatim FlashInfer reference at the top of an imported problem's reference.py."""
    lines = reference_source.split("\n")
    if not lines or lines[0] != REFERENCE_HEADER or REFERENCE_END not in lines:
        raise FormatError(
            where,
            None,
            "is not the reference.py of an imported FlashInfer-Trace definition",
            "import the definition again with `gpuarena import flashinfer`",
        )
    return "\n".join(lines[1 : lines.index(REFERENCE_END)])


def read_solution_sidecar(folder: Path | str) -> dict[str, Any] | None:
    """The FlashInfer metadata kept beside an imported solution; None for any other solution."""
    path = Path(folder) / SIDECAR
    if not Path(folder).is_dir() or not path.is_file():
        return None
    try:
        return SolutionSidecar.model_validate_json(path.read_text(encoding="utf-8")).solution
    except pydantic.ValidationError as exc:
        first = exc.errors()[0]
        raise FormatError(
            path,
            field_path(first["loc"]) or None,
            str(first["msg"]),
            "import the solution again with `gpuarena import flashinfer-solution`",
        ) from None
