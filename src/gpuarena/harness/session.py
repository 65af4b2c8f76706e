"""One workload's data on the supervisor's side: its inputs drawn from seeds the worker never
sees, the supervisor's private copy of them, the shared buffers the worker reads and writes,
and the reference's outputs. The supervisor, the timed rounds (measure.py) and ncu's phase
(kernel_duration.py) all work on a session; it lives below them so that they need not import
one another for it."""

from __future__ import annotations

import hashlib
from contextlib import nullcontext
from typing import Any

import torch

from gpuarena.contracts.records import Status
from gpuarena.harness import bitwise, precision
from gpuarena.harness.device import sample_clock
from gpuarena.harness.device.backend import backend_named
from gpuarena.harness.device.backend_base import InputBudget
from gpuarena.harness.failure import RunFailure
from gpuarena.harness.transport import SharedArena, storage_numel, strided, strided_layout
from gpuarena.problems.loader import Problem
from gpuarena.problems.model import Workload


def derive_seed(seed: int, *parts: Any) -> int:
    digest = hashlib.sha256(":".join(map(str, (seed, *parts))).encode()).digest()
    return int.from_bytes(digest[:8], "little") >> 1


def as_outputs(value: Any) -> tuple[torch.Tensor, ...]:
    return tuple(value) if isinstance(value, (tuple, list)) else (value,)


class WorkloadSession:
    """Inputs, shared buffers and reference outputs of one workload, all supervisor-side."""

    def __init__(
        self,
        problem: Problem,
        workload: Workload,
        device: torch.device,
        seed: int,
        arena: SharedArena,
        fresh_seed: int | None = None,
    ):
        """seed: the correctness trials' inputs; fresh_seed: every other draw's (the timed
        rounds', the audit's), secret to the worker in every mode."""
        self.problem, self.workload, self.device, self.seed, self.arena = problem, workload, device, seed, arena
        self.fresh_seed = seed if fresh_seed is None else fresh_seed
        self.input_names = problem.input_names
        self.sets: list[dict[str, Any]] = []
        self.private: list[dict[str, Any]] = []
        """The supervisor's own copy of what each shared input set must hold: inputs are
        compared with it bit for bit, and expected outputs are computed from it."""
        self.dests: list[list[torch.Tensor]] = []
        self.seeds: list[int] = []
        """Per set, the seed of the calls on its inputs now (call_seed), where the problem draws in
        its calls; empty otherwise."""
        self.checks: list[list[torch.Tensor]] = []
        self.handles: dict[str, Any] = {"sets": [], "dests": [], "checks": []}
        self.synchronize = backend_named(device.type).synchronize
        """Waits for the device's work (the device's backend)."""

    def make(self, *tag: Any) -> dict[str, Any]:
        """Fresh inputs from a seed derived from the run's seed: never sent to the worker."""
        seed = self.seed if tag and tag[0] == "trial" else self.fresh_seed
        generator = torch.Generator(device=self.device).manual_seed(derive_seed(seed, self.workload.name, *tag))
        inputs = self.problem.make_inputs(dict(self.workload.axes), self.workload.torch_dtype, self.device, generator)
        if not isinstance(inputs, dict) or list(inputs) != self.input_names:
            got = list(inputs) if isinstance(inputs, dict) else type(inputs).__name__
            raise RunFailure(
                Status.REJECTED, f"problem bug: make_inputs() returned {got}, expected keys {self.input_names}"
            )
        return inputs

    def call_seed(self, *tag: Any) -> int | None:
        """The seed of the calls on inputs drawn with `tag` (make's), where the problem draws random
        numbers in its calls (ProblemSpec.seeded_calls), else None: the worker seeds torch's
        generators with it before each call on that set, and the reference's outputs for those
        inputs are computed after the same."""
        if not self.problem.spec.seeded_calls:
            return None
        return derive_seed(
            self.fresh_seed if not tag or tag[0] != "trial" else self.seed, self.workload.name, "call", *tag
        )

    def reference(self, inputs: dict[str, Any], seed: int | None = None) -> tuple[torch.Tensor, ...]:
        """The reference's outputs for `inputs`, its call seeded with `seed` where one is given."""
        faithful = precision.full_float32() if self.problem.spec.faithful(self.workload.dtype) else nullcontext()
        if seed is not None:
            backend_named(self.device.type).seed(self.device, seed)
        with torch.no_grad(), faithful:
            outs = as_outputs(self.problem.reference(**inputs))
        if len(outs) != len(self.problem.spec.outputs):
            raise RunFailure(
                Status.REJECTED,
                f"problem bug: reference() returned {len(outs)} outputs, "
                f"problem.toml names {len(self.problem.spec.outputs)}",
            )
        return outs

    def allocate(self, example: dict[str, Any], ref: tuple[torch.Tensor, ...], n_sets: int, n_checks: int) -> None:
        """Shared buffers: n_sets input sets with their destinations, and check slots."""
        names = [name for name, value in example.items() if isinstance(value, torch.Tensor)]
        layouts = {name: strided_layout(example[name]) for name in names}  # strided inputs stay so
        specs = [
            ((storage_numel(example[name]),) if layouts[name] else tuple(example[name].shape), example[name].dtype)
            for name in names
        ]
        specs += [(tuple(r.shape), r.dtype) for r in ref]
        made = iter(self.arena.empty_many(specs * n_sets))  # one device allocation for them all
        for _ in range(n_sets):
            shared, handles = {}, {}
            for name, value in example.items():
                if isinstance(value, torch.Tensor):
                    layout = layouts[name]
                    shared[name], handles[name] = strided(next(made), layout) if layout else next(made)
                else:
                    shared[name] = handles[name] = value
            self.sets.append(shared)
            self.handles["sets"].append(handles)
            dest, dest_handles = zip(*(next(made) for _ in ref))
            self.dests.append(list(dest))
            self.handles["dests"].append(list(dest_handles))
        for _ in range(n_checks):
            slot, slot_handles = zip(*(self.arena.empty(r.shape, r.dtype) for r in ref))
            self.checks.append(list(slot))
            self.handles["checks"].append(list(slot_handles))

    def fill(self, k: int, inputs: dict[str, Any], *tag: Any) -> None:
        """Set k's shared inputs (drawn with `tag`, make's: its calls' seed follows from it)."""
        seed = self.call_seed(*tag)
        if seed is not None:
            self.seeds += [0] * (k + 1 - len(self.seeds))
            self.seeds[k] = seed
        for name, value in inputs.items():
            if isinstance(value, torch.Tensor):
                _written(self.sets[k][name]).copy_(_written(value))
            elif value != self.sets[k][name]:
                raise RunFailure(Status.REJECTED, f"problem bug: scalar input {name} changes between draws")
        while len(self.private) <= k:
            self.private.append({})
        self.private[k] = inputs

    def forget(self, k: int) -> None:
        """Let set k's private inputs go (fill gives it new ones): nothing checks them until then."""
        if k < len(self.private):
            self.private[k] = {}

    def modified_input(self) -> str | None:
        """The first input, over all sets, whose shared copy differs (bitwise) from the private
        one. Every comparison of small inputs is queued on the device first and read back once:
        one torch.equal per input waited for the device each time, for every input of 64 small
        sets, after every timed request of the solution."""
        names: list[str] = []
        differs: list[bool | torch.Tensor] = []
        for k in range(len(self.sets)):
            for name, value in self.private[k].items():
                if isinstance(value, torch.Tensor) and value.numel():
                    names.append(name)
                    differs.append(bitwise.differs(self.sets[k][name], value))
        if not differs:
            return None
        queued = {i: flag for i, flag in enumerate(differs) if isinstance(flag, torch.Tensor)}
        flags = [flag if isinstance(flag, bool) else False for flag in differs]
        if queued:  # the one wait for the device
            for i, value in zip(queued, torch.stack(list(queued.values())).tolist()):
                flags[i] = bool(value)
        return next((name for name, flag in zip(names, flags) if flag), None)

    def sync(self) -> None:
        self.synchronize(self.device)

    def spin(self) -> None:
        """One SM busy for about half a millisecond, then synced: the burst the device audit
        finds the samples' clock by (device/sample_clock.py)."""
        backend_named(self.device.type).spin(self.device, sample_clock.SPIN_CYCLES)


