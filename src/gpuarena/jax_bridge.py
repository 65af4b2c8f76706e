"""JAX beside PyTorch in one process: JAX configured for the harness's device, and arrays crossing
between the two through DLPack with no copy. Used by JAX solutions (solutions/runtimes.py) and
by problems whose reference is written in JAX (problems/loader.py)."""

from __future__ import annotations

import functools
import os
import warnings
from collections.abc import Callable
from typing import Any

import torch
from torch.utils._python_dispatch import _disable_current_modes

_started_on: str | None = None


def start(device: torch.device) -> None:
    """Bring JAX up on the device once per process, as the harness's own work."""
    global _started_on
    # JAX warns of a deadlock at every fork once its threads run; this process forks only through
    # subprocess, whose child execs at once and runs none of JAX's code (a worker, a runner's job).
    # Set at every call: whoever resets the warning filters (pytest does, test by test) loses it
    warnings.filterwarnings("ignore", message=r"os\.fork\(\) was called", category=RuntimeWarning)
    if _started_on is not None:
        return
    # no up-front grab of 75% of the GPU's memory (the other side of the run needs its share)
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    import jax
    import jax.numpy as jnp

    jax.config.update("jax_platforms", "cuda" if device.type == "cuda" else "cpu")
    if device.type == "cuda":
        # one GPU's context, not one on every GPU of the machine (other runs time there)
        jax.config.update("jax_cuda_visible_devices", str(device.index or 0))
    # float32 dot products and convolutions in float32, as PyTorch computes them by default: JAX's
    # default takes TF32 on recent NVIDIA GPUs, and two processes' autotuners pick different TF32
    # kernels, so a reference would disagree with itself beyond a float32 tolerance (a KerasHub
    # Llama layer did on an H100). A solution may still ask for less precision, op by op.
    jax.config.update("jax_default_matmul_precision", "highest")
    # the problem's dtypes cross intact (float64 and int64 inputs stay 64-bit)
    jax.config.update("jax_enable_x64", True)
    # on the CPU a computation runs inside the call that dispatches it, never on XLA's threads
    # after the call returned (the GPU's queue is drained by the caller's device sync)
    jax.config.update("jax_cpu_enable_async_dispatch", False)
    jax.devices()
    # the first compile and run start XLA's compile and execution threads, and a program
    # with a loop its parallel code generation's pool (llvm-worker-N); DLPack both ways.
    # The probe is a real tensor whatever mode the caller traces in: made under a FakeTensorMode
    # (a problem's fingerprint) it had no memory, and JAX read through its null pointer (SIGSEGV)
    with _disable_current_modes():
        probe = torch.ones(8, 8, device=device)
        looped = jax.jit(lambda a: jax.lax.fori_loop(0, 4, lambda i, acc: jnp.tanh(acc @ acc.T + i), a).sum(axis=-1))
        torch.from_dlpack(looped(jax.dlpack.from_dlpack(probe)))
        if device.type == "cuda":
            torch.cuda.synchronize(device)
    _started_on = str(device)


class NoData(TypeError):
    """A tensor without memory (a fake or meta tensor) cannot cross to JAX."""


def has_data(value: torch.Tensor) -> bool:
    """Whether the tensor has memory behind it: a fake tensor (shapes only, as a fingerprint's
    trace makes) or a meta tensor has none, and DLPack would hand JAX a pointer to nothing."""
    if type(value) is torch.Tensor:  # the timed path's case, checked in nanoseconds: fakes are a subclass
        return not value.is_meta
    from torch._subclasses.fake_tensor import is_fake

    return not value.is_meta and not is_fake(value)


def to_jax(value: Any) -> Any:
    """A torch tensor as a JAX array on the same memory; anything else as it is. A tensor
    without memory is refused (NoData): JAX would read through a null pointer and crash."""
    import jax.dlpack

    if not isinstance(value, torch.Tensor):
        return value
    if not has_data(value):
        raise NoData(
            f"a {type(value).__name__} on {value.device} has no memory: a JAX function runs on real arrays only "
            "(trace it with jax.make_jaxpr on shapes instead)"
        )
    return jax.dlpack.from_dlpack(value)


def to_torch(value: Any) -> Any:
    """A JAX array as a torch tensor on the same memory; anything else as it is."""
    return torch.from_dlpack(value) if hasattr(value, "__dlpack__") and not isinstance(value, torch.Tensor) else value


def torch_facing(function: Callable[..., Any]) -> Callable[..., Any]:
    """A JAX function called as a PyTorch one: torch tensors in (positional or by name), torch
    tensors out (a tuple stays a tuple), JAX started on the first tensor's device."""

    @functools.wraps(function)
    def call(*args: Any, **kwargs: Any) -> Any:
        first = next((v for v in (*args, *kwargs.values()) if isinstance(v, torch.Tensor)), None)
        start(first.device if first is not None else torch.device("cpu"))
        result = function(*(to_jax(a) for a in args), **{k: to_jax(v) for k, v in kwargs.items()})
        if isinstance(result, (tuple, list)):
            return tuple(to_torch(r) for r in result)
        return to_torch(result)

    return call
