"""The instruction-cache sweep: a kernel of about 240 KB of straight-line code run on every
SM before each timed call, so the call fetches its instructions afresh, as after ncu's
`--cache-control all`. The L2 read sweep that follows takes them out of L2 as well.

A data sweep alone leaves the last call's code in the SMs' instruction caches: on an H100 a
512³ bf16 matrix product then read 8% under ncu's Duration, and 1% under with this kernel
first (bench/research/results/ncu-window-NVIDIA-H100.md).

The kernel is PTX written here and loaded through the driver (cuModuleLoadData, which runs
ptxas on it in well under a second), launched with cuLaunchKernel on torch's current stream:
no toolkit and no Triton needed. (The same kernel from Triton took 164 s to compile on the
H100 machine: its passes grow faster than linearly with unrolled code.)
"""

from __future__ import annotations

import base64
import ctypes
import struct
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # a run compiles the kernel before it has imported torch (started.py); the worker has it
    import torch

OPS = 8192
"""FMAs with two constants each (an FFMA and a move on sm_90): 236 KB of machine code, more
than an SM's instruction caches hold."""
THREADS = 128
ENTRY = "gpuarena_icache_sweep"


def _f32(value: float) -> str:
    """A PTX single-precision literal (0f + the IEEE bits in hex)."""
    return "0f" + struct.pack(">f", value).hex().upper()


def ptx(ops: int = OPS) -> str:
    """The kernel: each thread loads one float, applies `ops` FMAs with distinct immediate
    constants (rounded FMAs cannot be folded, so each stays an instruction) and stores it."""
    body = "\n".join(
        f"    fma.rn.f32 %f1, %f1, {_f32(1.0 + (i + 1) * 1e-7)}, {_f32((i + 1) * 1e-3)};" for i in range(ops)
    )
    return f""".version 6.0
.target sm_52
.address_size 64

.visible .entry {ENTRY}(.param .u64 buf)
{{
    .reg .b32 %r<4>;
    .reg .f32 %f<2>;
    .reg .b64 %rd<5>;
    ld.param.u64 %rd1, [buf];
    cvta.to.global.u64 %rd2, %rd1;
    mov.u32 %r1, %ctaid.x;
    mov.u32 %r2, %tid.x;
    mad.lo.s32 %r3, %r1, {THREADS}, %r2;
    mul.wide.u32 %rd3, %r3, 4;
    add.s64 %rd4, %rd2, %rd3;
    ld.global.f32 %f1, [%rd4];
{body}
    st.global.f32 [%rd4], %f1;
    ret;
}}
"""


class _Driver:
    """The few driver calls the sweep needs, with their errors in words."""

    def __init__(self) -> None:
        self.lib = ctypes.CDLL("libcuda.so.1")
        self.lib.cuLaunchKernel.argtypes = (
            [ctypes.c_void_p]
            + [ctypes.c_uint] * 7
            + [ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_void_p)]
        )

    def check(self, result: int, call: str) -> None:
        if result != 0:
            name = ctypes.c_char_p()
            self.lib.cuGetErrorName(result, ctypes.byref(name))
            raise RuntimeError(f"{call}: {(name.value or b'?').decode()}")


CU_JIT_INPUT_PTX = 1
_IMAGES: dict[int, bytes] = {}
_IMAGES_LOCK = threading.Lock()


def image(device: torch.device | str) -> bytes | None:
    """The kernel compiled for `device` (a cubin, through the driver's linker), once per
    process and device; None where the driver cannot. A worker loads it instead of compiling
    the PTX: its home is new every run, so the driver's own cache never serves it, and
    compiling took 0.7 s of every worker's start on an H200. Driver calls only, no torch: a
    run's worker started ahead gets it while the run is still importing torch."""
    index = _index(device)
    with _IMAGES_LOCK:  # the prepare threads of workers started ahead, and the run
        if index not in _IMAGES:
            try:
                _IMAGES[index] = _link(index)
            except Exception:  # the worker compiles the PTX itself, as before
                return None
        return _IMAGES[index]


def image_text(device: torch.device | str) -> str | None:
    """`image` as text for a worker's `prepare` request (base64)."""
    compiled = image(device)
    return base64.b64encode(compiled).decode() if compiled else None


