"""Migration targets on the service: a golden folder published as a problem of kind "app", and a
port submitted as a solution of language "app".

A golden folder found under a problem root (it holds golden.json, made by `gpuarena app record`)
becomes a problem whose slug is its path, like any problem folder. Its files travel to runners
inside the packed problem, base64-encoded (outputs are binary), under the same content hash that
versions problems; the runner writes them back and `load_golden` verifies every output's SHA-256
before a check. A port is its folder's text files, with app.toml among them.
"""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

from gpuarena.contracts.packed import MAX_PROBLEM_BYTES, PackedProblem, evaluation_hash
from gpuarena.errors import FormatError, GpuarenaError
from gpuarena.migration.golden import GOLDEN_FILE, load_golden
from gpuarena.migration.model import APP_FILE, AppError, load_app
from gpuarena.solutions.folder import SKIP_PARTS, text_files, write_files
from gpuarena.solutions.model import Solution, SolutionManifest

APP_KIND = "app"
"""The problem spec's "kind" for a migration target (kernel problems have none)."""
APP_LANGUAGE = "app"
"""The solution language of a port."""
MAX_PORT_BYTES = 2_000_000


def is_app(spec: dict[str, Any]) -> bool:
    """Whether a stored problem spec is a migration target."""
    return spec.get("kind") == APP_KIND


def reference_app_toml(files: dict[str, str]) -> str:
    """A stored target's reference app.toml (its files are kept base64-encoded): what ports are held to."""
    return base64.b64decode(files.get("app.toml", "")).decode("utf-8", "replace")


def discover_goldens(root: Path) -> list[tuple[str, Path]]:
    """(slug, folder) of every golden folder under root; the slug is the folder's path."""
    root = Path(root).resolve()
    found = []
    for marker in sorted(root.rglob(GOLDEN_FILE)):
        folder = marker.parent
        if SKIP_PARTS & set(folder.relative_to(root).parts):
            continue
        found.append((folder.relative_to(root).as_posix(), folder))
    return found


def target_spec(slug: str, folder: Path) -> dict[str, Any]:
    """The problem spec the service stores for a golden folder (after verifying it)."""
    golden, reference = load_golden(folder)
    summary = (
        f"Port the app {golden.app} to another stack: its {len(reference.outputs)} output(s) are compared "
        f"with the golden ones recorded on {golden.device} ({golden.environment.get('device_name', '?')}), "
        "and the port is scored by the ccf-migration rule (60 runs, 61-100 by output match, up to +50 "
        "for a measured speed-up)."
    )
    return {
        "kind": APP_KIND,
        "name": golden.app,
        "level": 4,
        "weight": 1.0,
        "summary": summary,
        "tags": ["migration"],
        "workloads": [],
        "golden_device": golden.device,
        "golden_environment": golden.environment,
        "outputs": [o.model_dump(mode="json") for o in reference.outputs],
        "performance": golden.performance.model_dump(mode="json") if golden.performance else None,
    }


def pack_golden(slug: str, folder: Path) -> PackedProblem:
    """The golden folder's files, base64-encoded, hashed as problems are."""
    files: dict[str, str] = {}
    total = 0
    for path in sorted(Path(folder).rglob("*")):
        if not path.is_file():
            continue
        text = base64.b64encode(path.read_bytes()).decode("ascii")
        total += len(text)
        if total > MAX_PROBLEM_BYTES:
            raise FormatError(
                folder,
                None,
                f"holds more than {MAX_PROBLEM_BYTES} bytes (base64)",
                "keep golden outputs small: a few tensors and values, not whole checkpoints",
            )
        files[path.relative_to(folder).as_posix()] = text
    return PackedProblem(id=slug, files=files, hash=evaluation_hash(files))


def unpack_golden(packed: PackedProblem, cache: Path) -> Path:
    """Write the golden folder under cache/<hash>/<id> and verify it (hashes of every output)."""
    if evaluation_hash(packed.files) != packed.hash:
        raise FormatError(packed.id, "hash", "does not match the files", "the golden record was altered in transit")
    folder = (Path(cache) / packed.hash / packed.id).resolve()
    if not folder.is_relative_to((Path(cache) / packed.hash).resolve()):
        raise FormatError(packed.id, "id", "is not a folder path", "use an id like migration/mlp")
    for relative, text in packed.files.items():
        target = (folder / relative).resolve()
        if not target.is_relative_to(folder):
            raise FormatError(packed.id, "files", f"path {relative!r} leaves the golden folder", "use relative paths")
        data = base64.b64decode(text)
        if not target.is_file() or target.read_bytes() != data:
            target.parent.mkdir(parents=True, exist_ok=True)
            if target.exists():
                target.chmod(0o600)
            target.write_bytes(data)
            target.chmod(0o444)  # golden files are never writable by the app
    load_golden(folder)
    return folder


def port_solution(folder: Path) -> Solution:
    """A port folder as a submission: its text files (app.toml among them), as language "app"."""
    folder = Path(folder)
    spec = load_app(folder)  # a bad app.toml is refused here, naming the field
    try:
        sources = text_files(folder, MAX_PORT_BYTES, "a port", "its app makes what it needs when it runs")
    except GpuarenaError as exc:
        raise AppError(str(exc)) from None
    return Solution(
        name=spec.name, manifest=SolutionManifest(language=APP_LANGUAGE, entry_point=APP_FILE), sources=sources
    )


def write_port(solution: Solution, folder: Path) -> Path:
    """Write a port's files into folder (new) and return it."""
    try:
        return write_files(solution.sources, folder, "the port")
    except GpuarenaError as exc:
        raise AppError(str(exc)) from None
