"""The NVIDIA backend (backend.py): CUDA devices, timed by CUPTI, their caches made cold
between calls, described by nvidia-smi, their peaks measured once.

Its methods only call into the NVIDIA pieces (backend.NVIDIA_PIECES); the run's structure
stays in the supervisor, the worker and the timer, which are the same for every device.
"""

from __future__ import annotations

import ctypes
import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from gpuarena.harness.device import environment, icache_sweep
from gpuarena.harness.device.backend_base import Backend, ColdCaches, InputBudget

if TYPE_CHECKING:  # imported without torch: a run started ahead asks for worker_setup while torch loads
    import torch

    from gpuarena.contracts.records import Environment
    from gpuarena.harness.device.block import BlockSamples, BlockTimer

CU_LIMIT_PERSISTING_L2_CACHE_SIZE = 0x06
WALLCLOCK_METHOD = "cuda-sync-wallclock"
"""The fallback where CUPTI is unavailable: the host clock around the call and a device-wide synchronize."""
CUPTI_METHOD = "cupti-device-time"
"""Each call's device time from CUPTI's activity records (cupti_timing.py)."""
SMALL_SETS_BYTES = 256 << 20
"""Small input sets: as many as take this (five times an H200's L2), up to 64, not 16. A request
then streams its sets past L2 even without the sweeps (audit_checks.streams_past_l2), so a
small claim is judged by the unswept requests after FEW_REQUESTS swept ones; and where the sets
are too small for that, each request's figure is steadier (the 64 x 1000 softmax's honest
claim took 12 requests rather than 47). On GPU MODE's vectoradd at 1024 x 1024 (4 MiB sets, a
3 µs kernel) 16 sets took 19 rounds of about 85 ms, 42 sets 4-12 (H200). (Stop 41 measured 64
sets and kept 16 until the unswept requests judged a forged small claim at least as well with
64: they did, 3 of 3 each way, bench/research/results/small-sets-ab-unswept-NVIDIA-H200.json.)"""


