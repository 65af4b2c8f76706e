"""FlashInfer-Bench's "FlashInfer-Trace" documents as pydantic models.

A FlashInfer-Trace data set has four kinds of document:

- a **Definition** (one JSON file): an operator's axes (constant or variable), its named input
  and output tensors with shapes written in axis names and one dtype each, and a reference in
  plain PyTorch whose `run` function is the specification;
- **Workloads** (JSONL, one per line): values for the variable axes and where each input comes
  from (random data, a literal scalar, or a tensor in a safetensors file). In the data set each
  line is a Trace whose `solution` and `evaluation` are null;
- a **Solution** (one JSON file): source files inline, language, entry point
  (`file::function`), whether outputs are passed in (destination-passing style) or returned;
- **Traces** (JSONL): one run of a solution on one workload, with its evaluation (status,
  environment, correctness and performance summaries).

The models follow the published schema (the docs' Definition, Workload, Solution and Trace
pages) and its validation rules. Two choices are stricter than FlashInfer-Bench's own loader:
an unknown field is an error here (a misspelt `destination_passing_style` would otherwise
silently mean "true"), and the `type` of an axis and of an input descriptor must be written
(the docs mark it required). Both accept everything FlashInfer-Bench writes.

The readers and writers, whose errors name the file, the line and the field, are
flashinfer_trace.py's; it re-exports these models, so callers import them from there.
"""

from __future__ import annotations

import ast
import hashlib
import json
import math
from collections.abc import Mapping
from pathlib import PurePosixPath
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_serializer, model_validator

DTypeName = Literal[
    "float32",
    "float16",
    "bfloat16",
    "float8_e4m3fn",
    "float8_e5m2",
    "float4_e2m1",
    "int64",
    "int32",
    "int16",
    "int8",
    "bool",
]
"""Element types a FlashInfer-Trace tensor may have."""

NonEmpty = Annotated[str, Field(min_length=1)]


class _Model(BaseModel):
    # NaN (an error that could not be measured) is written "NaN": JSON has no NaN, and null
    # would not read back as a float
    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True, ser_json_inf_nan="strings")

    @model_serializer(mode="wrap")
    def _without_null_defaults(self, handler: Any) -> Any:
        """Leave out optional fields that are null or false (a description, `optional`, not given),
        as FlashInfer-Bench's files do; a field that is required but may be null (a scalar's
        shape) is always written."""
        data = handler(self)
        if isinstance(data, dict):
            for name, info in type(self).model_fields.items():
                quiet = info.default is None or info.default is False  # not `==`: 0.0 == False
                if not info.is_required() and quiet and name in data and data[name] is info.default:
                    del data[name]
        return data


# -- Definition ------------------------------------------------------------------------------


class AxisConst(_Model):
    """An axis whose size is fixed by the definition (e.g. the hidden size)."""

    type: Literal["const"] = "const"
    value: int = Field(ge=0)
    """The size of this axis in every workload."""
    description: str | None = None


class AxisVar(_Model):
    """An axis whose size each workload chooses (e.g. the number of tokens)."""

    type: Literal["var"] = "var"
    description: str | None = None


Axis = Annotated[AxisConst | AxisVar, Field(discriminator="type")]


class TensorSpec(_Model):
    """One input or output of a definition."""

    shape: list[NonEmpty] | None
    """Axis names, outermost first; [] is a 0-D tensor, null a Python scalar (int, float, bool)."""
    dtype: DTypeName
    description: str | None = None
    optional: bool = False
    """Inputs only: a workload may leave this input out (the call it was traced from passed
    None), and run() then gets None. FlashInfer-Bench's definition guide and dump sanitizer use
    it; its pydantic models do not list it (they ignore unknown fields)."""


