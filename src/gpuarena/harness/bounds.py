"""The bounds on a workload's timing samples (`TimeBudget`), judged by the supervisor (measure.py
runs the rounds): the worker's times are measured inside the
solution's process, which can rewrite the clock, the timer or the reply. The supervisor
knows what the solution cannot change: its own clock around each `time` request (the worker
is frozen between requests, freeze.py, so it cannot work outside them) and the worker's CPU
time over it (the cgroup's account of all its threads and processes). The reported wall
times of a block cannot sum to more than the request took; on the CPU they are a breakdown
of what the supervisor measured: the request's time less the harness's share, the main
thread's time on a core and the CPU time of all the worker's threads (TimeBudget says how
each is judged). The harness's share is measured, not guessed: on the CPU the reference's block runs
through the worker's own timing code in the supervisor (`ReferenceTwin`), in the same round
and on the same buffers; what the worker's process adds to that (its socket, its sandbox,
its freezing) is measured once a run, before the solution is built (calibration.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from gpuarena.contracts.records import Status
from gpuarena.harness.calibration import ProcessExtra
from gpuarena.harness.failure import RunFailure

HARNESS_MARGIN = 1.15
"""The worker's own CPU work in a `time` request (outside the calls' windows: receiving the
request, poisoning destinations, copying outputs out, the checks on them, the loop, the
reply) is allowed this multiple of what the same harness code costs when the supervisor
runs it on the reference (the median twin block of the run: TimeBudget.harness_ns). At 1.3
the slack (about 25 µs a call on the VM) swallowed a 20 µs softmax's whole CPU time,"""
HARNESS_NS_PER_CALL = 5_000
"""plus this much per call (allocator and cache effects the twin does not show)."""


MIN_REQUESTS = 3
"""Requests the bounds need before they judge (a median of fewer is one outlier away); a
workload's timing goes on until it has them, whatever its budget."""
CLOCK_TOLERANCE = 0.5
"""The share of a request's time on the supervisor's clock (less the waits another process
caused) that the reported times may leave unexplained beyond the harness's measured share:
the machine's hiccups in the harness's part of a request, and a solution's own work outside
its windows (joined threads leaving the kernel). Work hidden outside the calls gains at most
this share; a forged breakdown of the calls' own time is the main thread's bound's to catch.
At 25% an honest destination-passing axpy of 24 µs a call failed it in CI (2 tests at once on 2
cores): the harness's share there is three times the call."""
MAIN_THREAD_TOLERANCE = 0.20
"""The same for the worker's main thread's time on a core, which a busy machine stretches far less than the
clock (its caches, not its waits): an honest gelu under four processes on 2 cores needed 17%."""
BUSY_SHARE = 0.02
"""A judgement's requests in which other processes held the worker's main thread's core (or the
supervisor's) for this share of their time or more ran on a busy machine (TimeBudget.busy)."""