def _index(device: torch.device | str) -> int:
    """The CUDA ordinal of `cuda:N` (a string or a torch.device); a bare `cuda` is the current one."""
    index = device.split(":", 1)[1] if isinstance(device, str) and ":" in device else getattr(device, "index", None)
    if index is not None:
        return int(index)
    import torch

    return torch.cuda.current_device()


def _link(index: int) -> bytes:
    """Compiled in the device's primary context, retained here and kept: the one torch uses
    too, so this process's context is made once either way."""
    driver = _Driver()
    lib = driver.lib
    device, context = ctypes.c_int(), ctypes.c_void_p()
    driver.check(lib.cuInit(0), "cuInit")
    driver.check(lib.cuDeviceGet(ctypes.byref(device), index), "cuDeviceGet")
    driver.check(lib.cuDevicePrimaryCtxRetain(ctypes.byref(context), device), "cuDevicePrimaryCtxRetain")
    driver.check(lib.cuCtxPushCurrent_v2(context), "cuCtxPushCurrent")
    lib.cuLinkCreate_v2.argtypes = [ctypes.c_uint, ctypes.c_void_p, ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p)]
    lib.cuLinkAddData_v2.argtypes = [
        ctypes.c_void_p,
        ctypes.c_int,
        ctypes.c_char_p,
        ctypes.c_size_t,
        ctypes.c_char_p,
        ctypes.c_uint,
        ctypes.c_void_p,
        ctypes.c_void_p,
    ]
    lib.cuLinkComplete.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_size_t)]
    lib.cuLinkDestroy.argtypes = [ctypes.c_void_p]
    state = ctypes.c_void_p()
    try:
        driver.check(lib.cuLinkCreate_v2(0, None, None, ctypes.byref(state)), "cuLinkCreate")
        try:
            source = ptx().encode()
            driver.check(
                lib.cuLinkAddData_v2(state, CU_JIT_INPUT_PTX, source, len(source), b"icache_sweep.ptx", 0, None, None),
                "cuLinkAddData",
            )
            out, size = ctypes.c_void_p(), ctypes.c_size_t()
            driver.check(lib.cuLinkComplete(state, ctypes.byref(out), ctypes.byref(size)), "cuLinkComplete")
            return ctypes.string_at(out, size.value)  # copied: the linker's buffer goes with its state
        finally:
            lib.cuLinkDestroy(state)
    finally:
        lib.cuCtxPopCurrent_v2(ctypes.byref(ctypes.c_void_p()))


def build(device: torch.device, compiled: bytes | None = None) -> tuple[Callable[[], None] | None, str]:
    """The sweep for `device`, loaded and run once here (outside any window), or (None, why).
    compiled: the kernel already compiled for this device (`image`), else the PTX is."""
    import torch

    try:
        driver = _Driver()
        programs = 4 * torch.cuda.get_device_properties(device).multi_processor_count
        buf = torch.zeros(programs * THREADS, dtype=torch.float32, device=device)  # makes the context current
        module, function = ctypes.c_void_p(), ctypes.c_void_p()
        code = ctypes.create_string_buffer(compiled) if compiled else ptx().encode()
        driver.check(driver.lib.cuModuleLoadData(ctypes.byref(module), code), "cuModuleLoadData")
        driver.check(
            driver.lib.cuModuleGetFunction(ctypes.byref(function), module, ENTRY.encode()), "cuModuleGetFunction"
        )
        address = ctypes.c_uint64(buf.data_ptr())
        params = (ctypes.c_void_p * 1)(ctypes.addressof(address))

        def sweep() -> None:
            stream = ctypes.c_void_p(torch.cuda.current_stream(device).cuda_stream)
            driver.check(
                driver.lib.cuLaunchKernel(function, programs, 1, 1, THREADS, 1, 1, 0, stream, params, None),
                "cuLaunchKernel",
            )

        sweep.keep = (module, buf, address, params)  # type: ignore[attr-defined]  # alive as long as the sweep
        sweep()
        torch.cuda.synchronize(device)
    except Exception as exc:  # no driver, a driver too old for the PTX, an unusual platform
        return None, f"{type(exc).__name__}: {str(exc)[:200]}"
    return sweep, ""
