"""The folder reader for a ported app (app.toml, no solution.toml): the folder as a solution of
language "app" (migration/target.py's port_solution). It registers itself with solutions/readers.py.

This module imports nothing heavy: migration/target.py (problems' packing, torch) loads only for a port.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from gpuarena.solutions.loader import MANIFEST_FILE
from gpuarena.solutions.model import Solution
from gpuarena.solutions.readers import register

PORT_FILE = "app.toml"
"""What marks a port's folder (migration/model.py's APP_FILE)."""


class PortReader:
    """A folder with app.toml and no solution.toml (tried first)."""

    kind: Literal["folder"] = "folder"
    name = "app"
    order = 10

    def accepts(self, folder: Path) -> bool:
        return not (folder / MANIFEST_FILE).is_file() and (folder / PORT_FILE).is_file()

    def load(self, folder: Path) -> Solution:
        from gpuarena.migration.target import port_solution  # a ported app: its folder, as language "app"

        return port_solution(folder)


register(PortReader())
