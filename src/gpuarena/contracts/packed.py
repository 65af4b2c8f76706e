"""A problem folder as data on the wire: its files as text and their hash, so a server can store it
and a runner on another machine can rebuild the exact folder it was given (problems/pack.py
packs and unpacks it). Here, apart from the problem loader, so a client that only sends and
reads jobs never imports torch."""

from __future__ import annotations

import hashlib
import json

from pydantic import BaseModel, ConfigDict

MAX_PROBLEM_BYTES = 4_000_000
"""The most text a problem folder may hold to be sent to a server and a runner."""


class PackedProblem(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, frozen=True)

    id: str
    """The problem's id (its folder path under the problem root, e.g. level1/softmax)."""
    files: dict[str, str]
    """Relative path -> text, for every file in the folder."""
    hash: str
    """SHA-256 over the files that decide evaluation (all but Markdown): the version's identity."""


def evaluation_hash(files: dict[str, str]) -> str:
    relevant = {path: text for path, text in sorted(files.items()) if not path.endswith(".md")}
    return hashlib.sha256(json.dumps(relevant, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
