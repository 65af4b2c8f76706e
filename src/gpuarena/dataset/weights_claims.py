"""Which recorded calls each harvest group stands for, and which of them it claims (the rule is
in dataset/weights.py's docstring).

A harvest keeps every aten call (profile.jsonl) and every module call with its span of calls
(modules.jsonl). An op group's calls are those with its key (harvest.call_key); a module group's
module calls those whose graph has its key (harvest.module_key). The recording's names of the
external tensors (the weights' names) are not kept, so the graphs are made again without them:
their inputs are named otherwise, alike for every call of the class, and the calls found are
checked against the group's recorded count and seconds. A JAX harvest keeps no module calls:
its scope's occurrences are contiguous runs of the trace with one body, so they are found as the
`calls` runs of one sequence of keys, starting at the group's first call, whose seconds add up to
the group's (or, in a scope whose runs are known, one at the same place in each of them).
Where neither finds them, the group claims its own time and covers nothing (the report says
so), unless a kept scope holds it by name (`.../self_attention/rotary_embedding` in
`.../self_attention`): then that scope claims its calls.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from gpuarena.dataset.graph import module_graph
from gpuarena.dataset.harvest import call_key, module_key
from gpuarena.dataset.record import CallRecord, ModuleCall

CLOSE = 1e-6
"""Relative tolerance on a group's seconds, summed again over the calls found for it."""


@dataclass
class Member:
    """A harvest group that stands for a kept problem of the dataset, with its calls."""

    group: dict[str, Any]
    """The group, as harvest.json has it."""
    problem: str
    level: int
    workload: str | None
    """The problem's workload that holds the group's shapes (None: none does)."""
    module: bool
    spans: list[tuple[int, int]] = field(default_factory=list)
    """Its calls (an op: one call each) or module calls, as [start, end) in the recording."""
    known: bool = False
    """Whether the spans were found (else it claims its own time, covering nothing)."""
    count: int = 0
    """Its calls over the recorded forwards."""
    us: float = 0.0
    """Microseconds a call: the suite's, or the harvest's own."""
    source: str = "harvest"
    recorded_us: float = 0.0
    """The harvest's own microseconds a call."""


def _close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=CLOSE, abs_tol=1e-12)


def find_ops(members: list[Member], calls: list[CallRecord]) -> None:
    """Each op member's calls: those with the key of its group's first call."""
    ops = {
        call_key(calls[m.group["first_call"]]): m
        for m in members
        if not m.module and m.group["first_call"] < len(calls)
    }
    for call in calls:
        found = ops.get(call_key(call))
        if found is not None:
            found.spans.append((call.index, call.index + 1))
    for m in ops.values():
        m.known = bool(m.spans)


def find_modules(
    members: list[Member], calls: list[CallRecord], modules: list[ModuleCall], forwards: int, seconds: list[float]
) -> None:
    """Each module member's module calls, by the key of their graphs (made again, see the
    module's docstring), else as runs of one sequence of calls (`runs`)."""
    wanted = [m for m in members if m.module]
    classes = {m.group["op"].removeprefix("module:") for m in wanted}
    keyed: dict[str, list[ModuleCall]] = {}
    for module in modules:
        if module.cls in classes:
            keyed.setdefault(module_key(module.cls, module_graph(calls, module, [])), []).append(module)
    for m in wanted:
        cls, first = m.group["op"].removeprefix("module:"), m.group["first_call"]
        found = [ms for ms in keyed.values() if ms[0].cls == cls and ms[0].start == first]
        spans = None
        for ms in sorted(found, key=lambda ms: len(ms) != max(1, m.group["calls"]) * forwards):
            candidate = [(x.start, x.end) for x in ms]
            if _close(sum(sum(seconds[s:e]) for s, e in candidate), m.group["seconds"]):
                spans = candidate
                break
        if spans:
            m.spans, m.known = spans, True
    keys = [call_key(c) for c in calls]
    for m in sorted((m for m in wanted if not m.known and calls), key=lambda m: m.group["op"].count("/")):
        count, total = max(1, m.group["calls"]) * forwards, m.group["seconds"]
        parents = [p for p in wanted if p.known and m.group["op"].startswith(p.group["op"] + "/")]
        parent = max(parents, key=lambda p: len(p.group["op"]), default=None)
        spans = within(parent.spans, seconds, m.group["first_call"], count, total) if parent else None
        spans = spans or runs(keys, seconds, m.group["first_call"], count, total)
        if spans:
            m.spans, m.known = spans, True


def within(
    outer: list[tuple[int, int]], seconds: list[float], first: int, count: int, total: float
) -> list[tuple[int, int]] | None:
    """A scope's occurrences, one at the same place in each occurrence of the scope holding it
    (a layer norm in each transformer layer), whose seconds add up to `total`."""
    if len(outer) != count or not outer[0][0] <= first < outer[0][1]:
        return None
    offset = first - outer[0][0]
    for length in range(1, outer[0][1] - first + 1):
        found = [(s + offset, s + offset + length) for s, e in outer if s + offset + length <= e]
        if len(found) == count and _close(sum(sum(seconds[a:b]) for a, b in found), total):
            return found
    return None


def runs(keys: list[str], seconds: list[float], first: int, count: int, total: float) -> list[tuple[int, int]] | None:
    """`count` runs of one sequence of keys, the first at `first`, none overlapping, whose
    seconds add up to `total`: a scope's occurrences in a trace (a JAX harvest's fusions). The
    shortest such sequence; None where there is none."""
    elapsed = 0.0
    for length in range(1, len(keys) - first + 1):
        elapsed += seconds[first + length - 1]
        if elapsed > total * (1 + CLOSE) + 1e-12:
            return None
        pattern = keys[first : first + length]
        found, j = [(first, first + length)], first + length
        while len(found) < count and j + length <= len(keys):
            if keys[j] == pattern[0] and keys[j : j + length] == pattern:
                found.append((j, j + length))
                j += length
            else:
                j += 1
        if len(found) == count and _close(sum(sum(seconds[s:e]) for s, e in found), total):
            return found
    return None


def claimed(members: list[Member], seconds: list[float], level: int | None = None) -> tuple[list[float], float]:
    """Each member's calls claimed (a fusion's call partly inside a larger one counts the share of
    its recorded seconds outside it), among the members of `level` (None: all); and the recorded
    seconds claimed. The members are a model-phase's."""
    chosen = [(k, m) for k, m in enumerate(members) if level is None or m.level == level]
    owned = bytearray(len(seconds))
    result = [0.0] * len(members)
    covered = 0.0
    spans = [(s, e, k, m) for k, m in chosen if m.module and m.known for s, e in m.spans]
    for s, e, k, _m in sorted(spans, key=lambda x: (x[0] - x[1], -x[3].level, x[2])):  # outermost first
        whole = sum(seconds[s:e])
        mine = [i for i in range(s, e) if not owned[i]]
        theirs = sum(seconds[i] for i in mine)
        result[k] += theirs / whole if whole > 0 else len(mine) / max(1, e - s)
        covered += theirs
        for i in mine:
            owned[i] = 1
    for k, m in chosen:
        if m.module and m.known:
            continue
        if not m.known:  # spans unknown: its own time, covering nothing, unless a scope holds it
            if not any(m.group["op"].startswith(o.group["op"] + "/") for _, o in chosen):
                result[k] += m.count
                covered += m.group["seconds"]
            continue
        for s, _e in m.spans:
            if not owned[s]:
                result[k] += 1
                covered += seconds[s]
                owned[s] = 1
    return result, covered
