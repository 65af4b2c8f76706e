"""A KernelBench file's forward as the import probes it (kernelbench_read._probe): on the meta
device past the scalars it reads, and on the CPU told apart where it draws random numbers.

The meta device has shapes but no values, so `.item()`, `bool(t)` and `x in t` raise there. A
Hugging Face model reads such scalars in checks that leave its output's shape alone (BART's,
BigBird's and Reformer's "is any token padding", the attention mask's "is every position
kept"), yet without them its outputs' size was unknown, and a CPU workload sized by its inputs
alone was over the cap by its outputs (a batch of 1024 of 32 tokens, logits of 512 each: 16M
elements). Each scalar read on meta is answered zero (False) instead: an estimate, so the sizes
found this way are confirmed by one forward on the CPU before they are kept.

A forward that draws from torch's generator and differs on each call (dropout, `torch.randn` of
an initial state, Reformer's LSH attention drawing its hash rotations anew) is judged with torch's
generators seeded before every call, the reference's and the solution's alike (the problem's
`seeded_calls`), where two seeded runs give the same bits: a solution that draws the same way
then gets the same numbers. (KernelBench's eval seeds once before Model's forward and ModelNew's
runs on the generator Model's left, so no solution can match such a file there.) One that still
differs when seeded draws from something else (another generator, the clock) and is refused
naming that cause, where the check would only have found the reference nondeterministic.

This module imports nothing heavy at import time: torch is imported where it is used.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator
from typing import Any


class RandomForward(RuntimeError):
    """A forward whose outputs change from call to call, drawing from torch's generator."""


@contextlib.contextmanager
def meta_scalars_as_zero(zeros: bool = True) -> Iterator[tuple[list[int], list[str]]]:
    """While inside, a scalar read from a meta tensor is 0 (False, 0.0) where `zeros`; yields the
    reads (one item per read) and the random operations called (drawing: draws_random)."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    reads: list[int] = []
    draws: list[str] = []
    local_scalar = torch.ops.aten._local_scalar_dense.default

    class _Zeros(TorchDispatchMode):
        def __torch_dispatch__(
            self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: dict[str, Any] | None = None
        ) -> Any:
            if draws_random(func, args, kwargs or {}):
                draws.append(str(func))
            if zeros and func is local_scalar and args[0].device.type == "meta":
                reads.append(1)
                tensor = args[0]
                return False if tensor.dtype is torch.bool else 0.0 if tensor.is_floating_point() else 0
            return func(*args, **(kwargs or {}))

    with _Zeros():
        yield reads, draws


DROPOUTS = {"native_dropout", "_fused_dropout"}
"""aten's dropouts, whose schema names no generator yet which draw from torch's when training
(their backward reads the mask drawn, and draws nothing)."""


def draws_random(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    """Whether an aten operation draws from torch's generator: one of its overloads takes a
    Generator (rand, randn, bernoulli, normal, uniform_, multinomial, randperm, ...: `randn(4)`
    is the overload without one, drawing from the default), or it is a dropout called to train.
    On the meta device nothing is drawn, but the call says the forward would."""
    packet = getattr(func, "overloadpacket", None)
    if packet is None:
        return False
    name = str(packet).split(".")[-1]
    if name in DROPOUTS:
        train = kwargs.get("train", args[2] if len(args) > 2 else True)
        return train is None or bool(train)
    return _takes_a_generator(packet)


@functools.cache
def _takes_a_generator(packet: Any) -> bool:
    overloads = (getattr(packet, name, None) for name in packet.overloads())
    return any(
        "Generator" in str(argument.type) for op in overloads if op is not None for argument in op._schema.arguments
    )


PROBE_SEED = 7
"""The seed of the two seeded runs that tell a forward drawing from torch's generator apart."""


def probed_forward(run: Callable[[], list[Any]], device: str, estimate: bool = False) -> tuple[list[Any], bool]:
    """run() (the forward's outputs, a list of tensors) and whether its calls must be seeded: on
    meta (with `estimate`, its scalar reads zero), where it calls a random operation (a GPU-sized
    file is probed there alone: the first GPU run's check confirms its draws are the generator's);
    on a real device, where it advanced torch's generator and a second run on the same inputs
    differs, two runs after the same seed must agree (seeded: True), else RandomForward (one that
    draws and discards needs no seed)."""
    import torch

    if device == "meta":  # no values to compare: a call of a random operation says it draws
        with meta_scalars_as_zero(zeros=estimate) as (_, draws):
            outputs = run()
        return outputs, bool(draws)
    state = torch.random.get_rng_state()
    outputs = run()
    if torch.equal(state, torch.random.get_rng_state()) or _same(outputs, run()):
        return outputs, False
    torch.manual_seed(PROBE_SEED)
    seeded = run()
    torch.manual_seed(PROBE_SEED)
    if _same(seeded, run()):
        return seeded, True
    raise RandomForward(
        "forward() differs from run to run on the same inputs even with torch's generators seeded "
        "before each: it draws from something gpuarena cannot seed (another generator, the clock)"
    )


def _same(outputs: list[Any], again: list[Any]) -> bool:
    """The same bits, NaN where NaN."""
    import torch

    return len(again) == len(outputs) and all(
        a.shape == b.shape and a.dtype == b.dtype and torch.allclose(a, b, rtol=0, atol=0, equal_nan=True)
        for a, b in zip(outputs, again)
    )
