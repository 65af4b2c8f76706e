"""The GPU's own counters, read from outside the worker: a lower bound on a solution's device time.

The worker measures the solution's device time inside the solution's process, so a solution
can rewrite that figure (redteam/exploits/fake_results/patched_reply_function.py). The
supervisor cannot see into the worker, but the GPU can be watched from another process:
CUPTI PM sampling reads the device's performance monitors for the whole GPU at a fixed
interval (`pm_sampler.cpp`, built here once per CUDA install). The audit reads them over the
solution's timed requests themselves and takes the harness's share off (rounds_audit.py).

The metric is the busiest SM's active time (sm__cycles_active.max). On an H100 it read
0.52-1.16 x CUPTI's busy time for kernels from 1 µs to 175 µs, and 1.00 x for the
red-team's softmax of 64 x 1000 (bench/research/pm_sampling_cross.py), so a claimed median under
AUDIT_MARGIN x the observed time per call cannot be honest. It sees the SMs' work: work a
solution hands to the copy engines or the host is not covered. Beside it, in the same pass, a
memory-traffic counter (TRAFFIC): the bytes read from device memory, which tell the harness's
L2 sweep from work that keeps the SMs as busy without evicting anything.
"""

from __future__ import annotations

import json
import os
import select
import statistics
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from gpuarena.harness.device import cupti_build, sample_clock
from gpuarena.harness.proctree import HARNESS_PROCESSES

AUDIT_MARGIN = 0.7
"""A claimed median below this fraction of the observed per-call busy time is rejected."""
QUIET_ATTEMPTS = 6
QUIET_WAIT_S = 0.5
"""A GPU busy with other work before the audit is looked at again this many times, this far
apart, before the run is rejected (never skipped: a solution could keep it busy)."""
INTERVAL_CYCLES = 200_000
"""Sampling interval in GPU system-clock cycles (about 120 µs on an H100). Decoding costs about
19 µs of host time per sample there, so at 12 µs a sampler fell behind and its hardware buffer
overflowed (CUPTI_ERROR_OUT_OF_MEMORY). The busy time is a sum of counters over the samples,
so longer samples lose no work; they only blur where a segment starts and ends, which the
SETTLE_S waits around each segment cover."""
IMAGE_SAMPLES = 250
"""Samples per counter data image. Each decoding pass (and so each mark) re-initialises all of
it: a mark took 2.5-2.9 ms with 1000, 1.4 ms with 250 or 100, the segments' figures identical
(H100, bench/research/audit_mark_cost.py, results/audit-mark-cost-NVIDIA-H100.json). The
sampler's own thread decodes every 20 ms (about 170 samples), so the image rarely fills; a
full one is decoded again."""
METRIC = "sm__cycles_active.max"
"""The activity counter read, as a fraction of gr__cycles_elapsed.max per sample (the busiest SM's
time with a warp resident). GPUARENA_AUDIT_METRIC names another, to measure it (bench/)."""
TRAFFIC = "dram__bytes_read.sum,dram__bytes.sum"
"""The memory-traffic counters tried, in order, beside the activity one (the first the chip reads
in the same pass is summed per segment): the L2 sweep before every call reads three times the L2
from DRAM, which no work that leaves the caches warm does, however long it keeps an SM busy.
GPUARENA_AUDIT_TRAFFIC names others ("" for none, to measure without)."""
SETTLE_S = 0.001
"""Waited after starting and around each segment: the first sample spans the set-up, and a
segment's last sample must complete to be counted (both are many intervals)."""
REPLY_TIMEOUT_S = 60.0
"""A sampler that does not answer a command within this is killed and the audit skipped."""
IDLE_BUSY_FRACTION = 0.01
"""Above this busy fraction in a window with nothing of the job's running, the GPU is shared."""
CALIBRATION_SAMPLES = 256
"""The newest samples read to find the calibration burst (sample_clock.py): its quiet lead-in,
itself and the idle after it, about 4 ms of 120 µs samples, with room to spare."""
SOURCE = Path(__file__).with_name("pm_sampler.cpp")
T = TypeVar("T")


def cuda_home() -> Path | None:
    return cupti_build.cuda_home("cupti_pmsampling.h")


