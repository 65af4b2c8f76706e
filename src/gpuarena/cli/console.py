"""Where the commands print, and how they fail: shared by every command module (each imports
this, none imports another command module's helpers)."""

from __future__ import annotations

import importlib.util
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


SERVER_INSTALL = "pip install 'gpuarena[server]'"
SERVER_MODULES = ("fastapi", "uvicorn", "sqlalchemy", "alembic", "itsdangerous", "markdown_it", "python_multipart")
"""The service's packages (pyproject.toml's `server` extra), by the module each installs: `pip
install gpuarena` leaves them out; the commands that run the service (serve, db, users, tokens)
need them, every other command imports none of them."""
_ALSO = {"python_multipart": ("multipart",)}  # python-multipart before 0.0.13


def _importable(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def server_missing(command: str, module: str) -> str:
    """What to say when a service command finds one of the service's packages missing."""
    return (
        f"`gpuarena {command}` runs the service, and the service's packages are not installed here "
        f"(no module named {module!r}): {SERVER_INSTALL}"
    )


def need_server(command: str) -> None:
    """Exit with status 2 and the line to install them where the service's packages are missing
    (checked without importing them)."""
    for module in SERVER_MODULES:
        if not any(_importable(name) for name in (module, *_ALSO.get(module, ()))):
            err.print(f"[bold red]error:[/] {escape(server_missing(command, module))}", markup=True, highlight=False)
            raise typer.Exit(2)
