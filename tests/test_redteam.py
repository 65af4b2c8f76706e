"""The red-team corpus (tests/redteam/): every exploit must get a verdict it expects, every
honest solution must pass, through the real harness (a real worker process per case).

Cases are hostile code: they are never imported here, only read with `ast` (load_cases)
and handed to the harness. Some of them try to outlive the run (leaked processes, whose
pids they record in $TMPDIR/gpuarena-redteam-leaks/) or to lower the supervisor's CPU
share (affinity, nice, autogroup nice); each test kills the former by pid and restores
the latter, so one case cannot poison the next.
"""

from __future__ import annotations

import ast
import os
import signal
import tempfile
from pathlib import Path

import pytest

from gpuarena.harness.records import Status
from gpuarena.redteam import Case, load_cases, run_case

ROOT = Path(__file__).resolve().parents[1]
CORPUS = Path(__file__).resolve().parent / "redteam"
LEAKS = Path(tempfile.gettempdir()) / "gpuarena-redteam-leaks"

FAMILIES = {
    "cached outputs",
    "phase detection",  # behaving differently in warm-up, correctness checks and timed calls
    "mutating inputs",
    "outputs aliasing inputs",
    "reading secrets",  # reference results or seeds: gc, /proc, /dev/shm, environment, fds
    "predicting inputs",  # replaying the seed derivation
    "lazy outputs and deferred work",
    "background threads",
    "side streams",
    "persisting L2",
    "stale memory",
    "monkeypatching timers",
    "monkeypatching synchronisation",
    "monkeypatching statistics",
    "monkeypatching the checker",
    "monkeypatching torch functions",
    "fake results",  # stdout, stderr, the log, the harness socket, the reply function
    "exiting early",
    "constants",
    "precision",
    "nan or inf",
    "processes",
    "timeouts",
    "memory exhaustion",
    "network",
    "tampering with the supervisor",
}

SCORE_CAP = 5.0
"""A case that must pass (honest, or an exploit the harness neutralises) must also be timed
honestly: on the CPU no plain-PyTorch softmax is 5x faster than torch.softmax, so a higher
score means a neutralised exploit won after all."""

CASES = load_cases(CORPUS)
CPU_CASES = [c for c in CASES if "cpu" in c.devices]


def _case_id(case: Case) -> str:
    kind = "honest" if case.path.parent.name == "honest" else case.path.parent.name
    return f"{kind}/{case.name}"


def _kill_leaked_processes() -> list[int]:
    """Kill, by pid, the processes that cases recorded as leaked (if they still run ours)."""
    killed = []
    if not LEAKS.is_dir():
        return killed
    for entry in LEAKS.iterdir():
        try:
            pid = int(entry.name)
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except (ValueError, OSError):
            cmdline = b""
            pid = 0
        if pid and (b"gpuarena-redteam-leak" in cmdline or b"gpuarena.harness" in cmdline):
            try:
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
            except ProcessLookupError:
                pass
        entry.unlink(missing_ok=True)
    return killed


def _autogroup_nice() -> int | None:
    try:
        return int(Path("/proc/self/autogroup").read_text().split("nice")[1])
    except (OSError, IndexError, ValueError):
        return None


@pytest.fixture
def isolated_case(monkeypatch):
    """Run from the repository root (cases name fixture problems by relative path) and
    undo what a hostile case may have done to this process or left behind."""
    monkeypatch.chdir(ROOT)
    affinity = os.sched_getaffinity(0)
    nice = os.getpriority(os.PRIO_PROCESS, 0)
    group_nice = _autogroup_nice()
    _kill_leaked_processes()
    yield
    _kill_leaked_processes()
    os.sched_setaffinity(0, affinity)
    for restore in (lambda: os.setpriority(os.PRIO_PROCESS, 0, nice),
                    lambda: group_nice is not None and Path("/proc/self/autogroup").write_text(str(group_nice))):
        try:
            restore()
        except OSError:
            pass


