"""What one workload takes of the device's memory in the supervisor's hands, planned before the
worker is asked to share its buffers (issue 47).

The supervisor draws a workload's first trial inputs and the reference's outputs on the device,
then allocates its rotating input sets and their destinations, and the correctness trials and
the timed rounds add copies of their own. On KernelBench-size problems (tensors of 6.4 GB) the
peak was about 15 tensors, and a workload too large for the GPU failed late, deep inside, with
torch's OutOfMemoryError: an honest solution was REJECTED for the machine's size. `plan` counts
each of those terms from one set's sizes, `fit` takes the most sets (up to the usual count)
that fit the free memory with `headroom` left over, and a workload that cannot fit even with
one set ends before it starts (`refusal`), with no verdict on the solution (Status.ERROR).

What is not counted, because the supervisor cannot know it ahead: the solution's own
workspace in the worker beyond the reference's (the plan counts that much: `plan`), and the
float64 computation of the correctness trials (bounded by correctness.FLOAT64_LEAST and the
device's budget; where it runs out of memory the record says so in `float64_skipped`,
precision.float64_reference). The headroom is for those, for the
drawing's temporaries and for the allocators' rounding."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import torch

from gpuarena.harness.compare import CHUNK
from gpuarena.harness.device import backend
from gpuarena.harness.device.backend_base import InputBudget
from gpuarena.harness.measure import CHECKED_PER_BLOCK
from gpuarena.harness.session import WorkloadSession, count_sets, input_bytes
from gpuarena.harness.transport import storage_numel

HEADROOM_SHARE = 0.05
"""The share of the device's total memory a plan leaves free,"""
HEADROOM_LEAST = 256 << 20
"""and at least this much."""
CHUNK_ARRAYS = 8
"""float64 arrays of a chunk live at once in the comparison (compare._chunk: the output's and
the reference's chunk, the difference, the sizes, the scores and their temporaries)."""
GIB = 1 << 30


@dataclass(frozen=True)
class MemoryPlan:
    """The supervisor's planned peak on the device for one workload, term by term."""

    n_sets: int
    terms: dict[str, int]
    """Bytes by name, of the phase whose sum is the larger (`phase`)."""
    phase: str
    """"correctness" or "timing": where the peak is."""
    free: int
    """Bytes free on the device for this workload (what it already holds counted back in)."""
    total: int
    headroom: int = field(default=0)

    @property
    def peak(self) -> int:
        return sum(self.terms.values())

    @property
    def fits(self) -> bool:
        return self.peak + self.headroom <= self.free

    def describe(self) -> str:
        """The terms in words, largest first (the log's line and the refusal's)."""
        parts = sorted(((b, name) for name, b in self.terms.items() if b), reverse=True)
        return ", ".join(f"{name} {gib(b)}" for b, name in parts)


def gib(n: int) -> str:
    return f"{n / GIB:.2f} GiB"


