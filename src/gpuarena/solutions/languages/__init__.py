"""The kernel languages, one module each, by the name solution.toml gives (issue 50). Each module
defines one `Language` (base.py: its builder, the package it needs, its runtime's start-up and
adapter, and its self-test program) and registers it; importing this package registers them all.
A new language is a new module here, listed below."""

from __future__ import annotations

from gpuarena.solutions.languages import cuda, cute_dsl, helion, jax, pytorch, tilelang, triton, tvm_ffi
from gpuarena.solutions.languages.base import BuildError, Language, Package, SelfTest, get, register, registered

MODULES = (pytorch, triton, cuda, jax, tvm_ffi, tilelang, cute_dsl, helion)
"""The language modules, in the order they are listed."""

__all__ = ["MODULES", "BuildError", "Language", "Package", "SelfTest", "get", "register", "registered"]
