"""What the shared arena's device memory costs a step (cuda_vmm: cuMemCreate with a POSIX
descriptor, export, reserve, map, access), first in a fresh process and after, beside
torch's own allocator.

A cold ranked verdict of GPU MODE's vectoradd spent 0.91 s of its 4.8 s in
`cuda_vmm.allocate` (py-spy, H200, stop 66), a warm one about 0.03 s a verdict: this says
which step and which allocation pays it.

    python3 bench/research/vmm_cost.py --out vmm-cost.json
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import time

import torch

from gpuarena.harness import cuda_vmm

MiB = 1 << 20


def steps(index: int, nbytes: int) -> dict[str, float]:
    """One allocation, each step timed (ms), then released."""
    lib = cuda_vmm._cuda()
    out: dict[str, float] = {}
    t = time.perf_counter()

    def lap(name: str) -> None:
        nonlocal t
        now = time.perf_counter()
        out[name] = round((now - t) * 1e3, 3)
        t = now

    g = cuda_vmm.granularity(index)
    size = max(g, -(-nbytes // g) * g)
    prop = cuda_vmm._prop(index)
    handle = ctypes.c_ulonglong()
    lap("granularity")
    cuda_vmm._check(lib.cuMemCreate(ctypes.byref(handle), size, ctypes.byref(prop), 0), "cuMemCreate")
    lap("create")
    fd = ctypes.c_int(-1)
    cuda_vmm._check(
        lib.cuMemExportToShareableHandle(
            ctypes.byref(fd), handle.value, cuda_vmm.CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0
        ),
        "export",
    )
    lap("export")
    ptr = ctypes.c_ulonglong()
    cuda_vmm._check(lib.cuMemAddressReserve(ctypes.byref(ptr), size, 0, 0, 0), "reserve")
    lap("reserve")
    cuda_vmm._check(lib.cuMemMap(ptr.value, size, 0, handle.value, 0), "map")
    lap("map")
    access = cuda_vmm._AccessDesc(
        cuda_vmm._Location(cuda_vmm.CU_MEM_LOCATION_TYPE_DEVICE, index), cuda_vmm.CU_MEM_ACCESS_FLAGS_PROT_READWRITE
    )
    cuda_vmm._check(lib.cuMemSetAccess(ptr.value, size, ctypes.byref(access), 1), "access")
    lap("access")
    tensor = cuda_vmm._wrap(ptr.value, (nbytes,), torch.uint8, index)
    tensor.fill_(1)
    torch.cuda.synchronize()
    lap("first touch")
    del tensor
    lib.cuMemUnmap(ptr.value, size)
    lib.cuMemAddressFree(ptr.value, size)
    lib.cuMemRelease(handle.value)
    os.close(fd.value)
    lap("release")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    t0 = time.perf_counter()
    torch.empty(1, device="cuda")
    context_s = time.perf_counter() - t0
    index = torch.cuda.current_device()
    report: dict[str, object] = {"device": torch.cuda.get_device_name(), "context_s": round(context_s, 3)}
    runs = []
    for label, nbytes, count in [
        ("first 2 MiB", 2 * MiB, 1),
        ("2 MiB", 2 * MiB, 20),
        ("8 MiB", 8 * MiB, 5),
        ("128 MiB", 128 * MiB, 3),
        ("512 MiB", 512 * MiB, 3),
        ("2 GiB", 2048 * MiB, 2),
    ]:
        for _ in range(count):
            runs.append({"what": label, **steps(index, nbytes)})
    report["vmm"] = runs
    torch_ms = []
    for nbytes in (2 * MiB, 512 * MiB, 2048 * MiB):
        t = time.perf_counter()
        x = torch.empty(nbytes, dtype=torch.uint8, device="cuda")
        torch.cuda.synchronize()
        torch_ms.append({"bytes": nbytes, "ms": round((time.perf_counter() - t) * 1e3, 3)})
        del x
        torch.cuda.empty_cache()
    report["torch_empty"] = torch_ms
    text = json.dumps(report, indent=1)
    print(text)
    with open(args.out, "w") as f:
        f.write(text + "\n")


if __name__ == "__main__":
    main()
