"""The software stack a machine offers: the versions of Python, torch, numpy and the other
frameworks an app or a kernel may run on. Golden records keep it with their outputs; runners
advertise it with their device slots."""

from __future__ import annotations

import importlib.metadata
import platform

BASE_PACKAGES = ("torch", "numpy")
"""Always listed ("not installed" where absent)."""
STACK_PACKAGES = (
    "jax",
    "jaxlib",
    "transformers",
    "triton",
    "apache-tvm-ffi",
    "tilelang",
    "nvidia-cutlass-dsl",
    "vllm",
    "sglang",
    "paddlepaddle",
    "tensorflow",
)
"""Other frameworks, listed with their versions where installed: a port's stack is one of them."""


def versions() -> dict[str, str]:
    """python, the platform, the BASE_PACKAGES and the STACK_PACKAGES installed, with versions."""
    found = {"python": platform.python_version(), "platform": f"{platform.system()} {platform.machine()}"}
    for package in BASE_PACKAGES:
        try:
            found[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            found[package] = "not installed"
    for package in STACK_PACKAGES:
        try:
            found[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            pass
    return found
