"""KernelBench into gpuarena, a CPU workload: the file's sizes halved until its inputs, outputs
and parameters are under the CPU's caps (kernelbench_read.CPU_MAX_ELEMENTS, CPU_MAX_PARAMETERS),
for interop/kernelbench.py."""

from __future__ import annotations

from collections.abc import Callable

from gpuarena.interop.kernelbench_hf import hub_axes
from gpuarena.interop.kernelbench_read import (
    MIN_SHRINK,
    RandomForwardError,
    _batch_like,
    _File,
    _input_load,
    _load,
    _probe,
)


def _halved(
    sizes: dict[str, int],
    load: Callable[[dict[str, int]], float | None],
    batch_first: bool = False,
    together: bool = False,
) -> dict[str, int] | None:
    """Sizes halved one at a time (the largest first; `batch_first`: a batch's before any), else
    equal sizes together (HingeLoss's [batch, n] * [batch] broadcasts only while batch == n),
    while `load(sizes)` is over 1, each step one that `load` still takes (not None) and lowers;
    None where no step is left, or the sizes as given do not load. `together`: every size that
    halves is halved at each step, so sizes keep their ratios (see small_sizes)."""
    current, now = dict(sizes), load(dict(sizes))
    while now is not None and now > 1:
        order = sorted(current.items(), key=lambda item: (batch_first and not _batch_like(item[0]), -item[1]))
        ones = [[n] for n, v in order if v >= MIN_SHRINK or (_batch_like(n) and v > 1)]
        values = sorted((v for v in set(current.values()) if v >= MIN_SHRINK), reverse=True)
        tied = [group for v in values if len(group := [n for n in current if current[n] == v]) > 1]
        groups = [[n for one in ones for n in one]] if together else ones + tied
        steps = ({**current, **{n: current[n] // 2 for n in names}} for names in groups)
        step = next(((c, smaller) for c in steps if (smaller := load(c)) is not None and smaller < now), None)
        if step is None:
            return None
        current, now = step
    return None if now is None else current


def small_inputs(file: _File) -> dict[str, int] | None:
    """Sizes for a CPU workload of a model whose forward cannot run on meta (Swin's `.item()`):
    halved (the batch first: only the forward says which other sizes keep the model valid) under
    the caps as a meta forward with its scalars read as zero estimates them (kernelbench_forward:
    BART's logits are over the cap, not its tokens), or else get_inputs() alone on meta; then one
    CPU forward at those sizes, which must fit both caps; None where that fails."""
    fixed = hub_axes(file.hub, cpu=True)  # a hub model's CPU sizes: its weights fit the cap
    free = {name: value for name, value in file.sizes.items() if name not in fixed}
    estimate = _load(file, {**free, **fixed}, estimate=True) is not None
    load = (lambda s: _load(file, s, True)) if estimate else (lambda s: _input_load(file, s))
    found = _halved(free, lambda sizes: load({**sizes, **fixed}), batch_first=True)
    if found is None:
        return None
    current = {name: {**found, **fixed}[name] for name in file.sizes}
    try:
        return current if _probe(file, current, "cpu").fits_the_cpu() else None
    except RandomForwardError:  # the forward's own fault, said as it is
        raise
    except Exception:  # the model fails at these sizes: no CPU workload (a CPU run says why)
        return None


def small_sizes(file: _File, shrink_hub: bool = False, together: bool = False) -> dict[str, int] | None:
    """Sizes for a CPU workload: halve the largest size that still gives a valid model, until
    the workload is under the CPU's caps (_Probe.fits_the_cpu); None where no such sizes were found.
    A hub model's config sizes are not halved: they stay as published, or (shrink_hub, where its
    weights alone are over the cap) take their CPU values, the same architecture smaller.
    `together`: every size halved at each step, for a file whose sizes halved one at a time lose
    a ratio the computation needs (level2/75's 8192 features in 512 groups became 1024 in 512:
    groups of two, normalised to -1 and 1, whose minimum no longer depends on the input)."""
    fixed = hub_axes(file.hub, cpu=shrink_hub)
    free = {name: value for name, value in file.sizes.items() if name not in fixed}
    found = _halved(free, lambda sizes: _load(file, {**sizes, **fixed}), together=together)
    return None if found is None else {name: {**found, **fixed}[name] for name in file.sizes}