class Definition(_Model):
    """What an operator computes: axes, named inputs and outputs, and a reference `run`."""

    name: NonEmpty
    """Unique name, conventionally {op_type}_{properties}_{constants}, e.g. rmsnorm_h4096."""
    op_type: NonEmpty
    """The family of operator (gemm, rmsnorm, gqa_paged, ...), for grouping."""
    axes: dict[NonEmpty, Axis]
    """Axis name -> constant or variable axis."""
    inputs: dict[NonEmpty, TensorSpec]
    """Inputs in the order `run` takes them."""
    outputs: dict[NonEmpty, TensorSpec]
    """Outputs in the order `run` returns them (and destination-passing solutions take them)."""
    reference: NonEmpty
    """Python source defining a top-level `run(*inputs)` that returns the outputs."""
    tags: list[NonEmpty] = Field(default_factory=list)
    """Free-form labels, conventionally namespaced: "model:llama-3.1-8b", "stage:decode", "fused"."""
    description: str | None = None
    constraints: list[NonEmpty] = Field(default_factory=list)
    """Python expressions over axis names that every workload satisfies, e.g. "H_qo == H_kv * H_r"."""

    @field_validator("tags", "constraints", mode="before")
    @classmethod
    def _null_is_empty(cls, value: Any) -> Any:
        return [] if value is None else value  # the docs give null as these fields' default

    @model_validator(mode="after")
    def _consistent(self) -> Definition:
        try:
            module = ast.parse(self.reference, mode="exec")
        except SyntaxError as exc:
            raise ValueError(f"reference is not valid Python: {exc.msg} (line {exc.lineno})") from None
        if not any(isinstance(node, ast.FunctionDef) and node.name == "run" for node in module.body):
            raise ValueError("reference defines no top-level function run()")
        both = sorted(set(self.inputs) & set(self.outputs))
        if both:
            raise ValueError(f"names used for both an input and an output: {', '.join(both)}")
        for text in self.constraints:
            try:
                ast.parse(text, mode="eval")
            except SyntaxError as exc:
                raise ValueError(f"constraint {text!r} is not a Python expression: {exc.msg}") from None
        optional = [name for name, spec in self.outputs.items() if spec.optional]
        if optional:
            raise ValueError(f"output {optional[0]!r} is marked optional; only inputs may be")
        for kind, tensors in (("input", self.inputs), ("output", self.outputs)):
            for name, spec in tensors.items():
                for axis in spec.shape or []:
                    if axis not in self.axes:
                        raise ValueError(
                            f"{kind} {name!r} has axis {axis!r}, which is not among the axes ({', '.join(self.axes)})"
                        )
        return self

    @property
    def const_axes(self) -> dict[str, int]:
        return {name: axis.value for name, axis in self.axes.items() if isinstance(axis, AxisConst)}

    @property
    def var_axes(self) -> list[str]:
        return [name for name, axis in self.axes.items() if isinstance(axis, AxisVar)]


# -- Workload --------------------------------------------------------------------------------


class RandomInput(_Model):
    """Fill the input with random data of its declared shape and dtype."""

    type: Literal["random"] = "random"


class ScalarInput(_Model):
    """A literal value for a scalar input."""

    type: Literal["scalar"] = "scalar"
    value: int | float | bool


class SafetensorsInput(_Model):
    """A tensor stored in a safetensors file of the data set."""

    type: Literal["safetensors"] = "safetensors"
    path: NonEmpty
    """The file, relative to the data set's root (or absolute)."""
    tensor_key: NonEmpty
    """The tensor's key inside that file."""


InputSource = Annotated[RandomInput | ScalarInput | SafetensorsInput, Field(discriminator="type")]


class Workload(_Model):
    """One concrete instance of a definition: variable axis sizes and input sources."""

    uuid: NonEmpty
    """Identifies the workload across the data set (traces refer to it)."""
    axes: dict[str, int]
    """Variable axis name -> size."""
    inputs: dict[str, InputSource]
    """Input name -> where its data comes from; an optional input may be left out."""

    @field_validator("axes")
    @classmethod
    def _sizes(cls, value: dict[str, int]) -> dict[str, int]:
        for name, size in value.items():
            if size < 0:
                raise ValueError(f"axis {name!r} has negative size {size}")
        return value


# -- Solution --------------------------------------------------------------------------------

Language = Literal["python", "triton", "cpp", "cuda", "tilelang"]


class SourceFile(_Model):
    """One file of a solution, inline."""

    path: NonEmpty
    """Relative path inside the solution, e.g. main.py or src/kernel.cu."""
    content: NonEmpty

    @field_validator("path")
    @classmethod
    def _relative(cls, value: str) -> str:
        path = PurePosixPath(value)
        if path.is_absolute() or value.startswith("\\"):
            raise ValueError(f"source path {value!r} must be relative")
        if ".." in path.parts:
            raise ValueError(f"source path {value!r} must not contain '..'")
        return value


class BuildSpec(_Model):
    """How to build and call a solution."""

    language: Language
    target_hardware: list[str] = Field(min_length=1)
    """Hardware it is meant for, e.g. NVIDIA_H100 (informational)."""
    entry_point: NonEmpty
    """The function to call, as "{file path}::{function name}", e.g. main.py::run."""
    dependencies: list[NonEmpty] = Field(default_factory=list)
    """Libraries it needs, e.g. "triton >= 3.0" or CUTLASS_3_7 (informational)."""
    destination_passing_style: bool = True
    """True: run(*inputs, *outputs) writes into given outputs; False: run(*inputs) returns them."""
    binding: Literal["tvm-ffi", "torch"] | None = None
    """C++/CUDA only: how the compiled code is called (tvm-ffi when not given)."""

    @field_validator("entry_point")
    @classmethod
    def _entry_point(cls, value: str) -> str:
        if value.count("::") != 1 or not all(value.split("::")):
            raise ValueError(f"entry_point {value!r} must be '<file path>::<function name>', e.g. main.py::run")
        return value

    @property
    def entry_file(self) -> str:
        return self.entry_point.split("::")[0]

    @property
    def entry_function(self) -> str:
        return self.entry_point.split("::")[1]


