"""Where the PM sampler's samples lie on the host's clock, so a segment of the audit is read
by its two instants instead of by two marks.

A mark is a decoding pass of the sampler's (1.4-1.6 ms on an H100 and an H200) with a settling
wait on each side (1 ms each): about a third of a small kernel's ranked verdict went to them
(GPU MODE's vectoradd: 0.75 s of marks and 0.35 s of waits in a 4.3 s record, H200). The
samples carry timestamps of their own, which on an H200 lie within about 0.1 ms of
CLOCK_REALTIME, steady over seconds (bench/research/pm_clock_probe.py): a window read between
two host instants, shifted by that offset, held the same busy time as the marks around the
same matmul burst, to 0.04%.

The offset is not taken on trust: each workload's audit measures it (`estimate`) from a burst of
known shape the supervisor runs alone on a quiet GPU (one SM spinning for about 0.5 ms after a
quiet lead-in, its kernel launched once before), read at both the burst's edges (on an H200 the
audits read offsets of 5-46 µs); anything that does not look like that burst leaves the audit on
marks. Segments are then spaced out by a guard (a sample's width and the offset's uncertainty) on
each side, so no sample that straddles a window's end holds work of either side.
"""

from __future__ import annotations

import statistics

BUSY_FRACTION = 0.02
"""A sample busier than this share of its span saw work."""
SPIN_FRACTION = 0.9
"""The burst's inner samples are at least this busy (one SM spinning throughout)."""
GUARD_EXTRA_NS = 40_000
"""The guard on each side of a window beyond one sample's width and half the burst's edges'
disagreement (`estimate`): a margin for the edges' reading."""
EDGES_APART_NS = 500_000
"""The offsets read at the burst's start and at its end (each less a latency) may differ by up to
this; half of it goes into the guard."""
LEAD_NS = 2_000_000
"""The quiet the burst must follow, in the samples: nothing else of anyone's ran just before (every sample of at
least half of it under BUSY_FRACTION busy). An offset read is therefore also the audit's quiet check
(rounds_audit.RoundsAudit.begin)."""
SPIN_CYCLES = 1_000_000
"""The burst: about 0.5 ms at an H200's boost clock."""


def estimate(samples: list[list[float]], host_start: int, host_end: int) -> tuple[int | None, int, str]:
    """The samples' clock less the host's (ns), the guard a window needs on each side (ns) and
    why there is no offset ('' if there is one; 'incomplete': the burst's end is not decoded
    yet, ask again), from the newest samples after the burst ran between two host instants.

    The burst is the newest busy run; its ends are read inside the edge samples (the spin keeps
    one SM busy all through, so an edge sample's busy time is the burst's part of it)."""
    ordered = sorted((s for s in samples if s[1] > s[0]), key=lambda s: s[0])
    if len(ordered) < 4:
        return None, 0, "too few samples"
    width = int(statistics.median(s[1] - s[0] for s in ordered))
    busy = [i for i, s in enumerate(ordered) if s[2] > BUSY_FRACTION * (s[1] - s[0])]
    if not busy:
        return None, 0, "the calibration burst was not seen"
    last = busy[-1]
    if last == len(ordered) - 1:
        return None, 0, "incomplete"
    first = last
    while first - 1 in busy:
        first -= 1
    run = ordered[first : last + 1]
    if len(run) < 2 or any(s[2] < SPIN_FRACTION * (s[1] - s[0]) for s in run[1:-1]):
        return None, 0, "the calibration burst was not one steady run"
    gpu_start = int(run[0][1]) - round(run[0][2])  # integers: nanoseconds since 1970 lose µs in a float
    gpu_end = int(run[-1][0]) + round(run[-1][2])
    host = host_end - host_start
    if not 0 < gpu_end - gpu_start <= host + width:
        return (
            None,
            0,
            f"the calibration burst read {(gpu_end - gpu_start) / 1e3:.0f} µs for {host / 1e3:.0f} µs on the host",
        )
    before = [s for s in ordered[:first] if s[1] > gpu_start - LEAD_NS]
    if (
        any(s[2] > BUSY_FRACTION * (s[1] - s[0]) for s in before)
        or not before
        or before[0][0] > gpu_start - LEAD_NS // 2
    ):
        return None, 0, "the GPU was not quiet before the calibration burst"
    # each edge gives the offset less a latency: the launch's at the start, the sync's return at
    # the end (80-125 µs together, H200); the truth lies between, so the midpoint is off by at
    # most half their difference, and the guard covers that. A first launch loads the kernel
    # (9 ms on an H200): far apart, the burst is not trusted
    at_start, at_end = gpu_start - host_start, gpu_end - host_end
    apart = at_start - at_end
    if not -GUARD_EXTRA_NS <= apart <= EDGES_APART_NS:
        return None, 0, f"the calibration burst's edges disagree by {apart / 1e3:.0f} µs"
    return (at_start + at_end) // 2, width + max(apart, 0) // 2 + GUARD_EXTRA_NS, ""
