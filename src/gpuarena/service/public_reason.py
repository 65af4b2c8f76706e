"""A verdict's reason as anyone may read it: the exception's type, never its message, where the
solution's own text is the reason. A COMPILE_ERROR quoted the source line the compiler stopped
at and a RUNTIME_ERROR carried the exception's message (an f-string of the code's values, an
assert's expression), shown to anonymous visitors and in results.csv while the code itself was
hidden. The harness's own reasons (a signal, a time limit, wrong values) quote no code and are
kept."""

from __future__ import annotations

import re

QUOTING = frozenset({"COMPILE_ERROR", "RUNTIME_ERROR"})
"""The verdicts whose reason may be the solution's own words."""
_EXCEPTION = re.compile(r"^(?P<type>[A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt|Warning|Failure))\b")
_WORKLOAD = re.compile(r"^(?P<prefix>workload [^:]+: )")


def public_reason(status: str, reason: str) -> str:
    """`reason` as shown to whoever may not read the solution's code (see the module)."""
    if status not in QUOTING or not reason:
        return reason
    prefix_match = _WORKLOAD.match(reason)
    prefix = prefix_match.group("prefix") if prefix_match else ""
    body = reason[len(prefix) :]
    types = [m.group("type") for line in body.splitlines() if (m := _EXCEPTION.match(line.strip()))]
    if types:
        return f"{prefix}{types[-1]} (its message is the author's: it may quote the hidden code)"
    if any(marker in body for marker in ('File "', "line ", "^", "error:")):
        return f"{prefix}{status.lower().replace('_', ' ')} (the compiler's or interpreter's words are the author's: they quote the hidden code)"
    return reason
