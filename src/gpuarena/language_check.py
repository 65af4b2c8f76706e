"""The languages' self-tests (issue 50, after DMOJ judge-server's executors and their
`test_program`): each language's tiny program (solutions/languages/, `SelfTest`) judged on a
tiny bundled problem by the real harness, in test mode, on one device. A runner runs them when
it starts, once per device kind, and shows the outcome in its slots (runner/agent.py);
`gpuarena languages --self-test` runs them by hand.

An outcome that passed is kept in gpuarena's cache, keyed by the software stack (gpuarena,
Python, torch and the languages' packages, with versions), the program and the device kind, so a
restart does not pay again; a failure is tried again at the next start. Torch-free until a test
runs: the runner reads the cache and skips what it can without starting anything."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Literal

from gpuarena import __version__
from gpuarena.cache import cache_dir
from gpuarena.solutions import languages
from gpuarena.solutions.languages import Language

Outcome = Literal["passed", "failed", "skipped"]
TIMEOUT_S = 120.0
"""The solution's limit in one self-test (the worker's start-up has its own)."""
PROCESS_TIMEOUT_S = 600.0
"""For the child process that runs a device's self-tests, per language it runs."""


@dataclass(frozen=True)
class SelfTestResult:
    language: str
    device: str
    outcome: Outcome
    reason: str = ""
    """Why it failed or was skipped."""
    duration_s: float = 0.0
    cached: bool = False
    """Passed at an earlier start with the same software and program, and not run again."""

    def summary(self, limit: int = 200) -> str:
        """The outcome and its reason ("failed: WRONG_VALUES: ..."), at most limit characters."""
        text = f"{self.outcome}: {self.reason}" if self.reason else self.outcome
        return text if len(text) <= limit else text[: limit - 3] + "..."


def _language(language: str | Language) -> Language:
    if isinstance(language, Language):
        return language
    found = languages.get(language)
    if found is None:
        raise ValueError(f"{language!r} is not a registered language")
    return found


def why_skipped(language: str | Language, device: str) -> str:
    """Why the language's self-test cannot run on this device here ("" when it can)."""
    found = _language(language)
    test, device_type = found.self_test, device.partition(":")[0]
    if device_type not in test.devices:
        return f"runs on {', '.join(test.devices)} only"
    if found.package is not None and not found.package.installed():
        return f"{found.package.distribution} is not installed"
    return test.unavailable(device_type) if test.unavailable is not None else ""


def self_test(language: str | Language, device: str = "cpu", timeout_s: float = TIMEOUT_S) -> SelfTestResult:
    """Judge the language's self-test program with the real harness (test mode, one workload)."""
    found = _language(language)
    skipped = why_skipped(found, device)
    if skipped:
        return SelfTestResult(found.name, device, "skipped", skipped)
    from gpuarena.harness.judge import RunOptions, evaluate
    from gpuarena.problems import resolve_problem
    from gpuarena.solutions.model import Solution, SolutionManifest

    test = found.self_test
    began = time.monotonic()
    try:
        solution = Solution(
            name=f"self-test-{found.name}",
            manifest=SolutionManifest(language=found.name, entry_point=test.entry_point),
            sources=test.sources,
        )
        options = RunOptions(device=device, mode="test", workloads=[test.workload], timeout_s=timeout_s, trials=1)
        record = evaluate(resolve_problem(test.problem), solution, options)
    except Exception as exc:  # the harness itself failed: the language does not work here either
        return SelfTestResult(found.name, device, "failed", f"{type(exc).__name__}: {exc}", time.monotonic() - began)
    took = time.monotonic() - began
    if record.status == "PASSED":
        return SelfTestResult(found.name, device, "passed", duration_s=took)
    reason = " ".join(f"{record.status.value}: {record.reason}".split())
    return SelfTestResult(found.name, device, "failed", reason, took)


def cache_key(language: str | Language, kind: str) -> str:
    """The software stack, the program and the device kind the outcome holds for."""
    from gpuarena.stack import versions

    found = _language(language)
    test = found.self_test
    program = [sorted(test.sources.items()), test.entry_point, test.problem, test.workload]
    described = {"gpuarena": __version__, "stack": versions(), "language": found.name, "program": program}
    text = json.dumps({**described, "kind": kind}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def _cached_path(language: str, kind: str) -> Path:
    return cache_dir() / "self-tests" / f"{cache_key(language, kind)}.json"


def cached(language: str | Language, kind: str, device: str) -> SelfTestResult | None:
    """The outcome kept from an earlier start where it passed, if the stack is still the same."""
    path = _cached_path(_language(language).name, kind)
    try:
        kept = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if kept.get("outcome") != "passed":
        return None
    return SelfTestResult(kept["language"], device, "passed", duration_s=kept.get("duration_s", 0.0), cached=True)


def keep(result: SelfTestResult, kind: str) -> None:
    """Keep a passed outcome for the next start (a failure is tried again)."""
    if result.outcome != "passed":
        return
    path = _cached_path(result.language, kind)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(f".{os.getpid()}.tmp")
        partial.write_text(json.dumps(asdict(result)))
        partial.replace(path)
    except OSError:  # a cache that cannot be written: the next start runs it again
        pass


def self_tests(
    kind: str, device: str, names: list[str] | None = None, env: dict[str, str] | None = None, fresh: bool = False
) -> list[SelfTestResult]:
    """Every registered language's self-test (or those named) on device (a kind's first slot):
    skipped where it cannot run here, from the cache where it passed before (unless fresh), the
    rest in one child process with env (the slot's pinning) so that nothing here touches a GPU."""
    chosen = [_language(n) for n in names] if names is not None else languages.registered()
    results: dict[str, SelfTestResult] = {}
    to_run: list[str] = []
    for found in chosen:
        skipped = why_skipped(found, device)
        kept = None if skipped or fresh else cached(found, kind, device)
        if skipped:
            results[found.name] = SelfTestResult(found.name, device, "skipped", skipped)
        elif kept is not None:
            results[found.name] = kept
        else:
            to_run.append(found.name)
    if to_run:
        for result in _in_child(to_run, device, env):
            keep(result, kind)
            results[result.language] = result
    return [results[found.name] for found in chosen]


def _in_child(names: list[str], device: str, env: dict[str, str] | None) -> list[SelfTestResult]:
    command = [sys.executable, "-m", "gpuarena.language_check", device, *names]
    try:
        done = subprocess.run(
            command,
            env={**os.environ, **(env or {})},
            capture_output=True,
            text=True,
            timeout=PROCESS_TIMEOUT_S * len(names),
        )
        lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
        found = [SelfTestResult(**json.loads(line)) for line in lines]
    except subprocess.TimeoutExpired:
        found, why = [], f"the self-test process did not finish within {PROCESS_TIMEOUT_S * len(names):.0f} s"
    except (ValueError, TypeError) as exc:
        found, why = [], f"unreadable self-test outcome: {exc}"
    else:
        tail = [line for line in (done.stderr or "").strip().splitlines() if line.strip()]
        why = f"the self-test process exited with {done.returncode}: {tail[-1] if tail else ''}"
    ran = {result.language for result in found}
    return found + [SelfTestResult(name, device, "failed", why) for name in names if name not in ran]


def main(argv: list[str]) -> int:
    """python -m gpuarena.language_check DEVICE LANGUAGE...: one JSON line per language."""
    device, names = argv[0], argv[1:]
    for name in names:
        print(json.dumps(asdict(self_test(name, device))), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