def compile_sampler(cuda: Path, output: Path, link: bool = True) -> subprocess.CompletedProcess:
    """Compile pm_sampler.cpp against the toolkit at `cuda` (link=False: the object file only)."""
    return cupti_build.compile_program(SOURCE, cuda, output, link=link)


def build_sampler() -> tuple[Path | None, str]:
    """The sampler binary (built once per CUDA install and source), or None and why not."""
    return cupti_build.build(
        SOURCE, "gpuarena-pm-sampler", "PM sampler", "cupti_pmsampling.h", "CUPTI PM sampling headers"
    )


class SamplerError(RuntimeError):
    """The sampler could not start or read a window."""


class SamplesLost(SamplerError):
    """A span its samples do not cover. On an H200 the PM sampler's samples left gaps of 1-26 ms
    while other processes made and ended CUDA contexts, and now and then with nothing beside
    (cuInit and nvidia-smi left none: bench/research/results/pm-sample-gaps-NVIDIA-H200-2026-12-04.json):
    a loss from outside the span's work, which the same work sampled again need not meet (measure.py)."""


@dataclass
class Window:
    busy_ns: float
    span_ns: float
    samples: int
    overflow: bool
    read_bytes: float | None = None
    """Bytes read from device memory (the traffic counter), None where the chip gave none."""

    def __sub__(self, earlier: Window) -> Window:
        read = None if self.read_bytes is None or earlier.read_bytes is None else self.read_bytes - earlier.read_bytes
        return Window(
            busy_ns=self.busy_ns - earlier.busy_ns,
            span_ns=self.span_ns - earlier.span_ns,
            samples=self.samples - earlier.samples,
            overflow=self.overflow,
            read_bytes=read,
        )


class Span:
    """A segment read by its two instants on the samples' clock (sample_clock.py): its figures
    are read with every other span pending, in one request, when one is first used."""

    def __init__(self, sampler: DeviceSampler, start_ns: int, end_ns: int, what: str):
        self.sampler, self.start_ns, self.end_ns, self.what = sampler, start_ns, end_ns, what
        self.window: Window | None = None

    def read(self) -> Window:
        if self.window is None:
            self.sampler.read_pending()
        if self.window is None:
            raise SamplerError(f"a window of an audit that is over (sampling {self.what})")
        return self.window

    @property
    def busy_ns(self) -> float:
        return self.read().busy_ns

    @property
    def span_ns(self) -> float:
        return self.read().span_ns

    @property
    def read_bytes(self) -> float | None:
        return self.read().read_bytes


SPAN_COVERED = 0.5
"""A span whose samples cover less of it than this lost too many: an error, never read as idle.
Between this and the whole span, the samples' busy time and bytes are scaled up to the span (what
was lost read like what was kept): on an H200 a 15.6 ms block of KernelBench's 6.4 GB softmax, its
reference's, was covered to 89%, and a bound of 90% rejected the honest run (stop 68); its marks,
before stop 67, read the same samples and left the lost part out without a word."""


