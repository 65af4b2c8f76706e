"""A KernelBench solution file (a `ModelNew` module, often with CUDA through `load_inline`)
as a gpuarena solution, unmodified.

A one-file solution that defines `class ModelNew` and no `solve` gets a second source, the
adapter below, as its entry point (the reader below adds it wherever a .py file becomes a
solution: the CLI, uploads, packs; it registers itself with solutions/readers.py). The adapter runs in the worker like any solution code: it
imports the file, builds `ModelNew(*init_args)` once per workload, from the seed and the
`get_init_inputs()` values the problem passes in its last input (`kernelbench_init`, a plain
tuple, the same in every draw of a workload, with nothing secret in it: see
interop/kernelbench.py), seeded
as KernelBench's own eval seeds it, moves it to the inputs' device and dtype, and calls it on
the remaining inputs under `torch.no_grad()`. What it returns is judged like any solve()'s.

A level-4 ModelNew (a Hugging Face model) is built offline, from the transformers config the
problem passes, as the reference builds Model (interop/kernelbench_hf.py).

This module imports nothing heavy beyond solutions/ (the adapter is only text here).
"""

from __future__ import annotations

import re
from typing import Literal

from gpuarena.solutions.loader import adapted_solution
from gpuarena.solutions.model import Solution
from gpuarena.solutions.readers import register

ADAPTER_FILE = "kernelbench_adapter.py"
INIT_INPUT = "kernelbench_init"
"""The name of the last input of an imported KernelBench problem: how to build the module."""
INIT_FORMAT = "gpuarena.kernelbench-init/1"

_DEFINES_MODEL_NEW = re.compile(r"^class\s+ModelNew\b", re.MULTILINE)
_DEFINES_SOLVE = re.compile(r"^(async\s+)?def\s+solve\s*\(|^solve\s*=", re.MULTILINE)

_ADAPTER = """\
# gpuarena: adapter added by gpuarena (interop/kernelbench_solution.py) to a KernelBench
# solution file; not part of that file. It builds ModelNew as KernelBench's eval does
# (torch.manual_seed(seed), then ModelNew(*get_init_inputs()), then .to(device, dtype)),
# once per workload, and calls it on the problem's inputs.
import importlib.util as _util
import sys as _sys
from pathlib import Path as _Path

import torch

from gpuarena.interop.kernelbench_hf import decode_init as _decode_init
from gpuarena.interop.kernelbench_hf import offline_hub as _offline_hub

MODEL_FILE = {model_file!r}
_INIT_FORMAT = {init_format!r}
# a file using transformers (KernelBench level 4) builds its Hugging Face models offline, from
# the config the problem passes (gpuarena/interop/kernelbench_hf.py); any other, nothing patched
_HUB = "transformers" in (_Path(__file__).parent / MODEL_FILE).read_text(encoding="utf-8")

_spec = _util.spec_from_file_location("kernelbench_model_new_" + __name__, _Path(__file__).parent / MODEL_FILE)
_module = _util.module_from_spec(_spec)
_sys.modules[_spec.name] = _module  # as an import would (Triton and pickling look there)
with _offline_hub(enabled=_HUB):
    _spec.loader.exec_module(_module)
ModelNew = _module.ModelNew

_models = {{}}
_last = [None, None]  # (the init input last seen, its module): the timed calls' fast path


def _build(init, device, dtype):
    key = (repr(init), str(device), str(dtype))  # init args may hold lists (ResNet's `layers`)
    model = _models.get(key)
    if model is None:
        _, seed, init_args, sizes, _ = init
        forked = [device] if device.type == "cuda" else []
        with torch.random.fork_rng(devices=forked), torch.no_grad(), _offline_hub(dict(sizes), enabled=_HUB):
            torch.manual_seed(seed)
            model = ModelNew(*_decode_init(init_args))
            model = model.to(device=device, dtype=dtype)
        _models[key] = model
    return model


def solve(*args):
    if not args or not isinstance(args[-1], tuple) or len(args[-1]) != 5 or args[-1][0] != _INIT_FORMAT:
        raise TypeError(f"{{MODEL_FILE}} is a KernelBench solution (it defines ModelNew): it solves problems "
                        "imported with `gpuarena import kernelbench`, whose last input says how to build the model")
    *inputs, init = args
    if _last[0] is init:
        model = _last[1]
    else:
        tensors = [a for a in inputs if isinstance(a, torch.Tensor)]
        floating = [t for t in tensors if t.is_floating_point()]
        device = tensors[0].device if tensors else torch.device("cpu")
        dtype = floating[0].dtype if floating else getattr(torch, init[4])
        model = _build(init, device, dtype)
        _last[0], _last[1] = init, model
    with torch.no_grad():
        return model(*inputs)
"""


def is_model_new_file(source: str) -> bool:
    """Whether a one-file solution is a KernelBench `ModelNew` file rather than a solve()."""
    return bool(_DEFINES_MODEL_NEW.search(source)) and not _DEFINES_SOLVE.search(source)


def adapter_source(model_file: str) -> str:
    """The adapter's text for a ModelNew file of this name (beside it in the solution)."""
    return _ADAPTER.format(model_file=model_file, init_format=INIT_FORMAT)


class KernelBenchReader:
    """A KernelBench solution (class ModelNew, no solve): it runs unmodified, through an
    adapter beside it that builds the module once per workload (tried first)."""

    kind: Literal["source"] = "source"
    name = "kernelbench"
    order = 10

    def accepts(self, filename: str, source: str) -> bool:
        return is_model_new_file(source) and filename != ADAPTER_FILE

    def load(self, filename: str, source: str) -> Solution:
        return adapted_solution(
            filename,
            source,
            ADAPTER_FILE,
            adapter_source(filename),
            "a KernelBench solution defines class ModelNew(nn.Module)",
        )


register(KernelBenchReader())
