"""FlashInfer-Bench's "FlashInfer-Trace" documents read and written: JSON files and JSONL lines
as the models of flashinfer_models.py, with errors that name the file, the line and the field.

The models (Definition, Workload, Solution, Trace and their parts) are described, with how
they follow the published schema, in flashinfer_models.py; they are re-exported here, so
`from gpuarena.interop.flashinfer_trace import Definition, read_definition` keeps working.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, TypeVar

import pydantic
from pydantic import BaseModel

from gpuarena.errors import FormatError
from gpuarena.interop.flashinfer_models import (
    Axis,
    AxisConst,
    AxisVar,
    BuildSpec,
    Correctness,
    Definition,
    DTypeName,
    InputSource,
    Language,
    NonEmpty,
    Performance,
    RandomInput,
    SafetensorsInput,
    ScalarInput,
    Solution,
    SourceFile,
    Status,
    TensorSpec,
    Trace,
    TraceEnvironment,
    TraceEvaluation,
    Workload,
    sources_hash,
)

__all__ = [
    "Axis",
    "AxisConst",
    "AxisVar",
    "BuildSpec",
    "Correctness",
    "DTypeName",
    "Definition",
    "InputSource",
    "Language",
    "NonEmpty",
    "Performance",
    "RandomInput",
    "SafetensorsInput",
    "ScalarInput",
    "Solution",
    "SourceFile",
    "Status",
    "TensorSpec",
    "Trace",
    "TraceEnvironment",
    "TraceEvaluation",
    "Workload",
    "field_path",
    "parse_definition",
    "parse_solution",
    "read_definition",
    "read_solution",
    "read_traces",
    "read_workloads",
    "sources_hash",
    "to_json",
    "trace_line",
    "write_jsonl",
]

M = TypeVar("M", bound=BaseModel)


def field_path(loc: Iterable[Any]) -> str:
    """A pydantic error location as a path a person can find: inputs.x.shape[0]."""
    text = ""
    for part in loc:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


def _fix_for(error: Mapping[str, Any]) -> str:
    kind = error["type"]
    if kind == "missing":
        return "add this field"
    if kind == "extra_forbidden":
        return "remove it or check its spelling against the FlashInfer-Trace schema"
    if kind.startswith("literal") or kind == "union_tag_invalid":
        return f"use {error.get('ctx', {}).get('expected', 'an allowed value')}"
    return "see the FlashInfer-Trace schema (Definition, Workload, Solution, Trace)"


def _validate(model: type[M], data: Any, where: str, prefix: str = "") -> M:
    try:
        return model.model_validate(data)
    except pydantic.ValidationError as exc:
        first = exc.errors()[0]
        more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
        path = field_path((*([prefix] if prefix else []), *first["loc"]))
        message = str(first["msg"]).removeprefix("Value error, ") + more
        raise FormatError(where, path or None, message, _fix_for(first)) from None


def _json(text: str, where: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise FormatError(
            where, None, f"is not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})", "fix the syntax there"
        ) from None


def _read(path: Path | str) -> str:
    path = Path(path)
    if not path.is_file():
        raise FormatError(path, None, "not found")
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise FormatError(path, None, "is not UTF-8 text") from None


def parse_definition(data: Any, where: str = "definition") -> Definition:
    return _validate(Definition, data, where)


def parse_solution(data: Any, where: str = "solution") -> Solution:
    return _validate(Solution, data, where)


def read_definition(path: Path | str) -> Definition:
    """A Definition JSON file; errors name the file and the field."""
    return parse_definition(_json(_read(path), str(path)), str(path))


def read_solution(path: Path | str) -> Solution:
    """A Solution JSON file; errors name the file and the field."""
    return parse_solution(_json(_read(path), str(path)), str(path))


def _lines(path: Path | str) -> Iterable[tuple[str, Any]]:
    for number, line in enumerate(_read(path).splitlines(), start=1):
        if line.strip():
            where = f"{path}, line {number}"
            yield where, _json(line, where)


def read_traces(path: Path | str) -> list[Trace]:
    """A traces JSONL file (one Trace a line; blank lines skipped)."""
    return [_validate(Trace, data, where) for where, data in _lines(path)]


def read_workloads(path: Path | str, definition: str | None = None) -> list[Trace]:
    """A workloads JSONL file: each line a Trace with a workload and no solution or evaluation,
    as the data set stores them. A line may also be a bare Workload object ({"uuid", "axes",
    "inputs"}); it is then attributed to `definition`."""
    entries = []
    for where, data in _lines(path):
        if isinstance(data, dict) and "workload" not in data and "uuid" in data:
            if definition is None:
                raise FormatError(
                    where,
                    "definition",
                    "a bare workload names no definition",
                    'write the line as {"definition": NAME, "workload": {...}}',
                )
            entry = Trace(definition=definition, workload=_validate(Workload, data, where, "workload"))
        else:
            entry = _validate(Trace, data, where)
        if not entry.is_workload_only:
            raise FormatError(
                where,
                "solution" if entry.solution is not None else "evaluation",
                "a workloads file holds workloads only",
                "set solution and evaluation to null",
            )
        entries.append(entry)
    if not entries:
        raise FormatError(path, None, "holds no workloads", "write one Trace with a workload per line")
    return entries


def to_json(model: BaseModel, indent: int | None = 2) -> str:
    """A document as FlashInfer-Bench writes it (null optional fields left out)."""
    return model.model_dump_json(indent=indent)


def trace_line(trace: Trace) -> str:
    """One JSONL line; solution and evaluation are written (null in a workloads file)."""
    data = json.loads(trace.model_dump_json())
    ordered = {
        "definition": data["definition"],
        "solution": data.get("solution"),
        "workload": data["workload"],
        "evaluation": data.get("evaluation"),
    }
    return json.dumps(ordered, separators=(", ", ": "), ensure_ascii=False)


def write_jsonl(traces: Iterable[Trace], path: Path | str) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(trace_line(t) + "\n" for t in traces), encoding="utf-8")
