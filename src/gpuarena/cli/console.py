"""Where the commands print, and how they fail: shared by every command module (each imports
this, none imports another command module's helpers)."""

from __future__ import annotations

import os
import sys
from typing import NoReturn

import typer
from rich.console import Console
from rich.markup import escape

PIPED_WIDTH = 400
"""Tables printed to a pipe or a file are not cut to 80 columns: whatever reads them (a script,
a test, `| less -S`) gets whole cells. A terminal's own width, or COLUMNS, still wins."""


def _width() -> int | None:
    if sys.stdout.isatty() or os.environ.get("COLUMNS"):
        return None  # rich asks the terminal, or reads COLUMNS
    return PIPED_WIDTH


# markup off: what is printed holds names, paths and messages, whose [brackets] rich would eat;
# the few styled lines ask for it and escape what they interpolate. Messages are never broken
# into lines at the console's width (soft_wrap): the paths and tokens in them stay whole to copy
out = Console(markup=False, width=_width())
err = Console(stderr=True, markup=False, soft_wrap=True)


def fail(exc: Exception) -> NoReturn:
    """Say what went wrong on stderr and exit with status 2."""
    err.print(f"[bold red]error:[/] {escape(str(exc))}", markup=True, highlight=False)
    raise typer.Exit(2)
