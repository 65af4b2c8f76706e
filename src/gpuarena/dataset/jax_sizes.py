"""Which numbers of a JAX reference are sizes, read from a second trace of the model at half its
sizes (issue 48).

A reference is traced at the model's shapes, so its primitives' parameters hold them (a
broadcast's `shape=(1, 2048, 1)`, a split's `sizes=(64, 64)`, a reshape's heads x head_dim) and
so do its literals (an RMSNorm's mean over 4096). A GPU harvest's problem is also checked on the
CPU at a smaller workload (`small_workload.scale_down`: every size over 32 divided by one factor), where
the recorded numbers contradict the inputs (stop 72: 12 of 81 problems, "Sum of sizes 128 must be
equal to dimension 3"). Which of them are sizes cannot be told from one trace: a layer's 32 heads
stay 32 at any width while its half head of 32 does not. The same layer traced at half the
model's widths, vocabulary, window and tokens tells: a number that halved is a size, and is written
as `S(n)`, which `jax_source._sizes` divides by the workload's factor at trace time; a number that
stayed is kept; a float that changed otherwise (an attention's scale, 1/sqrt(head_dim)) is kept
as recorded, a constant of the problem. Lines that differ in anything else are left unsized."""

from __future__ import annotations

import re

FACTOR = 2
"""The second trace's sizes: the model's, halved."""

NUMBER = re.compile(r"(?<![\w.'\"])(\d+(?:\.\d*)?(?:e[-+]?\d+)?)")
"""A number in a line of source: not part of a name (t12), a dtype's string or another number."""

SIZED = re.compile(r"\bS\((\d+)\)")
"""An integer size written through S (assemble reads them: the workload's factor must divide them)."""


def sized_lines(big: list[str], small: list[str], factor: int = FACTOR) -> list[str] | None:
    """big's lines with each number that is factor times small's at the same place written as
    S(number); None where the lines differ in anything but numbers, or an integer changed by
    another ratio (then a smaller workload has no consistent reading)."""
    if len(big) != len(small):
        return None
    lines = []
    for line, other in zip(big, small):
        parts, others = NUMBER.split(line), NUMBER.split(other)
        if len(parts) != len(others) or parts[0::2] != others[0::2]:
            return None
        written = []
        for k, (number, smaller) in enumerate(zip(parts, others)):
            if k % 2 == 0 or number == smaller:
                written.append(number)
            elif float(number) == float(smaller) * factor:
                written.append(f"S({number})")
            elif not number.isdigit():
                written.append(number)  # a float constant of the problem (a scale), kept as recorded
            else:
                return None
        lines.append("".join(written))
    return lines


def sizes_in(source: str) -> list[int]:
    """The integer sizes a reference writes through S."""
    return [int(n) for n in SIZED.findall(source)]
