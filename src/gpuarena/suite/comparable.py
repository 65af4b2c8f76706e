"""Whether two suite results can be scored one against the other, and why a problem is not scored.

A score across devices (a CPU against an H200) or across workload sets (a problem timed on its
small workload against the same problem on its model-sized one) measures the device or the sizes
as much as the code: `suite compare` refuses it unless asked (--across-devices,
--across-workloads), and says what differs. Every problem a comparison does not score is named
with its reason: nothing is dropped silently."""

from __future__ import annotations

from gpuarena.errors import GpuarenaError
from gpuarena.suite.model import ProblemTime, SuiteResult

SHOWN = 3
"""Problems named in a refusal before "and N more"."""


def device_of(r: SuiteResult) -> str:
    return f"{r.device} ({r.device_name})" if r.device_name and r.device_name != r.device else r.device


def device_differs(baseline: SuiteResult, result: SuiteResult) -> str | None:
    """What differs between the two results' devices (None: the same kind and name)."""
    if (baseline.device, baseline.device_name) == (result.device, result.device_name):
        return None
    return f"the baseline was timed on {device_of(baseline)} and the result on {device_of(result)}"


def _workload_sets(p: ProblemTime) -> set[str]:
    return set(p.workloads)


def workloads_differ(baseline: SuiteResult, result: SuiteResult) -> str | None:
    """The problems both timed on different workloads, named (None: every problem on the same
    ones). A problem whose file records no workloads (an old result) cannot differ."""
    base = {p.problem: p for p in baseline.problems}
    differing = []
    for p in result.problems:
        b = base.get(p.problem)
        if b is None or p.time_us is None or b.time_us is None or not p.workloads or not b.workloads:
            continue
        if _workload_sets(p) != _workload_sets(b):
            differing.append(
                f"{p.problem}: baseline {', '.join(sorted(b.workloads))}; result {', '.join(sorted(p.workloads))}"
            )
    if not differing:
        return None
    more = f"; and {len(differing) - SHOWN} more" if len(differing) > SHOWN else ""
    return f"{len(differing)} problem(s) were timed on other workloads ({'; '.join(differing[:SHOWN])}{more})"


def check_comparable(
    baseline: SuiteResult, result: SuiteResult, across_devices: bool = False, across_workloads: bool = False
) -> None:
    """Refuse a comparison across devices or workload sets unless asked, saying what differs and how
    to ask."""
    reasons = []
    devices = device_differs(baseline, result)
    if devices and not across_devices:
        reasons.append(f"{devices}: a score across devices measures the devices too (--across-devices scores it)")
    workloads = workloads_differ(baseline, result)
    if workloads and not across_workloads:
        reasons.append(f"{workloads}: their times are of other sizes (--across-workloads scores them)")
    if reasons:
        raise GpuarenaError("not compared: " + "; and ".join(reasons))


def missing_reason(name: str, baseline: SuiteResult, result: SuiteResult) -> str:
    """Why a problem of either side is not scored: the kind first (not in the baseline, not in the
    result, failed in the baseline, failed in the result, failed in both), then the detail."""
    b = next((p for p in baseline.problems if p.problem == name), None)
    r = next((p for p in result.problems if p.problem == name), None)
    if b is None or r is None:
        side, other = ("baseline", baseline) if b is None else ("result", result)
        why = other.left_out.get(name)
        return f"not in the {side}: {why}" if why else f"not in the {side}"
    failed = [(side, p) for side, p in (("baseline", b), ("result", r)) if p.time_us is None]
    if len(failed) == 2:
        return f"failed in both: baseline {_verdict(b)}; result {_verdict(r)}"
    side, p = failed[0]
    return f"failed in the {side}: {_verdict(p)}"


def _verdict(p: ProblemTime) -> str:
    reason = p.reason.strip().splitlines()[0][:200] if p.reason.strip() else ""
    return f"{p.status} ({reason})" if reason else p.status
