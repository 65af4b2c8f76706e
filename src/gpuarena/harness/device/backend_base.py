"""The device backend's interface (backend.py picks one for a run): every step of a run that
depends on the device, so that the supervisor, the worker and the timer are written once."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the worker's prepare and a run started ahead look a backend up before torch is imported
    import torch

    from gpuarena.contracts.records import Environment
    from gpuarena.harness.device.block import BlockSamples, BlockTimer


@dataclass(frozen=True)
class InputBudget:
    """What a workload's rotating input sets may take on the device (session.count_sets)."""

    bytes: int
    """The sets' usual budget, in bytes."""
    most: int
    """The most sets."""
    room: int = 0
    """Bytes they may take to reach session.FEW_SETS (sets of large inputs)."""
    block_bytes: int = 0
    """Small sets: as many as take this many bytes, up to `many` (session.count_sets)."""
    many: int = 0


class ColdCaches:
    """What runs between two timed calls so that each starts from the same state (a GPU's
    caches made cold, as ncu's `--cache-control all` leaves them). The base: nothing to do."""

    eviction = ""
    """What it does, in words (the record's `timer_eviction`)."""
    has_icache_sweep = False

    def evict(self) -> None:
        """Take the last call's code and data out of the device's caches."""

    def settle(self) -> None:
        """What must hold before every call, evicting or not (no cache lines pinned by the last
        call survive); the timer synchronises the device after it."""


class Backend:
    """How runs on one kind of device are judged. Subclasses override what their device needs;
    the base class is the host: nothing to wait for, no caches the harness can clear."""

    name = ""
    """cpu or nvidia (a ROCm backend would be rocm)."""
    timer = ""
    """How a call's time is taken by default (Timing.method in the record)."""
    device_audit = False
    """Whether the device's own counters bound the claimed time from outside the worker
    (device_audit.py, rounds_audit.py)."""
    kernel_duration = False
    """Whether a second figure per kernel comes from the hardware's duration counter (kernel_duration.py)."""
    memory_sharing = ""
    """How the supervisor's buffers reach the worker (transport.py)."""
    host_timed = False
    """Calls are timed by the host's clock on the host's cores: the worker's CPU time then bounds
    what it claims (the CPU-time bound, twin.py), and its speed by the cores' ceiling."""
    accelerator = False
    """The worker needs the device's nodes (/dev/...) in its sandbox, and the GPU to itself while timing."""
    min_samples = 10
    """Timed calls per workload at least: a GPU's calls are short and cheap, so more are taken."""
    worker_allowance = 1 << 30
    """What a worker may keep of the device for itself (held_memory.py): on the host, torch's
    private memory is a few hundred MiB."""

    def pin(self, device: torch.device) -> torch.device:
        """device with its index made explicit (`cuda` is the current one), as records name it."""
        return device

    def activate(self, device: torch.device) -> None:
        """Make device the current one of this process (the supervisor's, the worker's)."""

    def synchronize(self, device: torch.device) -> None:
        """Wait until all work launched on device has finished. A backend binds what it calls when
        it is made (before any solution code runs): a solution that rebinds the framework's
        function later does not turn the harness's waits into no-ops."""

    def spin(self, device: torch.device, cycles: int) -> None:
        """Keep one of the device's cores busy for about `cycles` clock cycles, then wait for it:
        the device audit's clock calibration (sample_clock.py). Devices with an audit only."""
        raise NotImplementedError(f"{type(self).__name__} has no device audit to calibrate")

    def seed(self, device: torch.device, seed: int) -> None:
        """Seed what a call on device draws from: the host's default generator, and the device's
        (ProblemSpec.seeded_calls: the same before the reference's and the solution's call).
        Not torch.manual_seed, which seeds every backend's and took 100 µs a call on the 2-core
        VM, which the CPU's timing bounds then counted against the solution; this takes 1 µs."""
        import torch  # this module is imported before torch is (backend_base's header)

        torch.default_generator.manual_seed(seed)

    def timer_records(self) -> str | None:
        """Where this process's timer reads device records from, in words (None: no records)."""
        return None

    def timing_method(self, asked: str | None, image: bytes | None = None) -> str:
        """The method the timer uses (asked: a method named by the run), with what it needs set up
        (image: a timing library the supervisor built, from `worker_setup`)."""
        raise NotImplementedError

    def cold_caches(self, device: torch.device, icache: bool, image: bytes | None) -> ColdCaches:
        """The between-call step for this device (icache: sweep the instruction caches too; image:
        that sweep already compiled for device, from `worker_setup`)."""
        return ColdCaches()

    def time_block(self, timer: BlockTimer, call: Any, n: int, prepare: Any, after: Any) -> BlockSamples | None:
        """A block of calls timed by the device's own method, or None: the host's clock around
        each call (Timer._block_wallclock) does."""
        return None

    def release_cached(self, device: torch.device) -> None:
        """Give back what this process merely caches of the device's memory (a workload did not
        fit: held_memory.py). The host: malloc's free pages (where the C library is glibc)."""
        import ctypes

        try:
            ctypes.CDLL("libc.so.6").malloc_trim(0)
        except (OSError, AttributeError):
            pass

    def held_by(self, pids: set[int]) -> int | None:
        """What the processes `pids` hold of the device, read from outside them (held_memory.py),
        or None where it cannot be read. The host: their private resident memory (RssAnon; the
        shared input sets they map are the supervisor's)."""
        held, read = 0, False
        for pid in pids:
            try:
                with open(f"/proc/{pid}/status") as f:
                    for line in f:
                        if line.startswith("RssAnon:"):
                            held += int(line.split()[1]) << 10
                            read = True
            except (OSError, ValueError, IndexError):
                continue
        return held if read else None

    @staticmethod
    def worker_setup(device: str) -> dict[str, Any]:
        """What the supervisor adds to a worker's `prepare` request: work done once in the
        supervisor (a compiled sweep) so that no worker repeats it. Runs before torch is imported."""
        return {}

    def input_budget(self, device: torch.device) -> InputBudget:
        """What the rotating input sets of a workload may take on the device. Where the host
        times the calls, a block's first call pays for the worker waking up (its caches and
        TLB after the switch from the supervisor: 50-250 µs on the 2-core VM, against
        15 µs for the calls after it of a 1 x 256 RMSNorm), which the reference, timed in the
        supervisor's running thread, does not; block_mean counts it, so a solution identical
        to the reference scored 0.6-0.75 on workloads of 15-40 µs a call. Sets of small
        inputs are therefore more (up to 64 of them, 8 MiB in all): the same penalty shared
        by up to 8 times as many calls."""
        return InputBudget(256 << 20, 8, block_bytes=8 << 20, many=64)

    def describe(self, device: torch.device, state: dict[str, Any] | None = None) -> Environment:
        """This run's description of the machine (state: a reading taken ahead, harness/launch/ahead.py)."""
        raise NotImplementedError

    def finish(self, env: Environment | None, device: torch.device) -> None:
        """Add what is read at the end of a run to its description (clocks after, for a GPU)."""

    def peaks(self, device: torch.device, env: Environment) -> dict[str, float] | None:
        """The device's measured peaks (bandwidth, matrix rates), or None where there are none."""
        return None
