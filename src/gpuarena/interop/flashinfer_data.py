"""The tensors a FlashInfer-Trace workload gives as safetensors inputs, read at import time and
kept in the imported problem folder as text (flashinfer_inputs.json: a problem folder holds text
files only, problems/pack.py), so the problem carries exactly the recorded values.

The safetensors file is read here with a reader of its own (an 8-byte little-endian header
length, a JSON header of dtype, shape and byte offsets per tensor, then the bytes): only the
tensors a workload names are read, and gpuarena needs no safetensors package. A relative path
is resolved as FlashInfer-Bench resolves it, against the data set's root (the folder holding
`workloads/`), and else against the workloads file's own folder."""

from __future__ import annotations

import base64
import json
import struct
from pathlib import Path
from typing import Final, Literal

from pydantic import BaseModel, ConfigDict

from gpuarena.errors import FormatError
from gpuarena.interop.flashinfer_trace import SafetensorsInput, TensorSpec

DATA_FILE = "flashinfer_inputs.json"
"""The file in an imported problem folder holding the workloads' safetensors inputs."""
DATA_FORMAT: Final = "gpuarena.flashinfer-inputs/1"
_HEADER_LIMIT = 100 << 20
_LFS_POINTER = b"version https://git-lfs.github.com/spec/v1"
_DTYPES = {
    "F64": "float64",
    "F32": "float32",
    "F16": "float16",
    "BF16": "bfloat16",
    "F8_E4M3": "float8_e4m3fn",
    "F8_E5M2": "float8_e5m2",
    "I64": "int64",
    "I32": "int32",
    "I16": "int16",
    "I8": "int8",
    "U8": "uint8",
    "BOOL": "bool",
}
"""safetensors dtype -> torch dtype name (others are refused by name)."""
_SIZES = {"float64": 8, "int64": 8, "float32": 4, "int32": 4, "float16": 2, "bfloat16": 2, "int16": 2}


class RecordedTensor(BaseModel):
    """One tensor of a safetensors file, its bytes as base64 (little-endian, row-major)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    dtype: str
    shape: list[int]
    data: str


class RecordedInputs(BaseModel):
    """flashinfer_inputs.json: the workloads' safetensors tensors, by file path (as the workload
    gives it) and tensor key."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    format: Literal["gpuarena.flashinfer-inputs/1"] = DATA_FORMAT
    tensors: dict[str, dict[str, RecordedTensor]] = {}


def dataset_roots(workloads_path: Path | str, dataset_root: Path | str | None = None) -> list[Path]:
    """Where a relative safetensors path is looked for, in order: the root given, else the data
    set's root (the parent of the nearest enclosing `workloads` folder, FlashInfer-Bench's
    layout); then the workloads file's folder."""
    folder = Path(workloads_path).resolve().parent
    roots = [Path(dataset_root).resolve()] if dataset_root is not None else []
    if dataset_root is None:
        roots += [p.parent for p in (folder, *folder.parents) if p.name == "workloads"][:1]
    return [*dict.fromkeys([*roots, folder])]


def _locate(source: SafetensorsInput, roots: list[Path], where: str, field: str) -> Path:
    path = Path(source.path)
    tried = [path] if path.is_absolute() else [root / path for root in roots]
    for candidate in tried:
        if candidate.is_file():
            return candidate
    raise FormatError(
        where,
        field,
        f"the safetensors file {source.path} is not found (looked for {', '.join(map(str, tried))})",
        "put the file under the data set's root (the folder holding workloads/), or give an absolute path",
    )


def _header(file: Path, where: str, field: str) -> tuple[dict[str, dict], int]:
    """The JSON header of a safetensors file and where its data starts."""
    with file.open("rb") as handle:
        head = handle.read(8)
        size = struct.unpack("<Q", head)[0] if len(head) == 8 else -1
        text = handle.read(size) if 0 < size <= _HEADER_LIMIT else b""
    try:
        header = json.loads(text.decode("utf-8")) if len(text) == size else None
    except (UnicodeDecodeError, json.JSONDecodeError):
        header = None
    if not isinstance(header, dict):
        with file.open("rb") as handle:
            lfs = handle.read(len(_LFS_POINTER)) == _LFS_POINTER  # FlashInfer-Bench pulls those on demand
        if lfs:
            raise FormatError(
                where, field, f"{file} is a Git LFS pointer, not its data", "fetch it with `git lfs pull`"
            )
        raise FormatError(where, field, f"{file} is not a safetensors file (its header does not read)")
    header.pop("__metadata__", None)
    return header, 8 + size


def read_tensor(
    source: SafetensorsInput, spec: TensorSpec, shape: list[int], roots: list[Path], where: str, field: str
) -> RecordedTensor:
    """The tensor a workload input names, checked against the definition's shape and dtype."""
    file = _locate(source, roots, where, field)
    header, start = _header(file, where, field)
    entry = header.get(source.tensor_key)
    if not isinstance(entry, dict):
        keys = ", ".join(sorted(header)) or "none"
        raise FormatError(where, field, f"{file} has no tensor {source.tensor_key!r} (its keys: {keys})")
    dtype = _DTYPES.get(str(entry.get("dtype")), str(entry.get("dtype")))
    got = list(entry.get("shape", []))
    if got != shape or dtype != spec.dtype:
        raise FormatError(
            where,
            field,
            f"tensor {source.tensor_key!r} of {file} is {got} {dtype}; the definition says {shape} {spec.dtype}",
            "give the tensor the definition's shape and dtype",
        )
    begin, end = entry["data_offsets"]
    count = 1
    for size in shape:
        count *= size
    if end - begin != count * _SIZES.get(dtype, 1):
        raise FormatError(where, field, f"tensor {source.tensor_key!r} of {file} has {end - begin} bytes, not {count}")
    with file.open("rb") as handle:
        handle.seek(start + begin)
        data = handle.read(end - begin)
    if len(data) != end - begin:
        raise FormatError(where, field, f"{file} ends inside tensor {source.tensor_key!r}")
    return RecordedTensor(dtype=dtype, shape=shape, data=base64.b64encode(data).decode("ascii"))