KNOWN_GAPS = {
    # in-process tampering: the solution shares the worker's address space
    "background_threads/persistent_precompute_thread": "a thread started at import, alive before the call, is not flagged",
    "monkeypatch_checker/hide_threads_from_enumerate": "the thread check trusts threading.enumerate() in-process",
    "monkeypatch_timers/module_clock_ticks": "the CPU clock lives in the worker; scaled-down times are not bounded by the supervisor",
    "monkeypatch_timers/timer_method_replaced": "the CPU clock lives in the worker; scaled-down times are not bounded by the supervisor",
    "fake_results/patched_reply_function": "the worker's reply function can be replaced in-process",
    "phase_detection/skip_unchecked_timed_calls": "the checked call indices are sent to the worker up front",
    "deferred_work/copy_hook_finishes_work": "work finished inside the harness's copy of the output is not told apart",
    "mutating_inputs/swap_blind_to_fingerprint": "the timing-phase input fingerprint is sums over strided subsets",
    # the supervisor's process is reachable from a worker running as the same (root) user
    "reading_secrets/supervisor_environ_readable": "a same-uid worker can read /proc/<supervisor>/environ",
    "reading_secrets/supervisor_memory_reference": "a same-uid root worker can read /proc/<supervisor>/mem",
    "supervisor_tampering/signal_supervisor_probe": "a same-uid worker can signal the supervisor",
    "supervisor_tampering/supervisor_memory_writable_probe": "a same-uid root worker can write /proc/<supervisor>/mem",
    "supervisor_tampering/starve_the_reference": "a worker can lower the supervisor's CPU share",
    # caught, but with a less specific verdict than the case asks for
    "fake_results/socket_fake_timing_reply": "a forged reply on the socket races the real one: PASSED or WRONG_VALUES",
    "mutating_inputs/in_place_timed_only": "caught as WRONG_VALUES by the timed-output check rather than REJECTED",
    "processes/double_fork_daemon": "the orphan is killed by the subreaper, but the verdict is not REJECTED",
}
"""Cases the harness does not yet answer as a sound harness must (issue 6's next steps).
Strict: a fix makes the case pass, and then the entry must be removed."""


RACY = {"fake_results/socket_fake_timing_reply"}
"""Known gaps whose outcome depends on a race: an unexpected pass there is not a fix."""


def _param(case: Case):
    reason = KNOWN_GAPS.get(_case_id(case))
    strict = _case_id(case) not in RACY
    marks = [pytest.mark.xfail(strict=strict, reason=f"known gap: {reason}")] if reason else []
    return pytest.param(case, id=_case_id(case), marks=marks)


@pytest.mark.parametrize("case", [_param(c) for c in CPU_CASES])
def test_case(case: Case, isolated_case) -> None:
    outcome = run_case(case, "cpu")
    assert outcome.ok, (f"{_case_id(case)} [{case.family}]: expected {' | '.join(case.expect)}, "
                        f"got {outcome.got}: {outcome.reason or '(no reason given)'}")
    score = outcome.details.get("score")
    if outcome.got == "PASSED" and score is not None:
        assert score < SCORE_CAP, (f"{_case_id(case)} [{case.family}] passed with a score of {score:.3g}: "
                                   "a solution that must be timed honestly was not")


def test_corpus_size_and_coverage() -> None:
    exploits = [c for c in CASES if not c.honest]
    honest = [c for c in CASES if c.honest]
    assert len(exploits) >= 25, f"only {len(exploits)} exploit cases"
    assert len([c for c in honest if c.family == "honest"]) >= 30, "fewer than 30 honest solutions"
    covered = {c.family for c in CASES}
    assert FAMILIES <= covered, f"families without a case: {sorted(FAMILIES - covered)}"
    assert covered <= FAMILIES | {"honest"}, f"families not listed here: {sorted(covered - FAMILIES - {'honest'})}"
    assert {c.family for c in CPU_CASES if not c.honest} >= FAMILIES - {
        "side streams", "persisting L2", "monkeypatching synchronisation", "monkeypatching statistics"}


def test_case_metadata_is_sound() -> None:
    statuses = {s.value for s in Status} - {"SKIPPED"}
    for case in CASES:
        where = case.path.relative_to(CORPUS)
        assert set(case.expect) <= statuses, f"{where}: unknown verdicts in EXPECT {case.expect}"
        in_honest = case.path.parent == CORPUS / "honest"
        assert case.honest == in_honest, f"{where}: EXPECT ['PASSED'] belongs in honest/, anything else in exploits/"
        if not case.honest:
            assert "PASSED" not in case.expect, f"{where}: an exploit may never expect PASSED"
        assert case.mode in ("test", "benchmark", "ranked"), f"{where}: MODE {case.mode!r}"
        assert set(case.devices) <= {"cpu", "cuda"} and case.devices, f"{where}: DEVICES {case.devices}"
        docstring = ast.get_docstring(ast.parse(case.path.read_text()))
        assert docstring and len(docstring) > 40, f"{where}: say in a docstring what the case does and what beats it"
        assert "def solve(" in case.path.read_text(), f"{where}: no solve()"
