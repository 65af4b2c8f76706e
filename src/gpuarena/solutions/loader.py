"""Turning a file, a folder or a packed JSON into a Solution."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path
from typing import Literal

import pydantic

from gpuarena.errors import FormatError
from gpuarena.solutions.model import PackedSolution, Solution, SolutionManifest
from gpuarena.solutions.readers import folder_reader, register, source_reader

MANIFEST_FILE = "solution.toml"
MAX_SOURCE_BYTES = 2_000_000
_IMPORTS_TRITON = re.compile(r"^\s*(import triton|from triton\b)", re.MULTILINE)
_IMPORTS_JAX = re.compile(r"^\s*(import jax\b|from jax\b)", re.MULTILINE)
_IMPORTS_TILELANG = re.compile(r"^\s*(import tilelang\b|from tilelang\b)", re.MULTILINE)
_IMPORTS_CUTE_DSL = re.compile(r"^\s*(import cutlass\b|from cutlass\b)", re.MULTILINE)
_IMPORTS_HELION = re.compile(r"^\s*(import helion\b|from helion\b)", re.MULTILINE)


def python_language(source: str) -> str:
    """A one-file solution's language, from what it imports: TileLang, else CuTe DSL (the
    `cutlass` package of nvidia-cutlass-dsl), else JAX (its solve() takes and returns JAX
    arrays, Pallas kernels included), else Helion (which compiles through Triton and may import
    it too), else Triton, else PyTorch."""
    if _IMPORTS_TILELANG.search(source):
        return "tilelang"
    if _IMPORTS_CUTE_DSL.search(source):
        return "cute-dsl"
    if _IMPORTS_JAX.search(source):
        return "jax"
    if _IMPORTS_HELION.search(source):
        return "helion"
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


def validated_solution(where: Path | str, hint: str, **fields: object) -> Solution:
    """Solution(**fields), its validation errors in a user's words (never pydantic's)."""
    try:
        return Solution(**fields)
    except pydantic.ValidationError as exc:
        message = str(exc.errors()[0]["msg"]).removeprefix("Value error, ")
        raise FormatError(where, None, message, hint) from None


def _from_python_source(filename: str, source: str) -> Solution:
    """A .py file as a solution, by the first source reader that accepts it (solutions/readers.py)."""
    return source_reader(filename, source).load(filename, source)


def adapted_solution(filename: str, source: str, adapter_file: str, adapter_text: str, hint: str) -> Solution:
    """A .py file in another project's format, run unmodified through an adapter beside it that
    defines solve() (a source reader's `load`: interop's KernelBench and GPU MODE readers)."""
    manifest = SolutionManifest(
        language=python_language(source), entry_point=f"{adapter_file}:solve", sources=[filename, adapter_file]
    )
    return validated_solution(
        filename,
        hint,
        name=Path(filename).stem,
        manifest=manifest,
        sources={filename: source, adapter_file: adapter_text},
    )


class NativeSourceReader:
    """Any .py file: solve() in it (tried last)."""

    kind: Literal["source"] = "source"
    name = "native"
    order = 1000

    def accepts(self, filename: str, source: str) -> bool:
        return True

    def load(self, filename: str, source: str) -> Solution:
        manifest = SolutionManifest(
            language=python_language(source), entry_point=f"{filename}:solve", sources=[filename]
        )
        return validated_solution(
            filename,
            "write solve() in it (`gpuarena new solution PROBLEM` writes one that passes)",
            name=Path(filename).stem,
            manifest=manifest,
            sources={filename: source},
        )


def from_folder(folder: Path) -> Solution:
    """A folder with solution.toml, named by the folder."""
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
    return validated_solution(
        manifest_path, "see docs/formats.md", name=folder.name, manifest=manifest, sources=sources
    )


class NativeFolderReader:
    """Any folder: solution.toml in it (tried last)."""

    kind: Literal["folder"] = "folder"
    name = "native"
    order = 1000

    def accepts(self, folder: Path) -> bool:
        return True

    def load(self, folder: Path) -> Solution:
        return from_folder(folder)


register(NativeSourceReader())
register(NativeFolderReader())


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
    solution = validated_solution(
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
    folder (app.toml, no solution.toml). Files and folders in other projects' formats are read
    by the readers registered (solutions/readers.py: import gpuarena.solution_readers first)."""
    path = Path(path)
    if path.is_dir():
        return folder_reader(path).load(path)
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
