"""Solution records: a manifest plus sources, frozen and identified by a content hash."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from functools import cached_property
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from gpuarena.contracts.records import Evaluation, Mode

Language = Literal["pytorch", "triton", "cuda", "jax", "tvm-ffi", "tilelang", "cute-dsl", "helion", "app", "sample"]

COMPILED_LANGUAGES = ("cuda", "tvm-ffi")
"""Languages built from C++/CUDA sources, whose entry point is a function the built module exports."""


class BuildOptions(BaseModel):
    """Compiler flags for compiled languages (passed to torch.utils.cpp_extension.load or tvm_ffi.cpp.load)."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, frozen=True)

    extra_cflags: list[str] = Field(default_factory=list)
    """Flags for the host C++ compiler."""
    extra_cuda_cflags: list[str] = Field(default_factory=list)
    """Flags for nvcc."""
    extra_ldflags: list[str] = Field(default_factory=list)
    """Flags for the linker."""


class SolutionManifest(BaseModel):
    """The contents of solution.toml."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, frozen=True)

    language: Language
    """pytorch, triton, jax, tilelang, cute-dsl, helion (Python files), cuda (C++/CUDA bound with torch's
    extensions), tvm-ffi (C++/CUDA bound with TVM-FFI), or app (a whole application ported to
    another stack, checked against a migration target's golden record: gpuarena.migration.target), or
    sample (a dataset sample's folder, checked by `gpuarena sample check` on a runner:
    gpuarena.dataset.sample_pack)."""
    entry_point: str = "solve"
    """Python: "file.py:function"; cuda and tvm-ffi: the function the built module exports."""
    sources: list[str] = Field(default_factory=list)
    """Files that make the solution, relative to its folder (default: all files)."""
    build: BuildOptions = Field(default_factory=BuildOptions)
    convention: Literal["return", "destination"] | None = None
    """How solve() hands back its outputs, where it differs from the problem's convention:
    "return" (it returns them) or "destination" (one tensor argument per output name, written
    into). Left out: the problem's. One problem thus serves both kinds of solution (FlashInfer-
    Bench's value-returning and destination-passing ones), each called as it was written: the
    harness passes destinations or takes the returned outputs, nothing is copied on its time."""

    @model_validator(mode="after")
    def _returns_where_it_must(self) -> SolutionManifest:
        if self.convention == "destination" and self.language in ("jax", "app", "sample"):
            raise ValueError(f"a {self.language} solution cannot take destinations: leave convention out")
        return self

    def convention_for(self, problem_convention: str) -> str:
        """The convention the solution is called in for a problem of `problem_convention`."""
        return self.convention or problem_convention


def unsafe_source_name(name: str) -> str:
    """Why a source file name cannot be used (empty when it can): names are paths relative to
    the solution's own folder, so nothing absolute, no '..', no odd characters."""
    if not name or len(name) > 255:
        return "must have 1 to 255 characters"
    if name.startswith("/") or "\\" in name:
        return "must be a path relative to the solution's folder, with '/' between folders"
    if any(part in ("", ".", "..") for part in name.split("/")):
        return "must not have empty, '.' or '..' parts"
    if not name.isprintable():
        return "must be printable text"
    return ""


class Solution(BaseModel):
    """A solution as the harness receives it: manifest and sources, nothing else."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, frozen=True)

    name: str
    """A human name (the file or folder it came from)."""
    manifest: SolutionManifest
    sources: dict[str, str]
    """File name -> text, for every file the solution consists of."""

    @model_validator(mode="after")
    def _valid(self) -> Solution:
        """Checked wherever a solution is made (CLI, API, web, runner), so bad input is refused
        at the door, never queued to fail on a runner."""
        if not self.sources:
            raise ValueError("a solution needs at least one source file")
        for name in self.sources:
            if why := unsafe_source_name(name):
                raise ValueError(f"source name {name!r} {why}")
        if self.manifest.language == "app":
            if self.manifest.entry_point != "app.toml" or "app.toml" not in self.sources:
                raise ValueError("an app port needs its app.toml among the sources (entry_point 'app.toml')")
        elif self.manifest.language == "sample":
            if self.manifest.entry_point != "sample.toml" or "sample.toml" not in self.sources:
                raise ValueError("a dataset sample needs its sample.toml among the sources (entry_point 'sample.toml')")
        elif self.manifest.language not in COMPILED_LANGUAGES:
            file, colon, function = self.manifest.entry_point.partition(":")
            if not colon or not function:
                raise ValueError(f"entry_point must be 'file.py:function', not {self.manifest.entry_point!r}")
            if file not in self.sources:
                raise ValueError(f"entry_point file {file!r} is not among the sources {sorted(self.sources)}")
            if not self.sources[file].strip():
                raise ValueError(f"{file} is empty")
        elif not any(text.strip() for text in self.sources.values()):
            raise ValueError("every source file is empty")
        return self

    def cuda_only(self) -> str:
        """Why the solution runs on a CUDA device only, or "" (TVM-FFI's builder, given a .cu
        file on a machine without a GPU, asked for TVM_FFI_CUDA_ARCH_LIST instead)."""
        if self.manifest.language == "cuda":
            return "a cuda solution runs on a CUDA device"
        cu = sorted(name for name in self.sources if name.endswith(".cu"))
        if cu and self.manifest.language in COMPILED_LANGUAGES:
            return f"{cu[0]} is CUDA code: a {self.manifest.language} solution with .cu sources runs on a CUDA device"
        return ""

    def record(self, problem: str, device: str, mode: Mode, **fields: Any) -> Evaluation:
        """A run's record of this solution on `problem` (an id), begun now: what every record
        begins with, whoever makes it (the supervisor, a refusal before judging, profile mode,
        a migration check, a sample's check); `fields` give the rest (`started_at`: when it began,
        if not now)."""
        fields.setdefault("started_at", dt.datetime.now(dt.UTC).isoformat(timespec="seconds"))
        return Evaluation(
            problem=problem,
            solution_hash=self.hash,
            solution_name=self.name,
            language=self.manifest.language,
            device=device,
            mode=mode,
            **fields,
        )

    @cached_property
    def hash(self) -> str:
        """SHA-256 over the manifest and the sources: the solution's identity and build-cache key.
        A convention left out is left out of the hash, so every solution hashed before the field
        existed keeps its identity."""
        unset = {"convention"} if self.manifest.convention is None else None
        manifest = self.manifest.model_dump(mode="json", exclude=unset)
        canonical = json.dumps(
            {"manifest": manifest, "sources": dict(sorted(self.sources.items()))},
            sort_keys=True,
            separators=(",", ":"),
        )
        return hashlib.sha256(canonical.encode()).hexdigest()


class PackedSolution(BaseModel):
    """What `gpuarena pack` writes: a solution in one JSON file, with its hash."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    format: Literal["gpuarena.solution/1"] = "gpuarena.solution/1"
    name: str
    manifest: SolutionManifest
    sources: dict[str, str]
    hash: str
    """SHA-256 of manifest and sources; checked when the pack is loaded."""
