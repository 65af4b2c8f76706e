"""The bundled problems' canonical fingerprints, computed once and kept in the package.

Every sample check compares the sample's problem with the bundled ones (sample.find_duplicates),
and tracing the 23 bundled references afresh took 6-9 s of a 12-17 s check on a 2-core machine.
The figures depend only on a problem's files, the fingerprint code and the torch version, so
they are kept under those: a problem is looked up by its evaluation hash (its files, wherever the
folder was copied to), and the whole file is ignored where the code or torch's version differs
(then every fingerprint is taken afresh, as before). Problems written in JAX are not kept (their
fingerprints are JAX's). The file is read from the package, never from a problem root, so nothing
a sample sends can stand in for it. `scripts/keep_fingerprints.py` writes it under the torch that
scripts/setup.sh pins; a test checks that it still holds what a fresh trace gives.
"""

from __future__ import annotations

import hashlib
import json
from functools import cache
from pathlib import Path
from typing import Any

import torch

KEPT = Path(__file__).with_name("bundled_fingerprints.json")
SOURCES = ("fingerprint.py", "computation.py", "jax_fingerprint.py", "record.py")
"""The code a fingerprint comes from (dataset/): a change to any makes the kept file stale."""

Fingerprints = dict[str, Any]
"""A problem's workload -> its fingerprint (fingerprint.Fingerprint; nested tuples)."""


def code_key() -> str:
    """The fingerprint code the kept figures were taken with."""
    digest = hashlib.sha256()
    for name in SOURCES:
        digest.update(name.encode() + b"\0" + (Path(__file__).parent / name).read_bytes() + b"\0")
    return digest.hexdigest()


def torch_version() -> str:
    """The torch release the figures were traced under (its build, +cpu or +cu130, decomposes alike)."""
    return torch.__version__.split("+")[0]


def _tuples(value: Any) -> Any:
    """JSON's lists back to the tuples a fingerprint is made of (it holds tuples, str, int and bool only)."""
    return tuple(_tuples(v) for v in value) if isinstance(value, list) else value


@cache
def _kept() -> dict[str, Fingerprints]:
    """Problem hash -> its canonical fingerprints; empty where the file is missing or was taken otherwise."""
    try:
        data = json.loads(KEPT.read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict) or (data.get("code"), data.get("torch")) != (code_key(), torch_version()):
        return {}
    return {
        problem: {workload: _tuples(fp) for workload, fp in taken.items()}
        for problem, taken in data.get("problems", {}).items()
    }


def kept(problem_hash: str) -> Fingerprints | None:
    """The canonical fingerprints kept for the problem with these files, or None (take them afresh)."""
    return _kept().get(problem_hash)


def write(problems: dict[str, Fingerprints], path: Path | None = None) -> None:
    """Keep `problems` (problem hash -> canonical fingerprints) under this code and torch, in
    `path` (default: KEPT, read when called)."""
    data = {"code": code_key(), "torch": torch_version(), "problems": {h: problems[h] for h in sorted(problems)}}
    (path or KEPT).write_text(json.dumps(data, separators=(",", ":"), sort_keys=True) + "\n")
    _kept.cache_clear()
