"""Errors a person sees: each names the file, the field and the fix."""

from __future__ import annotations

from pathlib import Path


class GpuarenaError(Exception):
    """Base class for errors meant to be shown to a user as they are."""


class FormatError(GpuarenaError):
    """A problem or solution file is malformed."""

    def __init__(self, path: Path | str, field: str | None, message: str, fix: str | None = None):
        self.path, self.field, self.problem, self.fix = str(path), field, message, fix
        where = f"{path}" + (f": field '{field}'" if field else "")
        text = f"{where}: {message}"
        if fix:
            text += f" (fix: {fix})"
        super().__init__(text)