class Solution(_Model):
    """An implementation of a definition, sources included."""

    name: NonEmpty
    definition: NonEmpty
    """The name of the Definition it implements."""
    author: NonEmpty
    spec: BuildSpec
    sources: list[SourceFile] = Field(min_length=1)
    description: str | None = None

    @model_validator(mode="after")
    def _sources(self) -> Solution:
        paths = [s.path for s in self.sources]
        repeated = sorted({p for p in paths if paths.count(p) > 1})
        if repeated:
            raise ValueError(f"source paths repeated: {', '.join(repeated)}")
        if self.spec.entry_file not in paths:
            raise ValueError(
                f"the entry point's file {self.spec.entry_file!r} is not among the sources ({', '.join(paths)})"
            )
        return self

    @property
    def content_hash(self) -> str:
        return sources_hash({s.path: s.content for s in self.sources})


def sources_hash(sources: Mapping[str, str]) -> str:
    """SHA-256 over the source files sorted by path: the same for a solution in gpuarena's form
    and in FlashInfer's, so a solution keeps it across `pack` and import."""
    canonical = json.dumps(sorted(sources.items()), separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


# -- Trace -----------------------------------------------------------------------------------

Status = Literal[
    "PASSED", "INCORRECT_SHAPE", "INCORRECT_NUMERICAL", "INCORRECT_DTYPE", "RUNTIME_ERROR", "COMPILE_ERROR", "TIMEOUT"
]


class Correctness(_Model):
    """The worst errors against the reference."""

    max_relative_error: float = 0.0
    max_absolute_error: float = 0.0
    extra: dict[str, Any] | None = None
    """Further figures, free-form."""

    @field_validator("max_relative_error", "max_absolute_error")
    @classmethod
    def _non_negative(cls, value: float) -> float:
        if not math.isnan(value) and value < 0:
            raise ValueError("must be at least 0 (or NaN)")
        return value


class Performance(_Model):
    """Timing of the solution against the definition's reference."""

    latency_ms: float = Field(default=0.0, ge=0)
    """Mean time of one call of the solution, in milliseconds."""
    reference_latency_ms: float = Field(default=0.0, ge=0)
    """The same for the reference, on the same data and hardware."""
    speedup_factor: float = Field(default=0.0, ge=0)
    """reference_latency_ms / latency_ms."""


class TraceEnvironment(_Model):
    """Where a trace was measured."""

    hardware: NonEmpty
    """The device's name, e.g. "NVIDIA H100 80GB HBM3"."""
    libs: dict[str, str] = Field(default_factory=dict)
    """Library name -> version (torch, triton, cuda, ...)."""


class TraceEvaluation(_Model):
    """The outcome of one solution on one workload."""

    status: Status
    environment: TraceEnvironment
    timestamp: NonEmpty
    """When it was measured, ISO 8601."""
    log: str = ""
    """What the run printed."""
    correctness: Correctness | None = None
    """Given for PASSED and INCORRECT_NUMERICAL only."""
    performance: Performance | None = None
    """Given for PASSED only."""

    @model_validator(mode="after")
    def _fields_for_status(self) -> TraceEvaluation:
        wants_correctness = self.status in ("PASSED", "INCORRECT_NUMERICAL")
        wants_performance = self.status == "PASSED"
        if wants_correctness != (self.correctness is not None):
            raise ValueError(
                f"correctness must be {'given' if wants_correctness else 'null'} when status is {self.status}"
            )
        if wants_performance != (self.performance is not None):
            raise ValueError(
                f"performance must be {'given' if wants_performance else 'null'} when status is {self.status}"
            )
        return self


class Trace(_Model):
    """One line of a workloads or traces file: a workload, and (for a run) its solution and result."""

    definition: NonEmpty
    """The Definition's name."""
    workload: Workload
    solution: str | None = None
    """The Solution's name; null in a workloads file."""
    evaluation: TraceEvaluation | None = None
    """The result; null in a workloads file."""

    @property
    def is_workload_only(self) -> bool:
        return self.solution is None and self.evaluation is None
