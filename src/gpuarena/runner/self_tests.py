"""The languages' self-tests as a runner runs them when it starts (gpuarena/language_check.py):
once per device kind, on the kind's first healthy slot (each kind in a child process pinned to
its device, kinds in parallel), before the runner says hello. Each slot of the kind then carries
the outcome in its `software` ("self-test:triton": "passed", "failed: COMPILE_ERROR: ...",
"skipped: ..."), which the server shows with the runner, and the log has a line per language.

A language that failed is not refused: the claim names device kinds, not languages, and a job
given back would come straight back to the same runner. Its jobs run (and fail as the self-test
did, with the harness's own reason); the failure is in the log, the slot and a warning per job."""

from __future__ import annotations

import logging
import os
from concurrent.futures import ThreadPoolExecutor

from gpuarena.contracts.device import pinning
from gpuarena.contracts.wire import DeviceSlot
from gpuarena.language_check import SelfTestResult, self_tests

log = logging.getLogger("gpuarena.runner")
PREFIX = "self-test:"
"""The key of a language's outcome in a slot's software: "self-test:LANGUAGE"."""


def wanted() -> bool:
    """GPUARENA_RUNNER_SELF_TEST, on unless 0, false or no (the embedded runner of `serve`)."""
    return os.environ.get("GPUARENA_RUNNER_SELF_TEST", "1").strip().lower() not in ("0", "false", "no")


def run_self_tests(slots: list[DeviceSlot], names: list[str] | None = None) -> dict[str, list[SelfTestResult]]:
    """Every device kind's self-tests (of the languages named, default all), written into the
    software of every slot of that kind; the outcomes by kind."""
    first: dict[str, DeviceSlot] = {}
    for slot in slots:
        if slot.healthy:
            first.setdefault(slot.kind, slot)

    def run(slot: DeviceSlot) -> list[SelfTestResult]:
        device, pin = pinning(slot)
        return self_tests(slot.kind, device, names, env=pin)

    with ThreadPoolExecutor(max_workers=max(1, len(first))) as pool:
        outcomes = dict(zip(first, pool.map(run, first.values())))
    for kind, results in outcomes.items():
        for result in results:
            level = logging.WARNING if result.outcome == "failed" else logging.INFO
            took = " (kept from an earlier start)" if result.cached else f" in {result.duration_s:.1f} s"
            took = took if result.outcome != "skipped" else ""
            log.log(level, "self-test of %s on %s: %s%s", result.language, kind, result.summary(), took)
    for slot in slots:
        if slot.kind in outcomes:  # a new dict: advertise() gives every slot the same one
            slot.software = {**slot.software, **{PREFIX + r.language: r.summary() for r in outcomes[slot.kind]}}
    return outcomes


def failed(slot: DeviceSlot, language: str) -> str:
    """The slot's self-test failure of language ("" when it passed, was skipped or did not run)."""
    outcome = slot.software.get(PREFIX + language, "")
    return outcome if outcome.startswith("failed") else ""