def plan(
    input_bytes: int,
    output_bytes: int,
    n_sets: int,
    free: int,
    total: int,
    *,
    timed: bool = True,
    twins: int = 0,
    worker_outputs: bool = True,
    output_elements: int | None = None,
    scratch: int = 0,
    worker_scratch: int | None = None,
) -> MemoryPlan:
    """The peak for n_sets sets of `input_bytes` (one set's input tensors) with outputs of
    `output_bytes` (the reference's, one set's), against `free` of `total` bytes.

    Both of a workload's phases hold its shared buffers, for every set:
    - sets: the input sets the worker reads (n_sets x inputs, the arena's);
    - destinations: the outputs the worker writes (n_sets x outputs, the arena's).
    The correctness trials (correctness.check_correctness) add
    - drawn inputs: the first trial's inputs, held through the trials, and the current trial's (2 x inputs);
    - reference outputs: the same two trials' reference outputs (2 x outputs).
    The timed rounds (measure.measure_workload) add instead
    - private copies: the supervisor's own copy of every set's inputs, and the fresh draw that
      replaces one while it is still held (measure.refresh_sets; (n_sets + 1) x inputs);
    - reference outputs: the expected outputs of a checked call (measure.check_outputs; 1 x outputs);
    - commit copies: the checked calls' outputs copied at the commit point
      (measure.CHECKED_PER_BLOCK x outputs);
    - twins' destinations: the reference's twins (twin.py: the CPU-time bound's, the device
      audit's two or three) keep destinations of their own for every set and a call's outputs
      (twins x (n_sets + 1) x outputs).
    Both add
    - supervisor's temporaries: `scratch`, the larger of what drawing a set and the reference's
      first call took past what they keep (measured where the device counts it; 0 otherwise):
      the timed rounds draw again;
    - worker's temporaries: `worker_scratch` (default `scratch`), the reference's call's alone,
      for the solution's own in the worker, which shares the device (an honest solution's are of
      the reference's order; it draws nothing). Without it, DeepSeek-V3's decoder layer at its
      published size planned to the headroom's edge and the supervisor ran out of an H200's
      memory while the worker held 7.06 GiB of its own (stop 69's suite run); counted as the
      drawing's too, the plan refused it (stop 70: 42.90 GiB, twice the drawn inputs: the draw
      held the whole set in float32, which the worker never makes; since stop 72 the layers'
      draw casts each tensor as drawn and the layer runs, 33.42 ms eager on an H200);
    - comparison chunks: compare.CHUNK elements of the largest output widened to float64,
      CHUNK_ARRAYS of them (`output_elements`; a whole chunk where not given);
    - worker's outputs: a solution that returns its outputs (the "return" convention) holds one
      call's in the worker before they are copied out (1 x outputs; worker_outputs=False for
      the "destination" convention).
    An untimed workload (timed=False) has only the correctness phase."""
    n = max(n_sets, 1)
    held = {"sets": n * input_bytes, "destinations": n * output_bytes}
    chunk = min(CHUNK, output_elements if output_elements is not None else CHUNK)
    both = {
        "supervisor's temporaries": scratch,
        "worker's temporaries": scratch if worker_scratch is None else worker_scratch,
        "comparison chunks": CHUNK_ARRAYS * 8 * chunk if output_bytes else 0,
        "worker's outputs": output_bytes if worker_outputs else 0,
    }
    correctness = held | {"drawn inputs": 2 * input_bytes, "reference outputs": 2 * output_bytes} | both
    timing = (
        held
        | {
            "private copies": (n + 1) * input_bytes,
            "reference outputs": output_bytes,
            "commit copies": CHECKED_PER_BLOCK * output_bytes,
            "twins' destinations": twins * (n + 1) * output_bytes,
        }
        | both
    )
    if timed and sum(timing.values()) > sum(correctness.values()):
        return MemoryPlan(n, timing, "timing", free, total, headroom(total))
    return MemoryPlan(n, correctness, "correctness", free, total, headroom(total))


def headroom(total: int) -> int:
    """What a plan leaves free of a device of `total` bytes."""
    return max(HEADROOM_LEAST, int(HEADROOM_SHARE * total))


def fit(n_sets: int, planned: Callable[[int], MemoryPlan]) -> MemoryPlan:
    """The plan (planned(n): `plan` for n sets) with the most sets, up to n_sets, that fits;
    the one-set plan (not `fits`) when none does."""
    for n in range(max(n_sets, 1), 1, -1):
        p = planned(n)
        if p.fits:
            return p
    return planned(1)


def for_draw(
    inputs: dict[str, Any],
    outputs: tuple[torch.Tensor, ...],
    n_sets: int,
    device: torch.device,
    *,
    timed: bool,
    twins: int,
    worker_outputs: bool,
    drawing: int = 0,
    calling: int = 0,
) -> MemoryPlan:
    """`fit` for a workload whose first trial's inputs and reference outputs are drawn (held now,
    so counted back into the free memory: the plan has them); `drawing` and `calling`: the
    temporaries (`scratch`) of that draw and of the reference's call."""
    in_bytes = tensor_bytes(v for v in inputs.values() if isinstance(v, torch.Tensor))
    out_bytes = tensor_bytes(outputs)
    largest = max((t.numel() for t in outputs), default=0)
    free, total = free_memory(device)
    return fit(
        n_sets,
        lambda n: plan(
            in_bytes,
            out_bytes,
            n,
            free + in_bytes + out_bytes,
            total,
            timed=timed,
            twins=twins,
            worker_outputs=worker_outputs,
            output_elements=largest,
            scratch=max(drawing, calling),
            worker_scratch=calling,
        ),
    )


