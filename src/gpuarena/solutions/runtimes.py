"""The languages that run on a runtime of their own (JAX's XLA, TileLang's TVM, TVM-FFI's), and
what each needs: read from each language's record (solutions/languages/).

Runs in the worker only. Two things set these languages apart from PyTorch and Triton:
- their package may be missing on a machine: a solution then gets a COMPILE_ERROR that names
  the package to install, never an ImportError from deep inside the worker;
- a runtime may start threads of its own when it first meets a device (XLA starts about a dozen
  and more at its first compile). The supervisor rejects any thread that appears after the
  harness's own set-up, so `start` brings the runtime up as harness work, before any of the
  solution's code is imported, and the supervisor counts those threads as the harness's (the
  worker's `runtime` request). Whatever appears later is the solution's, as for every language.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from gpuarena.solutions import languages

if TYPE_CHECKING:
    import torch

STARTED_AHEAD = tuple(language.name for language in languages.registered() if language.start is not None)
"""Languages whose runtime the worker starts before the solution is imported."""


class MissingPackage(Exception):
    """The language's package is not installed where the worker runs."""


def require(language: str) -> None:
    """Raise MissingPackage, naming what to install, when the language's package is missing."""
    found = languages.get(language)
    package = found.package if found is not None else None
    if package is not None and not package.installed():
        raise MissingPackage(
            f"a {language} solution needs the Python package {package.distribution!r}, which is not installed "
            f"where the harness runs: pip install {package.distribution}"
        )


def describe(language: str) -> str | None:
    """The language's package and version, for the record ("jax 0.11.2"); None for languages
    that run on torch alone."""
    found = languages.get(language)
    package = found.package if found is not None else None
    if package is None:
        return None
    name = package.distribution
    for distribution in (name, *package.version_from):
        try:
            return f"{name} {importlib.metadata.version(distribution)}"
        except importlib.metadata.PackageNotFoundError:
            continue
    version = getattr(sys.modules.get(package.module), "__version__", None)
    return f"{name} {version}" if isinstance(version, str) else f"{name} (version unknown)"


def start(language: str, device: torch.device) -> None:
    """Bring the language's runtime up on the device, as the harness's own work: what it starts
    now is counted as the harness's."""
    require(language)
    found = languages.get(language)
    if found is None:
        return
    if found.start is not None:
        found.start(device)
    elif found.package is not None:
        importlib.import_module(found.package.module)


def adapt(language: str, entry: Callable[..., Any], destinations: list[str]) -> Callable[..., Any]:
    """The solution's entry as the harness calls every solution: torch tensors in, torch tensors
    out (or written into the destinations that follow the inputs)."""
    found = languages.get(language)
    if found is not None and found.adapter is not None:
        return found.adapter(entry, destinations)
    return entry
