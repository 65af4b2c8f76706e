"""jax: a Python file that imports jax; solve() takes JAX arrays and returns new ones (Pallas
kernels included). XLA starts threads of its own: its runtime is started ahead (runtimes.py),
and the arrays cross from and to torch through DLPack (jax_bridge.py)."""

from __future__ import annotations

import functools
import inspect
from typing import TYPE_CHECKING, Any

from gpuarena.solutions.languages.base import Entry, Language, Package, SelfTest, build_python, register

if TYPE_CHECKING:
    import torch


def start(device: torch.device) -> None:
    from gpuarena.jax_bridge import start as start_jax

    start_jax(device)


def adapt(entry: Entry, destinations: list[str]) -> Entry:
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


SELF_TEST_PROGRAM = """\
import jax.numpy as jnp


def solve(a, b):
    return jnp.add(a, b)
"""

LANGUAGE = register(
    Language(
        name="jax",
        builder=build_python,
        package=Package("jax", "jax"),
        start=start,
        adapter=adapt,
        self_test=SelfTest({"solve.py": SELF_TEST_PROGRAM}),
    )
)
