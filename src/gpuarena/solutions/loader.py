"""Turning a file, a folder or a packed JSON into a Solution."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

import pydantic

from gpuarena.errors import FormatError
from gpuarena.solutions.model import PackedSolution, Solution, SolutionManifest

MANIFEST_FILE = "solution.toml"
MAX_SOURCE_BYTES = 2_000_000
_IMPORTS_TRITON = re.compile(r"^\s*(import triton|from triton\b)", re.MULTILINE)
_IMPORTS_JAX = re.compile(r"^\s*(import jax\b|from jax\b)", re.MULTILINE)
_IMPORTS_TILELANG = re.compile(r"^\s*(import tilelang\b|from tilelang\b)", re.MULTILINE)
_IMPORTS_CUTE_DSL = re.compile(r"^\s*(import cutlass\b|from cutlass\b)", re.MULTILINE)


def python_language(source: str) -> str:
    """A one-file solution's language, from what it imports: TileLang, else CuTe DSL (the
    `cutlass` package of nvidia-cutlass-dsl), else JAX (its solve() takes and returns JAX
    arrays, Pallas kernels included), else Triton, else PyTorch."""
    if _IMPORTS_TILELANG.search(source):
        return "tilelang"
    if _IMPORTS_CUTE_DSL.search(source):
        return "cute-dsl"
    if _IMPORTS_JAX.search(source):
        return "jax"
    return "triton" if _IMPORTS_TRITON.search(source) else "pytorch"


def _read_text(path: Path) -> str:
    if path.stat().st_size > MAX_SOURCE_BYTES:
        raise FormatError(
            path, None, f"is larger than {MAX_SOURCE_BYTES} bytes", "solutions are source code; keep them small"
        )
    try:
        return path.read_text()
    except UnicodeDecodeError:
        raise FormatError(path, None, "is not UTF-8 text", "solutions hold source files only") from None


def _from_file(path: Path) -> Solution:
    if path.suffix != ".py":
        raise FormatError(
            path, None, "a one-file solution must be a .py file", "use a folder with solution.toml for CUDA sources"
        )
    return _from_python_source(path.name, _read_text(path))


def _solution(where: Path | str, hint: str, **fields: object) -> Solution:
    """Solution(**fields), its validation errors in a user's words (never pydantic's)."""
    try:
        return Solution(**fields)
    except pydantic.ValidationError as exc:
        message = str(exc.errors()[0]["msg"]).removeprefix("Value error, ")
        raise FormatError(where, None, message, hint) from None


def _from_python_source(filename: str, source: str) -> Solution:
    from gpuarena.interop.kernelbench_solution import ADAPTER_FILE, adapter_source, is_model_new_file

    language = python_language(source)
    if is_model_new_file(source) and filename != ADAPTER_FILE:
        # a KernelBench solution (class ModelNew, no solve): it runs unmodified, through an
        # adapter beside it that builds the module once per workload (interop/kernelbench_solution.py)
        manifest = SolutionManifest(
            language=language, entry_point=f"{ADAPTER_FILE}:solve", sources=[filename, ADAPTER_FILE]
        )
        return _solution(
            filename,
            "a KernelBench solution defines class ModelNew(nn.Module)",
            name=Path(filename).stem,
            manifest=manifest,
            sources={filename: source, ADAPTER_FILE: adapter_source(filename)},
        )
    from gpuarena.interop import gpumode_solution

    if gpumode_solution.is_custom_kernel_file(source) and filename != gpumode_solution.ADAPTER_FILE:
        # a GPU MODE submission (custom_kernel(data), no solve): it runs unmodified, through an
        # adapter beside it that rebuilds `data` from the inputs (interop/gpumode_solution.py)
        adapter = gpumode_solution.ADAPTER_FILE
        manifest = SolutionManifest(language=language, entry_point=f"{adapter}:solve", sources=[filename, adapter])
        return _solution(
            filename,
            "a GPU MODE submission defines custom_kernel(data)",
            name=Path(filename).stem,
            manifest=manifest,
            sources={filename: source, adapter: gpumode_solution.adapter_source(filename)},
        )
    manifest = SolutionManifest(language=language, entry_point=f"{filename}:solve", sources=[filename])
    return _solution(
        filename,
        "write solve() in it (`gpuarena new solution PROBLEM` writes one that passes)",
        name=Path(filename).stem,
        manifest=manifest,
        sources={filename: source},
    )


def _from_folder(folder: Path) -> Solution:
    manifest_path = folder / MANIFEST_FILE
    if not manifest_path.is_file():
        raise FormatError(manifest_path, None, "not found", "a solution folder needs solution.toml (docs/formats.md)")
    try:
        manifest = SolutionManifest.model_validate(tomllib.loads(manifest_path.read_text()))
    except tomllib.TOMLDecodeError as exc:
        raise FormatError(manifest_path, None, f"is not valid TOML: {exc}", "fix the syntax") from None
    except pydantic.ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(x) for x in first["loc"])
        raise FormatError(manifest_path, field, first["msg"], "see docs/formats.md") from None
    names = manifest.sources or sorted(
        p.relative_to(folder).as_posix()
        for p in folder.rglob("*")
        if p.is_file() and p.name != MANIFEST_FILE and "__pycache__" not in p.parts
    )
    sources = {}
    for name in names:
        file = folder / name
        if not file.is_file():
            raise FormatError(manifest_path, "sources", f"lists {name!r}, which does not exist", "fix the list")
        sources[name] = _read_text(file)
    return _solution(
        manifest_path, "see docs/formats.md", name=_folder_name(folder), manifest=manifest, sources=sources
    )


IMPORTED_SIDECAR = "flashinfer.json"
"""What `gpuarena import flashinfer-solution` keeps beside an imported solution
(interop/flashinfer_sidecar.py's SIDECAR)."""


def _folder_name(folder: Path) -> str:
    """A solution folder's name: an imported FlashInfer-Trace solution keeps the name it was
    imported with (so its records' traces and `gpuarena export solution` name it alike, and
    FlashInfer-Bench links them); any other, the folder's."""
    if not (folder / IMPORTED_SIDECAR).is_file():
        return folder.name  # (interop's models, 90 ms of imports, only for an imported one)
    from gpuarena.interop.flashinfer_sidecar import read_solution_sidecar

    try:
        name = (read_solution_sidecar(folder) or {}).get("name")
    except FormatError:  # said where it matters: `gpuarena export solution`
        return folder.name
    return name if isinstance(name, str) and name else folder.name


def _from_pack(path: Path) -> Solution:
    return _from_pack_text(path, path.read_text())


def _from_pack_text(where: Path | str, text: str) -> Solution:
    try:
        packed = PackedSolution.model_validate_json(text)
    except pydantic.ValidationError as exc:
        first = exc.errors()[0]
        raise FormatError(
            where, ".".join(str(x) for x in first["loc"]), first["msg"], "repack with `gpuarena pack`"
        ) from None
    solution = _solution(
        where, "repack with `gpuarena pack`", name=packed.name, manifest=packed.manifest, sources=packed.sources
    )
    if solution.hash != packed.hash:
        raise FormatError(
            where,
            "hash",
            "does not match the manifest and sources (edited after packing?)",
            "repack with `gpuarena pack`",
        )
    return solution


def solution_from_upload(filename: str, data: bytes) -> Solution:
    """A solution sent as one file: solve() in a .py file, or a pack (.json)."""
    name = Path(filename).name or "solution.py"
    try:
        text = data.decode()
    except UnicodeDecodeError:
        raise FormatError(name, None, "is not UTF-8 text", "upload a .py file or a pack from `gpuarena pack`") from None
    if name.endswith(".json"):
        return _from_pack_text(name, text)
    if not name.endswith(".py") or not name.removesuffix(".py").isidentifier():
        raise FormatError(
            name,
            None,
            "an uploaded solution must be a .py file with a module-like name, or a pack (.json)",
            "rename it (e.g. solution.py) or pack a folder with `gpuarena pack`",
        )
    return _from_python_source(name, text)


def load_solution(path: Path | str) -> Solution:
    """Load a one-file solution, a folder with solution.toml, a packed .json, or a ported app's
    folder (app.toml, no solution.toml)."""
    path = Path(path)
    if path.is_dir():
        if not (path / MANIFEST_FILE).is_file() and (path / "app.toml").is_file():
            from gpuarena.apps.target import port_solution  # a ported app: its folder, as language "app"

            return port_solution(path)
        return _from_folder(path)
    if not path.is_file():
        raise FormatError(path, None, "not found", "give a .py file, a solution folder or a packed .json")
    if path.suffix == ".json":
        return _from_pack(path)
    return _from_file(path)


def pack(solution: Solution) -> str:
    """One JSON document holding the whole solution and its hash."""
    packed = PackedSolution(
        name=solution.name, manifest=solution.manifest, sources=solution.sources, hash=solution.hash
    )
    return json.dumps(packed.model_dump(mode="json"), indent=2)
