"""The languages that run on a runtime of their own (JAX's XLA, TileLang's TVM, TVM-FFI's), and
what each needs.

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

import functools
import importlib.metadata
import importlib.util
import inspect
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

PACKAGES: dict[str, tuple[str, str]] = {
    "jax": ("jax", "jax"),
    "tvm-ffi": ("tvm_ffi", "apache-tvm-ffi"),
    "tilelang": ("tilelang", "tilelang"),
    "cute-dsl": ("cutlass", "nvidia-cutlass-dsl"),
}
"""language -> (the module it imports, the package that provides it)."""

STARTED_AHEAD = ("jax", "tilelang", "cute-dsl")
"""Languages whose runtime the worker starts before the solution is imported."""

VERSION_FROM: dict[str, tuple[str, ...]] = {"cute-dsl": ("nvidia-cutlass-dsl-libs-base",)}
"""Distributions that carry the version where the named package is a meta-package that may be
absent (nvidia-cutlass-dsl's libraries installed without it)."""


class MissingPackage(Exception):
    """The language's package is not installed where the worker runs."""


def require(language: str) -> None:
    """Raise MissingPackage, naming what to install, when the language's package is missing."""
    if language not in PACKAGES:
        return
    module, package = PACKAGES[language]
    if importlib.util.find_spec(module) is None:
        raise MissingPackage(
            f"a {language} solution needs the Python package {package!r}, which is not installed "
            f"where the harness runs: pip install {package}"
        )


def describe(language: str) -> str | None:
    """The language's package and version, for the record ("jax 0.11.2"); None for languages
    that run on torch alone."""
    if language not in PACKAGES:
        return None
    module, package = PACKAGES[language]
    for distribution in (package, *VERSION_FROM.get(language, ())):
        try:
            return f"{package} {importlib.metadata.version(distribution)}"
        except importlib.metadata.PackageNotFoundError:
            continue
    version = getattr(sys.modules.get(module), "__version__", None)
    return f"{package} {version}" if isinstance(version, str) else f"{package} (version unknown)"


def start(language: str, device: torch.device) -> None:
    """Bring the language's runtime up on the device, as the harness's own work: what it starts
    now is counted as the harness's."""
    require(language)
    if language == "jax":
        _start_jax(device)
    elif language == "tilelang":
        _start_tilelang(device)
    elif language == "cute-dsl":
        _start_cute_dsl(device)
    elif language in PACKAGES:
        importlib.import_module(PACKAGES[language][0])


def _start_jax(device: torch.device) -> None:
    from gpuarena.jax_bridge import start as start_jax

    start_jax(device)


def _start_tilelang(device: torch.device) -> None:
    """TileLang starts TVM's threads when imported (about 15 on the lent H200) and one more with
    its first kernel: a tiny kernel is compiled and run here (about 3 s), on CUDA devices."""
    import tilelang
    import tilelang.language as T

    if device.type != "cuda":
        return

    @tilelang.jit(out_idx=[-1])
    def double(n: int):  # the smallest kernel that goes through TileLang's whole path
        # TileLang's DSL writes shapes as calls in annotations, which no type checker reads
        @T.prim_func
        def main(a: T.Tensor((n,), "float32"), b: T.Tensor((n,), "float32")):  # type: ignore[valid-type]
            with T.Kernel(1, threads=32) as _:
                for i in T.Parallel(n):
                    b[i] = a[i] * 2.0

        return main

    import torch

    double(32)(torch.ones(32, device=device))
    torch.cuda.synchronize(device)


def _start_cute_dsl(device: torch.device) -> None:
    """CuTe DSL (nvidia-cutlass-dsl) starts two threads with its first compile (seen on the lent
    H200): a one-block kernel is compiled and run here, on CUDA devices (cute_dsl_start.py)."""
    import cutlass  # noqa: F401  (the import alone on the CPU: CuTe DSL compiles for NVIDIA GPUs only)

    if device.type != "cuda":
        return
    from gpuarena.solutions import cute_dsl_start

    cute_dsl_start.start(device)


def adapt(language: str, entry: Callable[..., Any], destinations: list[str]) -> Callable[..., Any]:
    """The solution's entry as the harness calls every solution: torch tensors in, torch tensors
    out (or written into the destinations that follow the inputs)."""
    if language == "jax":
        return _jax_entry(entry, destinations)
    return entry


def _jax_entry(entry: Callable[..., Any], destinations: list[str]) -> Callable[..., Any]:
    """A JAX function takes JAX arrays and returns new ones: inputs cross through DLPack with no
    copy, outputs come back the same way; where the problem passes destinations, the returned
    arrays are copied into them inside the call (the solution's cost, as it would be in JAX)."""
    from gpuarena.jax_bridge import to_jax, to_torch

    count = len(destinations)

    @functools.wraps(entry)
    def solve(*args: Any) -> Any:
        inputs, outs = (args[:-count], args[-count:]) if count else (args, ())
        result = entry(*(to_jax(a) for a in inputs))
        several = isinstance(result, (tuple, list))
        back = [to_torch(r) for r in (result if several else [result])]
        if not count:
            return tuple(back) if several else back[0]
        if len(back) != count:
            raise ValueError(
                f"solve() returned {len(back)} arrays; the problem has {count} outputs ({', '.join(destinations)})"
            )
        for dest, value in zip(outs, back):
            dest.copy_(value)
        return None

    if count:  # the harness's signature check sees the inputs, then the destinations it passes
        try:
            params = list(inspect.signature(entry).parameters.values())
        except (TypeError, ValueError):  # a callable with no signature: called positionally, unchecked
            del solve.__wrapped__
            return solve
        params += [inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD) for name in destinations]
        solve.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    return solve