def poison(tensors: list[torch.Tensor]) -> None:
    for t in tensors:
        t.fill_(float("nan") if t.is_floating_point() else (True if t.dtype == torch.bool else -1))


def input_bytes(inputs: dict[str, Any], outputs: tuple[torch.Tensor, ...]) -> int:
    tensors = [v for v in inputs.values() if isinstance(v, torch.Tensor)] + list(outputs)
    return sum(storage_numel(t) * t.element_size() for t in tensors)


def _written(t: torch.Tensor) -> torch.Tensor:
    """The tensor with each broadcast dimension (stride 0) cut to one element: what a copy
    writes, since every element along such a dimension is one element of the buffer."""
    for dim, (size, stride) in enumerate(zip(t.shape, t.stride())):
        if stride == 0 and size > 1:
            t = t.narrow(dim, 0, 1)
    return t


FEW_SETS = 5
"""Sets a workload gets where the device has room for them, past the usual budget: a timed
request calls each set once, the rounds go on to 30 calls (the GPU's `min_samples`) and the
device audit samples at least 6 requests, so with 5 sets or more the rounds stop with the
audit's. With 2 sets of 1 GiB (a 65536 x 2048 float32 softmax) they ran 15 rounds instead
of 6, about 1 s more a workload on an H100."""


def count_sets(budget: InputBudget, set_bytes: int) -> int:
    """How many input sets to rotate through: enough that no timed call in a block sees an
    input another call saw, within the device's budget (Backend.input_budget); more of small
    sets where the budget asks for a block of `block_bytes`."""
    size = max(set_bytes, 1)
    n = budget.bytes // size
    if n < FEW_SETS:
        n = max(n, min(FEW_SETS, budget.room // size))
    n = min(budget.most, n)
    if budget.block_bytes:
        n = max(n, min(budget.many, budget.block_bytes // size))
    return max(2, n)
