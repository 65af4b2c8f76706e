"""Where the commands print, and how they fail: shared by every command module (each imports
this, none imports another command module's helpers)."""

from __future__ import annotations

from typing import NoReturn

import typer
from rich.console import Console
from rich.markup import escape

# markup off: what is printed holds names, paths and messages, whose [brackets] rich would eat;
# the few styled lines ask for it and escape what they interpolate
out = Console(markup=False)
err = Console(stderr=True, markup=False)


def fail(exc: Exception) -> NoReturn:
    """Say what went wrong on stderr and exit with status 2."""
    err.print(f"[bold red]error:[/] {escape(str(exc))}", markup=True, highlight=False)
    raise typer.Exit(2)