class DeviceSampler:
    """One sampler process for one GPU, held for a run. Sampling starts and stops once per
    audit (`sampling()`, tens of ms each on an H100); the pieces of work inside are read by
    their instants once the samples' clock is known (`calibrate()`), else as differences of
    marks (`segment()`, one decoding pass each)."""

    def __init__(self, binary: Path, device_index: int):
        for leaving in list(_LEAVING):  # a sampler still leaving holds the counters until it is gone
            leaving.join()
            _LEAVING.discard(leaving)
        metric = os.environ.get("GPUARENA_AUDIT_METRIC", METRIC)
        traffic = os.environ.get("GPUARENA_AUDIT_TRAFFIC", TRAFFIC)
        self.process = subprocess.Popen(
            [str(binary), str(device_index), str(INTERVAL_CYCLES), str(IMAGE_SAMPLES), metric, traffic],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        HARNESS_PROCESSES.add(self.process.pid)
        self.running = False
        """Sampling on (`start`) and not yet stopped: one window serves a run's timed workloads."""
        ready = self._read()
        if not ready.get("ready"):
            self.close()
            raise SamplerError(ready.get("error", "the PM sampler did not start"))
        self.chip = str(ready.get("chip", ""))
        self.traffic = str(ready.get("traffic") or "")
        """The traffic counter read ('' for none: then `traffic_missing` says why)."""
        self.traffic_missing = (
            ""
            if self.traffic
            else (
                f"the chip reads none of {traffic!r} beside {metric}: {ready.get('traffic_error', '')}"
                if traffic
                else "turned off (GPUARENA_AUDIT_TRAFFIC='')"
            )
        )
        self.last: Window | None = None
        """The mark that ended the last segment (None once sampling stopped): where a chained
        segment starts."""
        self.offset_ns: int | None = None
        """The samples' clock less CLOCK_REALTIME (`calibrate`); None: segments are read by marks."""
        self.guard_ns = 0
        """Idle kept on each side of a segment read by its instants (sample_clock.py)."""
        self.clock_missing = "not calibrated"
        """Why segments are read by marks ('' when they are not)."""
        self.edge_ns: int | None = None
        """The host instant that ended the last span (None once sampling stopped): where a
        chained one starts."""
        self.pending: list[Span] = []
        self.least_covered = 1.0
        """The smallest share of a span its samples covered since the last calibration (windows_read says it)."""
        self.waited_s = 0.0
        """Wall time spent reading spans (the audit's, not the work's)."""

    def _read(self) -> dict:
        assert self.process.stdout is not None
        ready, _, _ = select.select([self.process.stdout], [], [], REPLY_TIMEOUT_S)
        if not ready:
            self.process.kill()
            return {"error": f"the PM sampler did not answer within {REPLY_TIMEOUT_S:.0f} s"}
        line = self.process.stdout.readline()
        try:
            return json.loads(line)
        except json.JSONDecodeError:
            return {"error": line.strip() or f"the PM sampler exited ({self.process.poll()})"}

    def _send(self, command: str) -> dict:
        assert self.process.stdin is not None
        try:
            self.process.stdin.write(command + "\n")
            self.process.stdin.flush()
        except OSError as exc:  # it exited after an error of its own
            raise SamplerError(f"the PM sampler is gone ({self.process.poll()}): {exc}") from None
        reply = self._read()
        if "error" in reply:
            raise SamplerError(reply["error"])
        return reply

    @staticmethod
    def _window(reply: dict) -> Window:
        read = reply.get("read_bytes")
        return Window(
            busy_ns=float(reply["busy_ns"]),
            span_ns=float(reply["span_ns"]),
            samples=int(reply["samples"]),
            overflow=bool(reply["overflow"]),
            read_bytes=float(read) if isinstance(read, (int, float)) and read >= 0 else None,
        )

    def start(self) -> None:
        self.last, self.offset_ns, self.edge_ns, self.clock_missing = None, None, None, "not calibrated"
        self.pending = []
        self._send("start")
        self.running = True
        time.sleep(SETTLE_S)

    def stop(self) -> None:
        self.last, self.edge_ns, self.running, self.pending = None, None, False, []
        self._send("stop")

    @contextmanager
    def sampling(self) -> Iterator[DeviceSampler]:
        """Sampling on for the block; stopped on the way out, whatever happened inside (an
        error of the block's wins over one of the sampler's)."""
        self.start()
        try:
            yield self
        except BaseException:
            try:
                self.stop()
            except SamplerError:
                pass
            raise
        self.stop()

    def mark(self) -> Window:
        """What the counters saw since sampling started, up to now."""
        return self._window(self._send("mark"))

    def calibrate(self, burst: Callable[[], None]) -> bool:
        """Measure where the samples lie on the host's clock (sample_clock.py) from `burst()`, the
        caller's spin on a quiet GPU that returns once it ended; True only after a quiet lead-in
        (sample_clock.LEAD_NS); False (and `clock_missing` says why): segments are read by marks
        until the next calibration. Spans of an earlier audit
        that nobody read (it failed on the way) are dropped: old samples are not kept for ever."""
        self.offset_ns, self.edge_ns, self.pending, self.least_covered = None, None, [], 1.0
        burst()  # untimed: its kernel loaded (a first launch waits ms for it) and the clocks up
        time.sleep(sample_clock.LEAD_NS / 1e9)
        host_start = time.time_ns()
        burst()
        host_end = time.time_ns()
        why = ""
        for _ in range(20):
            time.sleep(0.001)
            listed = self.newest_samples(CALIBRATION_SAMPLES)
            offset, guard, why = sample_clock.estimate(listed, host_start, host_end)
            if why != "incomplete":
                break
        if offset is None:
            self.clock_missing = why
            return False
        self.offset_ns, self.guard_ns, self.clock_missing = offset, guard, ""
        return True

    def newest_samples(self, count: int) -> list[list[float]]:
        """The newest `count` samples decoded, newest first: [start ns, end ns, busy ns, bytes read]."""
        return self._send(f"samples {count}")["samples"]

    def clocks(self) -> dict:
        """The sampler's reading of the host's clocks, without a decoding pass (a round trip)."""
        return self._send("clock")

    def window(self, start_ns: int, end_ns: int, what: str = "a window") -> Window:
        """What the counters saw between two instants of the samples' clock, read now."""
        span = Span(self, start_ns, end_ns, what)
        self.pending.append(span)
        return span.read()

    def windows_read(self) -> str:
        """How segments are read now (DeviceAudit.windows)."""
        if self.offset_ns is None:
            return "marks: " + self.clock_missing
        lost = (
            f", samples missing from up to {1 - self.least_covered:.0%} of a window"
            if self.least_covered < 0.995
            else ""
        )
        return f"instants, offset {self.offset_ns / 1e3:.1f} µs{lost}"

    def read_pending(self) -> None:
        """Every span not yet read, in one request."""
        pending, self.pending = [span for span in self.pending if span.window is None], []
        if not pending:
            return
        started = time.monotonic()
        try:
            reply = self._send("windows " + " ".join(f"{span.start_ns} {span.end_ns}" for span in pending))
        finally:
            self.waited_s += time.monotonic() - started
        for span, (busy, covered, samples, read) in zip(pending, reply["windows"], strict=True):
            whole = span.end_ns - span.start_ns
            if covered < SPAN_COVERED * whole:
                raise SamplesLost(
                    f"the samples cover {covered / 1e3:.0f} µs of {whole / 1e3:.0f} (sampling {span.what}): "
                    "another process made or ended a CUDA context on the GPU meanwhile"
                )
            scale = whole / covered if covered < whole else 1.0
            self.least_covered = min(self.least_covered, 1 / scale)
            span.window = Window(
                busy_ns=float(busy) * scale,
                span_ns=float(max(covered, whole)),
                samples=int(samples),
                overflow=bool(reply["overflow"]),
                read_bytes=float(read) * scale if read >= 0 else None,
            )

    def _span(self, work: Callable[[], T], what: str, chained: bool) -> tuple[T, Span]:
        """work() between two host instants, a guard of idle on each side (sample_clock.py)."""
        assert self.offset_ns is not None
        guard = self.guard_ns
        start = self.edge_ns if chained else None
        if start is None:
            time.sleep(2 * guard / 1e9)  # the caller's earlier GPU work ended before this
            start = time.time_ns() - guard
        self.edge_ns = None
        result = work()
        end = time.time_ns() + guard
        time.sleep(2 * guard / 1e9)  # nothing after it starts inside its last sample
        self.edge_ns = end
        span = Span(self, start + self.offset_ns, end + self.offset_ns, what)
        self.pending.append(span)
        return result, span

    def segment(self, work: Callable[[], T], what: str = "a segment", chained: bool = False) -> tuple[T, Window | Span]:
        """work() between two instants once the samples' clock is calibrated (a Span, read later
        with the others: `_span`), else between two marks (inside `sampling()`): what the GPU did
        meanwhile. The
        caller makes sure its own earlier GPU work has finished before (a device sync), and
        work() returns once its GPU work has. `what` names the work in errors (and lets a
        test's stand-in tell segments apart). chained: start at the mark that ended the last
        segment instead of settling and marking again (a mark is a decoding pass, about 1.4 ms
        on an H100, and the settling 1 ms): for segments run back to back, with nothing on the
        GPU between them (the caller's promise)."""
        if self.offset_ns is not None:
            return self._span(work, what, chained)
        try:
            before = self.last if chained else None
            if before is None:
                time.sleep(SETTLE_S)
                before = self.mark()
            self.last = None
            result = work()
            time.sleep(SETTLE_S)
            self.last = self.mark()
            return result, self.last - before
        except SamplerError as exc:
            raise SamplerError(f"{exc} (sampling {what})") from None

    def idle(self, seconds: float = 0.005) -> Window:
        """A segment with nothing of the job's on the GPU: anything seen is someone else's."""
        window = self.segment(lambda: time.sleep(seconds), "an idle GPU")[1]
        return window.read() if isinstance(window, Span) else window

    def close(self, wait: bool = True) -> None:
        """Quit the sampler. wait=False: asked to quit now and waited for in a thread, for a run
        whose process ends next (CUPTI's teardown took 0.19 s of a cold verdict, py-spy, H200); a
        sampler started later in this process waits for it first."""
        if self.process.poll() is None:
            try:
                assert self.process.stdin is not None
                self.process.stdin.write("quit\n")
                self.process.stdin.flush()
            except OSError:
                self.process.kill()
        if wait:
            self._reap()
            return
        thread = threading.Thread(target=self._reap, name="gpuarena-sampler-leaving", daemon=True)
        thread.start()
        _LEAVING.add(thread)

    def _reap(self) -> None:
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        HARNESS_PROCESSES.discard(self.process.pid)


_LEAVING: set[threading.Thread] = set()
"""Samplers of this process asked to quit and not yet gone (`close(wait=False)`)."""


def shared(idle: Window) -> bool:
    return idle.span_ns > 0 and idle.busy_ns / idle.span_ns > IDLE_BUSY_FRACTION


def inflation(reference_observed_us: float | None, reference_claimed_us: float | None) -> float:
    """What the counters see of a call beyond its timed device time, measured on the trusted
    reference: the reference sampled the same way (same shapes, same harness work) less its
    own timed median. A call's dirty lines are written back during the next cache sweep, in
    the same sampled request but outside the call's timed window, and the busiest SM's active
    time differs from CUPTI's kernel time by up to a couple of µs a kernel."""
    if reference_observed_us is None or reference_claimed_us is None:
        return 0.0
    return max(reference_observed_us - reference_claimed_us, 0.0)


def understated(
    claimed_us: float,
    observed_us_per_call: float,
    inflation_us: float = 0.0,
    noise_us: float = 0.0,
    floor_us: float | None = None,
) -> bool:
    """True when the claimed median cannot be honest against what the GPU's counters saw, less
    what the counters see of any call beyond its timed time (`inflation`) and NOISE_SIGMAS x
    the uncertainty of the observed figure (`noise_us`, see `median_error`) and `floor_us`
    (FLOOR_US unless given)."""
    floor = FLOOR_US if floor_us is None else floor_us
    return claimed_us < AUDIT_MARGIN * max(observed_us_per_call - inflation_us - NOISE_SIGMAS * noise_us - floor, 0.0)


NOISE_SIGMAS = 3.0
FLOOR_US = 1.0
"""What the counters see of a kernel of a few µs scatters from run to run beyond the median's
error, both ways: an honest 1.38 µs addcmul read 3.07 ± 0.32 µs on an H200 (2026-11-27) and
was REJECTED, where other runs read it at 0.09-0.76; a 4.3 µs softmax reads 0.8-5.3. So this
much more is allowed a call: the audit cannot judge a claim within about FLOOR_US of what the
counters saw (docs/harness.md, the open part of issue 16)."""


def median_error(values: list[float]) -> float:
    """The standard error of the median of `values`, from their median absolute deviation
    (robust: fewer than half of them can move it): 1.4826 x MAD x 1.2533 / sqrt(n)."""
    if len(values) < 2:
        return 0.0
    middle = statistics.median(values)
    mad = statistics.median(abs(v - middle) for v in values)
    return 1.4826 * mad * 1.2533 / len(values) ** 0.5
