"""The device audit over the timed rounds themselves (CUDA): what the GPU's own counters saw of every timed request
of the solution, against the device time the worker claimed for it.

The PM sampler (device_audit.py) holds the counters for the whole timed phase, and every one of the solution's timed
requests is a sampled segment, so no audited request can be told apart from a timed one (requests of the audit's
own, without the sweep, once could). A segment runs from the request to the copy of the outputs the supervisor will
check, chosen only once the reply is in (`commit`), so any work a checked output needs, however the solution delays
it on the GPU, is inside the segment: what finishes later was wrong when copied.

What the segments hold besides the solution's calls is the harness's: the L2 and instruction-cache sweeps before
each call, poisoning and copying outputs out, the copy of the checked outputs. On an H100 the sweeps took about 160
µs of the busiest SM's time per call (the L2 read sweep alone 58.7 µs, steady within ±0.6% over blocks of 30,
bench/research/results/audit-rounds-NVIDIA-H100.md), so they must be taken off precisely, in the same conditions:
the GPU's clocks after a long idle (a CUDA build) made whole rounds 3.5% busier than the same blocks a few seconds
later. So the same harness code with a solve() that does nothing, run in the supervisor (twin.py), is sampled just
before every one of the solution's requests (each call of it waiting on the host as long as the solution's calls
spend there, `_pace`), and the solution is judged on the median of the paired differences: the clocks' drift, a few
µs a call, falls out of each pair (with the harness sampled apart, every second round, the noise allowance grew to 3
x 1.4 µs a call and a 3x forged claim on a 4.5 µs softmax passed). The trusted reference through the worker's own
`time` code (its twin), sampled in the first round, gives what the counters see of a call beyond its CUPTI time
(`inflation`) and what the reference's timed blocks may hold; more blocks only where the verdict depends on them.

The same pairs carry the bytes each segment read from device memory: the L2 sweep reads three times the L2 a call,
so requests that read far less than the harness alone did not evict (`_check_reads`), however busy their substitute
kept the SMs.

Small kernels get a second look. Their claim is judged on a difference of large numbers (a 4 µs kernel beside 160 µs
of sweeps a call), and the busiest SM's time is not additive: a kernel on half the SMs can add nothing to a sample
whose busiest SM only swept. So where the claim is under UNSWEPT_UNDER_US, the timed rounds are followed by
UNSWEPT_REQUESTS requests of the same calls one by one without the sweeps (`unswept`), each on fresh inputs, its
outputs committed and checked like a timed request's, each paired with the harness alone run the same way (fewer
where the first few already pass the claim beyond doubt: `unswept_settled`). What the counters see of them is the
calls' own work with warm caches, which only makes honest calls faster: it bounds the claim of the timed rounds from
below, with the noise of a few µs rather than of 160. The worker can tell these requests apart (no sweeps), and that
gains a solution nothing: they are judged against the claim it made in the timed rounds, not against anything it
says in them, and doing less work in them means wrong outputs (every call may be checked) or a genuinely faster
kernel, which it could have been timed with.

The reference's timed blocks are sampled as well: work that is not the harness's running while the reference is
timed (a solution's kernel queued to start later) would slow the reference and flatter the solution. They do less
harness work than the reference's twin (no copies out), so a median block far busier than the twin's means someone
else's work.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, TypeVar

from gpuarena.contracts import messages
from gpuarena.contracts.records import DeviceAudit, Status, WorkloadResult
from gpuarena.harness.audit_checks import ReadSamples, check_reads, check_unswept, streams_past_l2, twins_decide
from gpuarena.harness.audit_figures import AuditFigures, Sampled
from gpuarena.harness.device import device_audit
from gpuarena.harness.device.device_audit import SamplerError
from gpuarena.harness.failure import MeasureAgain, RunFailure
from gpuarena.harness.session import WorkloadSession
from gpuarena.harness.twin import ReferenceTwin

if TYPE_CHECKING:
    from gpuarena.harness.run_context import RunContext

T = TypeVar("T")
C = TypeVar("C")  # what a commit returns
SOLUTION, REFERENCE = "the solution's request", "the reference's timed block"
HARNESS, REFERENCE_HARNESS = "the harness alone", "the harness as the reference calls it"
REFERENCE_TWIN = "the reference through the worker's code"
UNSWEPT, UNSWEPT_HARNESS = "the solution's request without the sweeps", "the harness alone without the sweeps"
"""What each sampled segment holds (the names errors give, and a test's stand-in reads)."""
MIN_REQUESTS = 12
"""The timed rounds go on until this many of the solution's requests were sampled: the harness's share is about 160 µs
a call on an H100 and a 2 µs kernel is judged on the difference, so its noise must average down (2 requests: an honest
Triton softmax read 3.68 µs for 2.11). Requests, not calls: the first pairs, paced before the solution's host time was
known (`_pace`), must be outvoted (4 of 64 calls: collects_garbage REJECTED, H200)."""
FEW_REQUESTS = 4
STREAMING_REQUESTS = 3
"""Swept requests where the unswept ones judge the claim (`wants_more`): the timing's own least (bounds.MIN_REQUESTS),
no round for the audit alone (35-50 ms a workload on GPU MODE's vectoradd, H200). The swept figure then decides only
whether the harness's work ran and read (forgeries differ by a third of it); three outvote the first, unpaced pair."""
QUICK_NOISE_FRACTION = 0.05
"""A kernel whose observed figure's error is already under QUICK_NOISE_FRACTION of its claim after FEW_REQUESTS stops
there: a claim is rejected under 0.7 x (observed - inflation - 3 x noise), so at 5% the noise moves that bound by 15%
of the claim, while a forged claim sits under half of it. Large kernels get there (square-8192's softmax: 170 µs a
call against ±4 µs of scatter) and save the remaining rounds, about 0.1 s each on an H100; a figure that is not yet
that steady goes on to MIN_REQUESTS as before. Four, not six: one stray request moves neither the median of four nor
its MAD much, and the audit alone paces a large kernel's rounds (about 70 ms each of a 1.2 s warm verdict, H200)."""
MAX_REQUESTS = 96
NOISE_FRACTION = 0.25
"""Past MIN_REQUESTS the rounds go on, up to MAX_REQUESTS, while the observed figure's error is over NOISE_FRACTION of
the claimed median: a sampled request's figure varies by about ±4 µs a call on the smallest softmax (16 calls, under
160 µs of harness work each, H100), so 12 requests left an error of 1.47 µs and a claim of 1.5 µs for a 4.4 µs kernel
passed. Under the bound, a claim is rejected once it is under about 0.46 x the time the counters saw (0.7 x (T - 3 x
0.25 x claimed)); larger kernels stop at MIN_REQUESTS."""
MAX_PACE_NS = 5_000_000
"""The harness block's wait per call follows the solution's host time per call up to this."""
TWIN_BLOCKS = 4
"""The twins after the rounds, where the verdict depends on them (audit_checks.twins_decide), until each has this many
blocks; the median counts. (Every second round and always topped up, they took 0.1 s a workload, 13 ms a block, a
fifth of the audit of GPU MODE's vectoradd on an H200.)"""
MISSING_HARNESS_FRACTION = 0.05
MISSING_HARNESS_SIGMAS = 5.0
"""A solution's requests whose median shows the GPU doing less than the harness alone by more than this share of the
harness's work (plus this many times the figure's error) skipped part of that work: the cache sweeps run in the
worker's process, and a solution that turns them off times its calls with warm caches
(warm_caches/skips_the_cache_sweeps). Honest requests read at least their kernels' time over the harness's (the L2
sweep alone is about 58 µs a call of the harness's 150 on an H100)."""
UNSWEPT_UNDER_US = 50.0
"""Claims (median µs a call) under this get the unswept requests after the timed rounds: above it the sweeps' noise
(±4 µs a call in one request, ±0.3-0.5 µs in the median, H200) is a small part of the claim and the margin bounds a
forgery."""
UNSWEPT_REQUESTS = 8
UNSWEPT_FEW = 2
"""The unswept requests stop after this many once even the largest figure among them, taken whole (no allowance for
its error or the floor), could not reject the claim: the check at the end could then only pass it; each costs about 25
ms on an H200 with its fresh inputs and check. Two: one workload's unswept figures lay within 10% of each other (29%
at most) in 441 H200 red-team audits (bench/results/redteam-cuda-*), the forgeries they caught 1.8x or more over claim
/ AUDIT_MARGIN. A forgery whose calls the counters see above claim / AUDIT_MARGIN gets every request; lighter first
requests gain nothing (each is checked)."""
REFERENCE_SHARED_FRACTION = 0.05
REFERENCE_SHARED_NS_PER_CALL = 2_000
"""How much busier (median) the reference's timed blocks may be than its twin's (else: shared GPU)."""


class RoundsAudit:
    """One workload's audit: `begin()` before the timed rounds, `solution()` and `reference()`
    around each block in them, `twins()` at the end of each round, `finish()` after (then
    `stop()`, always). `commit`: the work of the solution's commit, for the twins' blocks."""

    def __init__(
        self,
        supervisor: RunContext,
        session: WorkloadSession,
        enabled: bool = True,
        commit: Callable[[], object] = lambda: None,
    ):
        """enabled=False (the CPU, which has its own bound): every block runs unsampled."""
        self.supervisor, self.session, self.enabled, self.commit = supervisor, session, enabled, commit
        self.sampler = supervisor.sampler if enabled else None
        if enabled and self.sampler is None and supervisor.sampler_lost:
            raise RunFailure(
                Status.REJECTED,
                f"the GPU's counters could not be read for the device audit "
                f"({supervisor.sampler_missing}) after they could earlier in this run: "
                "nothing may hold them while a job runs",
            )
        self.on = False
        self.figures = AuditFigures((HARNESS, REFERENCE_HARNESS, REFERENCE_TWIN, UNSWEPT_HARNESS))
        """The windows sampled, read into figures where a decision needs them (`_read`)."""
        self.calls = 0
        self.call_ns: dict[str, list[float]] = {SOLUTION: [], HARNESS: []}
        """The median call window (host time, end to end) of each request of the solution and of
        each harness block, less its pacing,"""
        self.wall_ns: dict[str, list[float]] = {SOLUTION: [], HARNESS: []}
        """and each one's wall time as the supervisor timed it, per call (`_pace`)."""
        self._chain: bool | None = None
        """Inside `chained()`: False until its first segment, then True: each segment after the
        first starts at the mark that ended the one before. None outside."""
        self.seconds = 0.0
        """Wall time the audit added to the rounds: starting and stopping the sampler, waiting for
        a quiet GPU, the twins' blocks, and each sampled block's settling and marks."""
        self._twins: dict[str, ReferenceTwin] = {}

    def begin(self) -> None:
        """Sampling on (one window for the run's timed workloads: stopping and starting it cost
        about 21 ms a workload, H200), once the GPU is quiet (it cannot be switched off by
        keeping it busy; between workloads the solution's calls ran, so it is looked at again)."""
        if self.sampler is None:
            return
        self._twins = {
            HARNESS: ReferenceTwin.no_op(self.supervisor, self.session),
            REFERENCE_TWIN: ReferenceTwin(self.supervisor, self.session),
        }
        if self.supervisor.convention != "return":  # the reference returns its outputs
            self._twins[REFERENCE_HARNESS] = ReferenceTwin.no_op(self.supervisor, self.session, convention="return")
        started = time.monotonic()
        try:
            if not self.sampler.running:
                self.sampler.start()
            self.on = True
            # where the samples lie on the host's clock (each workload: the clocks drift apart), read only after
            # a quiet lead-in (sample_clock.py): that is the quiet check. A failed one gets the check of its own
            # (10 ms a workload, H200; it rejects a GPU that stays busy) and a second try, else segments are marks
            if not self.sampler.calibrate(self.session.spin):
                self._wait_quiet("the timed rounds")
                self.sampler.calibrate(self.session.spin)
        except SamplerError as exc:
            raise self._failed(exc) from None
        finally:
            self.seconds += time.monotonic() - started

    def wants_more(self, claimed_us: float) -> bool:
        """Whether the rounds must go on for the audit: fewer than STREAMING_REQUESTS sampled; then,
        unless the unswept requests judge the claim as well as the swept ones (under
        UNSWEPT_UNDER_US, on a set that streams past L2), fewer than FEW_REQUESTS, or fewer than
        MIN_REQUESTS while the observed figure is not yet steady to QUICK_NOISE_FRACTION of the
        claim, or the figure still too rough to judge a claim of `claimed_us` (at most
        MAX_REQUESTS)."""
        sampled = len(self.figures.requests)
        if not self.on or sampled >= MAX_REQUESTS:
            return False
        if sampled < STREAMING_REQUESTS:
            return True
        if claimed_us < UNSWEPT_UNDER_US and streams_past_l2(self.session):
            # the unswept requests judge it (a noise of a few µs, not the sweeps' ~160; no warm cache
            # holds twice L2): the swept figure to a quarter of the claim as well took 8-17 more
            # requests (0.4-1.1 s a workload) on GPU MODE's vectoradd at 1024² to 4096² (H200)
            return False
        if sampled < FEW_REQUESTS:
            return True
        self._read()
        noise = self.noise_us()
        return noise > (QUICK_NOISE_FRACTION if sampled < MIN_REQUESTS else NOISE_FRACTION) * claimed_us

    def noise_us(self) -> float:
        """The standard error of the observed figure so far, per call."""
        return device_audit.median_error(self.figures.paired_ns) / len(self.session.sets) / 1e3

    def solution(self, request: Callable[[], T], commit: Callable[[], C], calls: int) -> tuple[T, C]:
        """One timed request of the solution and the commit that ends it, sampled."""
        if not self.on:
            return request(), commit()
        harness = self._sample(HARNESS)
        wall = [0]

        def timed_request() -> T:
            started = time.perf_counter_ns()
            try:
                return request()
            finally:
                wall[0] = time.perf_counter_ns() - started

        (reply, committed), window = self._segment(lambda: (timed_request(), commit()), SOLUTION)
        e2e = reply.e2e_ns if isinstance(reply, messages.Timed) else None
        if e2e:
            self._pace(SOLUTION, statistics.median(e2e), wall[0])
        self.figures.requests.append((window, harness))
        self.calls += calls
        return reply, committed

    def wants_unswept(self, claimed_us: float) -> bool:
        """Whether a claim of `claimed_us` a call gets the unswept requests (see the module)."""
        return self.on and claimed_us < UNSWEPT_UNDER_US

    def unswept(self, request: Callable[[], T], commit: Callable[[], C]) -> tuple[T, C]:
        """One request of the solution's calls without the cache sweeps and the commit that ends
        it, sampled, after the harness alone run the same way."""
        harness = self._sample(UNSWEPT_HARNESS)
        (reply, committed), window = self._segment(lambda: (request(), commit()), UNSWEPT)
        self.figures.unswept.append((window, harness))
        return reply, committed

    def unswept_settled(self, claimed_us: float) -> bool:
        """Whether the unswept requests so far already pass a claim of `claimed_us` a call
        beyond doubt (UNSWEPT_FEW of them, the largest figure taken whole)."""
        if len(self.figures.unswept) < UNSWEPT_FEW:
            return False
        self._read()
        largest = max(max(self.figures.unswept_ns), 0.0) / len(self.session.sets) / 1e3
        return not device_audit.understated(claimed_us, largest, noise_us=0.0, floor_us=0.0)

    def reference(self, block: Callable[[], T]) -> T:
        """One timed block of the reference, sampled."""
        if not self.on:
            return block()
        result, window = self._segment(block, REFERENCE)
        self.figures.reference.append(window)
        return result

    def twins(self, round_no: int) -> None:
        """At the start of the first round, before its timed blocks and right after the GPU was
        found quiet: the twins' blocks, in the rounds' conditions, with no work of the solution's
        before them that could still be queued (at a round's end they would follow its request
        with only the output check between)."""
        if self.on and round_no == 1:
            self._sample_twins()

    def finish(self, result: WorkloadResult) -> DeviceAudit:
        """The verdict, from the medians (the twins topped up first where it depends on them)."""
        audit = DeviceAudit(
            margin=device_audit.AUDIT_MARGIN,
            claimed_us=result.time.median_us if result.time else None,
            reference_claimed_us=result.reference_time.median_us if result.reference_time else None,
        )
        result.device_audit = audit
        if not self.enabled:
            return audit
        if self.sampler is None:
            audit.skipped = self.supervisor.sampler_missing
            return audit
        n = len(self.session.sets)

        def per_call(ns: float) -> float:
            return max(ns, 0.0) / n / 1e3

        figures = self.figures
        try:
            self._read()
            paired_ns = figures.paired_ns
            audit.observed_us_per_call = per_call(statistics.median(paired_ns)) if paired_ns else 0.0
            audit.noise_us = self.noise_us()
            twin = figures.twin_ns(REFERENCE_TWIN)
            if len(twin) < TWIN_BLOCKS and twins_decide(
                twin, figures.reference_ns, audit.claimed_us, audit.observed_us_per_call, audit.noise_us
            ):
                started = time.monotonic()
                self._wait_quiet("the reference's own share is measured")
                self.seconds += time.monotonic() - started
                while len(figures.twins[REFERENCE_TWIN]) < TWIN_BLOCKS:
                    self._sample_twins()
                self._read()
        finally:
            self.stop()
        harness = statistics.median(figures.twin_ns(HARNESS))
        reference_harness = statistics.median(figures.twin_ns(REFERENCE_HARNESS) or figures.twin_ns(HARNESS))
        reference_twin = statistics.median(figures.twin_ns(REFERENCE_TWIN))
        audit.calls = self.calls
        audit.windows = self.sampler.windows_read()
        audit.harness_us_per_call = per_call(harness)
        audit.observed_us_per_request = [round(ns / n / 1e3, 3) for ns in paired_ns]
        audit.harness_pace_us = self._twins[HARNESS].pace_ns / 1e3
        audit.reference_observed_us_per_call = per_call(reference_twin - reference_harness)
        audit.inflation_us = device_audit.inflation(audit.reference_observed_us_per_call, audit.reference_claimed_us)
        audit.reference_twin_us_per_call = per_call(reference_twin)
        if figures.reference:
            timed = statistics.median(figures.reference_ns)
            audit.reference_timed_us_per_call = per_call(timed)
            if timed > (1 + REFERENCE_SHARED_FRACTION) * reference_twin + REFERENCE_SHARED_NS_PER_CALL * n:
                raise RunFailure(
                    Status.REJECTED,
                    f"the GPU did more while the reference was timed "
                    f"({audit.reference_timed_us_per_call:.2f} µs per call) than for the same "
                    f"calls with more harness work around them "
                    f"({audit.reference_twin_us_per_call:.2f} µs): work that is not the "
                    "harness's ran under the reference's timing (run the job again on a GPU "
                    "of its own)",
                )
        paired_us = statistics.median(paired_ns) / n / 1e3 if paired_ns else 0.0
        if paired_us < -(
            MISSING_HARNESS_FRACTION * audit.harness_us_per_call + MISSING_HARNESS_SIGMAS * audit.noise_us
        ):
            raise RunFailure(
                Status.REJECTED,
                f"the GPU did less in the solution's timed requests than the harness's own work "
                f"around its calls ({-paired_us:.2f} µs a call less, of "
                f"{audit.harness_us_per_call:.2f}): the cache sweeps or copies before and "
                "after its calls did not run",
            )
        assert self.sampler is not None  # checked above
        check_reads(audit, self.sampler, ReadSamples(paired_ns, figures.paired_bytes, figures.harness_bytes), n)
        check_unswept(audit, figures.unswept_ns, n)
        if audit.claimed_us is not None and device_audit.understated(
            audit.claimed_us, audit.observed_us_per_call, audit.inflation_us, audit.noise_us
        ):
            allowance = (
                (
                    f", less {audit.inflation_us:.2f} µs the counters add to the reference's calls"
                    if audit.inflation_us
                    else ""
                )
                + f", less {device_audit.NOISE_SIGMAS:g} x its error of "
                f"{audit.noise_us:.2f} µs and the counters' {device_audit.FLOOR_US:g} µs scatter on small kernels"
            )
            raise RunFailure(
                Status.REJECTED,
                f"the claimed device time ({audit.claimed_us:.2f} µs per call) is below what "
                f"the GPU's own counters saw from outside the worker "
                f"({audit.observed_us_per_call:.2f} µs per call in the median of "
                f"{len(figures.requests)} timed requests, the harness's share taken "
                f"off{allowance})",
            )
        return audit

    def stop(self) -> None:
        """This workload's audit over (idempotent). The sampling goes on for the next timed
        workload; the run's end stops it (Supervisor._run_with), as it stops a failed one."""
        self.on = False

    @contextmanager
    def chained(self) -> Iterator[None]:
        """The segments sampled inside follow one another: the instant (or mark) that ends one
        starts the next (device_audit.DeviceSampler.segment). The caller
        runs nothing on the GPU between them, only host work (reading a reply, say)."""
        self._chain = False  # the first segment inside makes marks of its own
        try:
            yield
        finally:
            self._chain = None

    def _read(self) -> None:
        """The windows sampled so far, read (those read by their instants, in one request)."""
        assert self.sampler is not None
        started = time.monotonic()
        try:
            self.sampler.read_pending()
        except SamplerError as exc:
            raise self._failed(exc) from None
        finally:
            self.seconds += time.monotonic() - started

    def _segment(self, work: Callable[[], T], what: str) -> tuple[T, Sampled]:
        assert self.sampler is not None
        self.session.sync()  # the supervisor's own earlier GPU work stays out of the segment
        started, worked = time.monotonic(), 0.0

        def timed() -> T:
            nonlocal worked
            t0 = time.monotonic()
            try:
                return work()
            finally:
                self.session.sync()  # the segment's own GPU work ends inside it
                worked = time.monotonic() - t0

        try:
            chained = self._chain is True
            if self._chain is False:
                self._chain = True
            return self.sampler.segment(timed, what, chained=chained)
        except SamplerError as exc:
            raise self._failed(exc) from None
        finally:  # the timed rounds' own blocks are theirs; settling, marks and twins are the audit's
            own = worked if what in (SOLUTION, REFERENCE) else 0.0
            self.seconds += time.monotonic() - started - own

    def _pace(self, who: str, call_ns: float, wall_ns: int) -> None:
        """Note one request's (or harness block's) median call window and wall time, and set the
        harness block's wait per call to the solution's call window less its own (medians).

        The call windows are the worker's figures, so the wait is capped by the difference of
        the wall times the supervisor measured from outside, per call: a solution that claims
        longer calls than it makes cannot space the harness's work out more than its own.
        (The wall times alone would not do: a worker's request has a fixed cost of its own (the
        socket, the profiler's start and stop), and the harness's work spaced out by that made a
        back-to-back softmax read 1.56 µs for 4.3 on an H200.)"""
        n = len(self.session.sets)
        self.call_ns[who].append(call_ns)
        self.wall_ns[who].append(wall_ns / n)
        if self.call_ns[SOLUTION] and self.call_ns[HARNESS]:
            host = statistics.median(self.call_ns[SOLUTION]) - statistics.median(self.call_ns[HARNESS])
            outside = statistics.median(self.wall_ns[SOLUTION]) - statistics.median(self.wall_ns[HARNESS])
            self._twins[HARNESS].pace_ns = int(min(max(min(host, outside), 0), MAX_PACE_NS))

    def _sample_twins(self) -> None:
        for name in self._twins:
            if name != HARNESS:  # sampled with every request of the solution's
                self._sample(name)

    def _sample(self, name: str) -> Sampled:
        """One block of a twin (the harness's work of a request, the commit's included), sampled.
        UNSWEPT_HARNESS: the harness's twin without the cache sweeps."""
        unswept = name == UNSWEPT_HARNESS
        twin, n = self._twins[HARNESS if unswept else name], len(self.session.sets)
        e2e: list[int] = []
        wall = [0]

        def block() -> None:
            started = time.perf_counter_ns()
            e2e.extend(twin.block(n, evict=not unswept)[1])
            wall[0] = time.perf_counter_ns() - started

        def block_then_commit() -> None:
            block()
            self.commit()

        pace = twin.pace_ns
        window = self._segment(block_then_commit, name)[1]
        if name == HARNESS and e2e:
            self._pace(HARNESS, statistics.median(e2e) - pace, wall[0] - pace * n)
        self.figures.twins[name].append(window)
        return window

    def _wait_quiet(self, before: str) -> None:
        """A GPU busy with work that is not the harness's is looked at again a few times, and
        one that never gets quiet ends the run (the service runs it again), never passes it."""
        assert self.sampler is not None
        for _ in range(device_audit.QUIET_ATTEMPTS):
            idle = self.sampler.idle()
            if not device_audit.shared(idle):
                return
            time.sleep(device_audit.QUIET_WAIT_S)
        raise RunFailure(
            Status.REJECTED,
            f"the GPU stayed {idle.busy_ns / max(idle.span_ns, 1):.0%} busy with work that is "
            f"not the harness's before {before} (the device audit needs the GPU to itself: "
            "run the job again on a quiet GPU)",
        )

    def _failed(self, exc: SamplerError) -> RunFailure:
        """The counters unread once the sampler started: a solution could make that happen (by holding them), so
        the run is not passed unaudited; samples lost to a context elsewhere: measured again first (measure.py)."""
        self.stop()
        return (MeasureAgain if isinstance(exc, device_audit.SamplesLost) else RunFailure)(
            Status.REJECTED,
            f"the GPU's counters could not be read during the device audit ({exc}); "
            "nothing may hold them while a job runs",
        )