@dataclass
class Bound:
    """One supervisor-measured figure per request that the reported times must explain. The
    harness's share is applied when the bound is judged, from all the reference's blocks by
    then: a share taken as each request came used the first blocks' (a cold first block
    allowed 10 ms a request, and a forged clock passed on the three requests judged then)."""

    name: str
    tolerance: float
    """The share of the figure that may go unexplained besides the harness's share."""
    share: Callable[[int], float]
    """The harness's share of a request of that many calls."""
    requests: list[tuple[int, float, int]] = field(default_factory=list)
    """Per request: the figure, what the reported times explain of it, the calls."""

    def add(self, figure: int, explained: float, calls: int) -> None:
        self.requests.append((figure, explained, calls))

    def allowances(self) -> list[float]:
        return [self.share(calls) + self.tolerance * figure for figure, _, calls in self.requests]

    def unexplained(self) -> list[float]:
        return [figure - explained - a for (figure, explained, _), a in zip(self.requests, self.allowances())]

    def median(self) -> float | None:
        values = self.unexplained()
        return sorted(values)[len(values) // 2] if len(values) >= MIN_REQUESTS else None


class TimeBudget:
    """The supervisor-side bounds on the worker's reported times (see the module docstring).

    Per `time` request the supervisor measures, from outside the worker: its own clock from
    the thaw to the worker frozen again (freeze.py), less the time the worker's main thread
    waited for a core while nothing else of the worker ran (another process's load); the
    main thread's time on a core (the kernel's schedstat); and the CPU time of all its
    threads and processes (its cgroup). Reported times may never sum to more than the clock.
    On the CPU they are a breakdown of what the supervisor measured, judged from the first
    request on, and must explain, beyond the harness's own share (measured on the reference's
    block run through the same harness code in the supervisor, `ReferenceTwin`, and on the
    worker's process before the solution, calibration.py):
    - the clock, within CLOCK_TOLERANCE: no work outside the calls, on any thread;
    - the main thread's time on a core, within MAIN_THREAD_TOLERANCE, with no core count:
      a single thread's time divided by the cores is not a breakdown of it;
    - the CPU time of every thread, spread over the cores the worker is pinned to.
    A request can be slowed by the machine (page faults, another process), never sped up, so
    the bounds are judged on the median request, robust to such outliers."""

    def __init__(self, cpu: bool, cores: int, process_extra: ProcessExtra | None = None):
        self.cpu, self.cores = cpu, max(1, cores)
        self.process_extra = process_extra or ProcessExtra(0.0, 0.0)
        """What the worker's process adds to the twin's harness share (calibration.py)."""
        self.harness_blocks: list[int] = []
        """The harness's CPU time in each reference block so far (the caller adds them)."""
        self.judged_from = 0
        """The first of harness_blocks from the rounds judged now (restart)."""
        self.reported = self.calls = 0
        self.measured = True
        self.restart()

    def add_harness(self, ns: int) -> None:
        """A reference block's harness CPU time (ReferenceTwin.block's third figure)."""
        self.harness_blocks.append(ns)

    @property
    def harness_ns(self) -> int | None:
        """The harness's CPU time in a reference block: the median block so far. One block's
        figure swings by half either way (a cache or page fault more or less); the median
        of the run's blocks is what the harness costs. The harness only computes there, so
        this is also its time on the clock (what the worker's process adds to that, waking
        up and being frozen, is ProcessExtra's)."""
        blocks = self.harness_blocks[self.judged_from :] or self.harness_blocks  # the judged rounds' own
        if not blocks:
            return None
        return sorted(blocks)[(len(blocks) - 1) // 2]  # the lower of two middles

    def allowance_ns(self, calls: int) -> float:
        """The harness's CPU time in a request of `calls` calls."""
        harness = self.harness_ns
        assert harness is not None
        return HARNESS_MARGIN * harness + self.process_extra.for_request(calls) + HARNESS_NS_PER_CALL * calls

    def clock_allowance_ns(self, calls: int) -> float:
        """The harness's share of a request of `calls` calls on the supervisor's clock."""
        harness = self.harness_ns
        assert harness is not None
        return HARNESS_MARGIN * harness + self.process_extra.wall_for_request(calls) + HARNESS_NS_PER_CALL * calls

    def add(
        self,
        e2e_ns: list[int],
        wall_ns: int,
        worker_cpu_ns: int | None,
        excused_ns: int = 0,
        main_cpu_ns: int | None = None,
    ) -> None:
        """One request's figures (process.WorkerProcess's last_*): the reported times, the
        clock, the CPU time of all the worker's threads, the main thread's wait that another
        process caused (excused_ns), the main thread's time on a core."""
        reported = sum(e2e_ns)
        if reported > wall_ns:
            raise RunFailure(
                Status.REJECTED,
                f"the worker reported {reported / 1e3:.0f} µs of calls in a request that took "
                f"{wall_ns / 1e3:.0f} µs on the supervisor's clock (tampered timing)",
            )
        self.reported += reported
        self.calls += len(e2e_ns)
        self.wall_ns += wall_ns
        self.excused_ns += min(excused_ns, wall_ns)
        if not self.cpu or self.harness_ns is None:
            return
        calls = len(e2e_ns)
        worked = wall_ns - min(excused_ns, wall_ns - reported)  # never below the reported times
        self.clock.add(worked, reported, calls)
        if worker_cpu_ns is None:
            self.measured = False
            return
        self.threads.add(worker_cpu_ns, reported * self.cores, calls)
        if main_cpu_ns is not None:
            self.main_thread.add(main_cpu_ns, reported, calls)

    def can_judge(self) -> bool:
        """Whether the bounds have the requests they judge on (always, where there is none to
        judge): the timing loop goes on until they have, so that no workload stops before it."""
        return not (self.cpu and self.measured) or len(self.threads.requests) >= MIN_REQUESTS

    def _failed(self) -> list[Bound]:
        if not (self.cpu and self.measured):
            return []
        return [b for b in (self.clock, self.main_thread, self.threads) if (b.median() or 0) > 0]

    def holds(self) -> bool:
        return not self._failed()

    def busy_share(self) -> float:
        """The share of the judged requests' time in which other processes held the worker's main
        thread's core or the supervisor's (measured from outside: the worker's own threads do
        not count, process.WorkerProcess.last_excused_ns)."""
        return self.excused_ns / self.wall_ns if self.wall_ns else 0.0

    def busy(self) -> bool:
        """Whether the judged requests ran on a busy machine: a judgement failed then is worth
        another on later rounds (measure.py), since a load from outside stretches the harness's
        own work past the twin's in ways no tolerance fits; a forged breakdown fails each one."""
        return self.busy_share() >= BUSY_SHARE

    def restart(self) -> None:
        """Forget the requests so far: the next check judges only the requests after this,
        against the harness's share in the same rounds (a load that began or ended between
        judgements moves both alike)."""
        self.judged_from = len(self.harness_blocks)
        self.wall_ns = self.excused_ns = 0
        self.clock = Bound("clock", CLOCK_TOLERANCE, self.clock_allowance_ns)
        self.main_thread = Bound("main thread", MAIN_THREAD_TOLERANCE, self.allowance_ns)
        self.threads = Bound("threads", 0.0, self.allowance_ns)
        self.reported = self.calls = 0

    def check(self) -> None:
        """On the CPU: in the median request, the reported times explain every figure the
        supervisor measured (see the class). A bound that could not be checked (the worker's
        CPU time unreadable from outside) is no pass: the times are the worker's word alone."""
        if self.cpu and not self.measured:
            raise RunFailure(
                Status.REJECTED,
                "the worker's CPU time could not be read from outside it (no cgroup account, "
                "and its process's clock unreadable), so the times it reported cannot be "
                "bounded on the CPU",
            )
        failed = self._failed()
        if not failed:
            return
        bound = failed[0]
        requests = len(bound.requests)
        per_call = max(1.0, self.calls / max(1, requests))
        middle = requests // 2
        what = {
            "clock": "the time its requests took on the supervisor's clock (less waits another process caused)",
            "main thread": "its main thread's time on a core (no core count: one thread runs on one core)",
            "threads": f"the CPU time of all its threads, over the {self.cores} core(s) it is pinned to",
        }[bound.name]
        raise RunFailure(
            Status.REJECTED,
            f"the times the worker reported do not explain {what}: in the median request "
            f"{sorted(bound.unexplained())[middle] / per_call / 1e3:.0f} µs per call went unexplained beyond the "
            f"harness's own share and the tolerance ({sorted(bound.allowances())[middle] / per_call / 1e3:.0f} µs "
            f"per call, measured on the reference); over {self.calls} timed calls it reported "
            f"{self.reported / 1e3:.0f} µs against {sum(r[0] for r in bound.requests) / 1e3:.0f} µs measured "
            f"(judged again on fresh rounds, with the same outcome{self._busy_words()}): its times were tampered "
            "with, or it worked outside its calls",
        )

    def _busy_words(self) -> str:
        share = self.busy_share()
        return f"; other processes held its core for {share:.0%} of the last judgement's time" if share else ""