def tensor_bytes(tensors: Iterable[torch.Tensor]) -> int:
    """Bytes the tensors' layouts span (a strided input's shared buffer spans its strides)."""
    return sum(storage_numel(t) * t.element_size() for t in tensors)


def refusal(p: MemoryPlan, device: object) -> str:
    """Why a workload cannot run on this device: the bytes it needs and the memory free."""
    return (
        f"too large for {device}: even with one input set the supervisor needs {gib(p.peak)} "
        f"at its peak ({p.phase}: {p.describe()}) and leaves {gib(p.headroom)} spare, "
        f"but only {gib(p.free)} of {gib(p.total)} is free here; no verdict on the solution"
    )


def ran_out(exc: BaseException, step: str, device: torch.device) -> str:
    """The reason for a workload the supervisor ran out of memory for while it prepared it."""
    try:
        free, total = free_memory(device)
        now = f"; {gib(free)} of {gib(total)} free after it"
    except Exception:  # the reason stands without the figures
        now = ""
    return (
        f"the supervisor ran out of memory on {device} {step} ({type(exc).__name__}: "
        f"{' '.join(str(exc).split())[:300]}){now}; no verdict on the solution"
    )


def free_memory(device: torch.device) -> tuple[int, int]:
    """(free, total) bytes of the device's memory (backend.device_memory: on a GPU the driver's
    figures with torch's cache given back first, on the host the memory available)."""
    return backend.device_memory(device)


def scratch_start(device: torch.device) -> None:
    """Start counting the reference's temporaries (`scratch`), where the device counts them."""
    backend.peak_from_now(device)


def scratch(device: torch.device) -> int:
    """What was allocated since `scratch_start` past what is held now: the temporaries of the
    drawing and of the reference's call (0 where the device does not count them)."""
    return backend.peak_past_held(device)


def out_of_memory(exc: BaseException) -> bool:
    """Whether exc is the device (or the host) running out of memory (backend.out_of_memory)."""
    return backend.out_of_memory(exc)


@dataclass
class Drawn:
    """A workload's first trial, drawn, planned and its buffers allocated (`draw_and_allocate`),
    or why not (`reason`: no verdict on the solution); `note` says where fewer sets were taken."""

    first: dict[str, Any] | None = None
    first_ref: tuple[torch.Tensor, ...] | None = None
    reason: str = ""
    note: str = ""
    plan: MemoryPlan | None = None
    """The plan that did not fit (None where the supervisor ran out of memory before one)."""


def draw_and_allocate(
    session: WorkloadSession,
    device: torch.device,
    *,
    timed: bool,
    input_budget: Callable[[], InputBudget],
    twins: int,
    returns: bool,
) -> Drawn:
    """The first trial's inputs and reference outputs drawn on the device itself (a meta-device
    draw cannot take the problem's generator, nor run every reference), the workload's memory
    planned from them (`for_draw`: fewer sets where fewer fit), and its shared buffers allocated.
    Running out of memory in any of it, or a plan that cannot fit, is the machine's answer, not a
    verdict. `input_budget`: the backend's room for input sets, read once the trial is drawn."""
    step = "drawing the inputs"
    try:
        scratch_start(device)
        first = session.make("trial", 0)
        drawing = scratch(device)
        step = "running the reference"
        scratch_start(device)  # the reference's own, which the worker's are of the order of
        first_ref = session.reference(first, session.call_seed("trial", 0))
        calling = scratch(device)
        step = "planning the shared buffers"
        n_sets = count_sets(input_budget(), input_bytes(first, first_ref)) if timed else 1
        sized = for_draw(
            first,
            first_ref,
            n_sets,
            device,
            timed=timed,
            twins=twins,
            worker_outputs=returns,
            drawing=drawing,
            calling=calling,
        )
        if not sized.fits:
            return Drawn(reason=refusal(sized, device), plan=sized)
        note = ""
        if sized.n_sets < n_sets:
            note = (
                f"{sized.n_sets} input set(s), not {n_sets}: {gib(sized.peak)} planned ({sized.describe()}) "
                f"of {gib(sized.free)} free"
            )
        step = "allocating the shared buffers"
        session.allocate(first, first_ref, sized.n_sets, n_checks=0)
        return Drawn(first, first_ref, note=note)
    except Exception as exc:
        if not out_of_memory(exc):
            raise
        return Drawn(reason=ran_out(exc, step, device))