def l2_read_sweep(device: torch.device) -> Callable[[], object]:
    """A function that reads (never writes) a buffer a few times larger than L2, so the next
    call starts with a clean, cold L2 and no write-back of ours is billed to it."""
    import torch

    l2 = torch.cuda.get_device_properties(device).L2_cache_size or (64 << 20)
    sweep = torch.ones(max(3 * l2, 128 << 20) // 4, dtype=torch.float32, device=device)
    sink = torch.empty((), dtype=torch.float32, device=device)
    return lambda: torch.sum(sweep, dim=0, out=sink)


def _libcuda() -> ctypes.CDLL | None:
    try:
        return ctypes.CDLL("libcuda.so.1")
    except OSError:
        return None


class NvidiaCaches(ColdCaches):
    """Instruction caches swept by a kernel of straight-line code (icache_sweep.py), then L2 by a
    read sweep of 3 x L2; persisting-L2 lines reset wherever a limit was set."""

    def __init__(self, device: torch.device, icache: bool, image: bytes | None):
        self.device = device
        self._icache_sweep: Callable[[], None] | None = None
        self._sweep: Callable[[], object] | None = None
        why = "not asked for"
        if icache:  # built now: the worker makes its Timer before importing the solution
            # loaded from the image compiled once per process (the worker's comes with its
            # prepare request), else compiled from the PTX
            self._icache_sweep, why = icache_sweep.build(device, image or icache_sweep.image(device))
        self.has_icache_sweep = self._icache_sweep is not None
        self.eviction = "L2 read sweep (3 x L2), " + (
            f"instruction-cache sweep ({icache_sweep.OPS} FMAs of straight-line code)"
            if self._icache_sweep
            else f"no instruction-cache sweep ({why})"
        )
        self._libcuda = _libcuda()

    def evict(self) -> None:
        if self._icache_sweep is not None:
            self._icache_sweep()
        if self._sweep is None:
            self._sweep = l2_read_sweep(self.device)
        self._sweep()

    def settle(self) -> None:
        """No persisting-L2 window survives into the next call: where a limit was set (only
        then can lines persist), persisting lines are reset and the limit goes back to 0."""
        if self._libcuda is None:
            return
        limit = ctypes.c_size_t(0)
        self._libcuda.cuCtxGetLimit(ctypes.byref(limit), CU_LIMIT_PERSISTING_L2_CACHE_SIZE)
        if limit.value:
            self._libcuda.cuCtxResetPersistingL2Cache()
            self._libcuda.cuCtxSetLimit(CU_LIMIT_PERSISTING_L2_CACHE_SIZE, ctypes.c_size_t(0))


class NvidiaBackend(Backend):
    """NVIDIA GPUs through CUDA."""

    name = "nvidia"
    timer = CUPTI_METHOD
    device_audit = True
    kernel_duration = True
    memory_sharing = "CUDA IPC and the driver's VMM file descriptors"
    accelerator = True
    min_samples = 30
    worker_allowance = 2 << 30
    """A CUDA context with torch's and the libraries' workspaces: about 0.5-1 GiB on an H200."""

    def __init__(self) -> None:
        import torch

        # bound now, when the backend is first looked up (before any solution code runs)
        self.synchronize = torch.cuda.synchronize  # type: ignore[method-assign]
        self._torch = torch

    def pin(self, device: torch.device) -> torch.device:
        cuda = self._torch.cuda
        return device if device.index is not None else self._torch.device("cuda", cuda.current_device())

    def activate(self, device: torch.device) -> None:
        self._torch.cuda.set_device(device)

    def seed(self, device: torch.device, seed: int) -> None:
        super().seed(device, seed)
        self._torch.cuda.default_generators[self.pin(device).index].manual_seed(seed)

    def spin(self, device: torch.device, cycles: int) -> None:
        with self._torch.cuda.device(self.pin(device)):
            self._torch.cuda._sleep(cycles)
        self.synchronize(device)

    def release_cached(self, device: torch.device) -> None:
        self._torch.cuda.empty_cache()

    def held_by(self, pids: set[int]) -> int | None:
        """The device memory the driver charges to `pids` (on every GPU of the machine: a worker
        sees one), from nvidia-smi. None without it, or where its process ids are not this
        process's own (another PID namespace: then not even this process is listed)."""
        import os
        import subprocess

        try:
            done = subprocess.run(
                ["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"],
                capture_output=True,
                text=True,
                timeout=20,
            )
        except (OSError, subprocess.TimeoutExpired):
            return None
        if done.returncode != 0:
            return None
        held, listed = 0, set()
        for line in done.stdout.splitlines():
            fields = [f.strip() for f in line.split(",")]
            if len(fields) == 2 and fields[0].isdigit() and fields[1].isdigit():
                listed.add(int(fields[0]))
                if int(fields[0]) in pids:
                    held += int(fields[1]) << 20
        return held if os.getpid() in listed or listed & pids else None

    def timing_method(self, asked: str | None, image: bytes | None = None) -> str:
        from gpuarena.harness.device import cupti_timing

        if asked is None or asked == CUPTI_METHOD:
            available = cupti_timing.available(image)  # loads the collector, starts CUPTI's threads
            return asked or (self.timer if available else WALLCLOCK_METHOD)
        return asked

    def timer_records(self) -> str | None:
        from gpuarena.harness.device import activity_timer

        if activity_timer.loaded() is not None:
            return "gpuarena's CUPTI collector"
        return f"torch's Kineto profiler ({activity_timer.why() or 'the collector was not loaded'})"

    def cold_caches(self, device: torch.device, icache: bool, image: bytes | None) -> ColdCaches:
        return NvidiaCaches(device, icache, image)

    def time_block(self, timer: BlockTimer, call: Any, n: int, prepare: Any, after: Any) -> BlockSamples | None:
        if timer.method != CUPTI_METHOD:
            return None
        from gpuarena.harness.device import cupti_timing

        return cupti_timing.cupti_block(timer, call, n, prepare, after)

    @staticmethod
    def worker_setup(device: str) -> dict[str, Any]:
        """The instruction-cache sweep compiled once, through the driver (no torch), and the
        harness's CUPTI collector built once (activity_timer.py)."""
        from gpuarena.harness.device import activity_timer

        return {"icache_image": icache_sweep.image_text(device), "timer_image": activity_timer.image_text()}

    def input_budget(self, device: torch.device) -> InputBudget:
        # large sets may take up to 15% of the free memory to reach FEW_SETS: the twins of the
        # device audit keep output buffers of their own for every set, and the supervisor a
        # private copy of its inputs. Small sets: as many as take SMALL_SETS_BYTES, up to 64
        free, _ = self._torch.cuda.mem_get_info(device)
        return InputBudget(
            min(2 << 30, int(free * 0.25)), 16, room=int(free * 0.15), block_bytes=SMALL_SETS_BYTES, many=64
        )

    def describe(self, device: torch.device, state: dict[str, Any] | None = None) -> Environment:
        return environment.capture_nvidia(self.pin(device).index or 0, state)

    def finish(self, env: Environment | None, device: torch.device) -> None:
        if env is not None:
            env.clocks_after = environment.gpu_state(self.pin(device).index or 0)

    def peaks(self, device: torch.device, env: Environment) -> dict[str, float] | None:
        from gpuarena.harness.device import peaks

        return peaks.device_peaks(device, env.device_uuid, env.device_name)


@functools.cache
def nvidia_backend() -> NvidiaBackend:
    """The one NVIDIA backend of this process, made (and its synchronize bound) on first use."""
    return NvidiaBackend()
