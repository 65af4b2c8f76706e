"""Can a worker of another user map the supervisor's CUDA buffers? Run as root on a GPU machine.

Variants: PyTorch's CUDA IPC (legacy cudaIpc handles, what the harness uses for a same-user
worker) to a same-user child, to a child of another uid (supervisor dumpable, then not), and
gpuarena.harness.cuda_vmm (cuMemCreate memory exported as a file descriptor, passed with
SCM_RIGHTS) to a child of another uid. The child reads the buffer, checks it, writes 7s.

Usage: python3 bench/research/cuda_ipc_probe.py
"""

from __future__ import annotations

import os
import pickle
import socket
import subprocess
import sys
import traceback


def child(mode: str, uid: int, gid: int, fd: int) -> None:
    sock = socket.socket(fileno=fd)
    data = b""
    fds: list[int] = []
    while not data.endswith(b"\n"):
        msg, got, _, _ = socket.recv_fds(sock, 1 << 20, 4)
        data += msg
        fds += got
    payload = pickle.loads(bytes.fromhex(data.decode().strip()))
    if uid >= 0:
        from gpuarena.harness.inside.sandbox import drop_privileges

        print("child rights:", drop_privileges(uid, gid, False), flush=True)
    import torch

    try:
        if mode == "vmm":
            from gpuarena.harness import cuda_vmm

            m = cuda_vmm.import_fd(torch.device("cuda:0"), fds[0], payload["size"])
            t = m.view(0, (1024,), torch.float32)
        else:
            from gpuarena.harness.transport import attach

            torch.empty(1, device="cuda")
            t = attach(payload)
        ok = bool(torch.equal(t, torch.arange(1024, device="cuda", dtype=torch.float32)))
        t.fill_(7)
        torch.cuda.synchronize()
        print(f"child {mode}: read ok={ok}, wrote 7s", flush=True)
    except Exception:
        traceback.print_exc()
        sys.exit(3)


def parent() -> None:
    import torch

    from gpuarena.harness import cuda_vmm
    from gpuarena.harness.inside.sandbox import protect_supervisor
    from gpuarena.harness.transport import SharedArena

    base = (1 << 30) + 12345 * 256
    uid, gid = base + 1, base
    dev = torch.device("cuda:0")
    results = {}
    for name, mode, other, protect in [
        ("legacy same user", "legacy", False, False),
        ("legacy other uid", "legacy", True, False),
        ("legacy other uid, supervisor non-dumpable", "legacy", True, True),
        ("vmm fd other uid, supervisor non-dumpable", "vmm", True, True),
    ]:
        fds: list[int] = []
        if mode == "vmm":
            m, fd, size = cuda_vmm.allocate(dev, 1024 * 4)
            t = m.view(0, (1024,), torch.float32)
            payload = {"size": size}
            fds = [fd]
        else:
            arena = SharedArena(dev, owner=(uid, gid) if other else None)
            t, payload = arena.empty((1024,), torch.float32)
        t.copy_(torch.arange(1024, device=dev, dtype=torch.float32))
        torch.cuda.synchronize()
        ours, theirs = socket.socketpair()
        if protect:
            protect_supervisor(True)
        proc = subprocess.Popen(
            [sys.executable, __file__, "child", mode, str(uid if other else -1), str(gid), str(theirs.fileno())],
            pass_fds=[theirs.fileno()],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        theirs.close()
        socket.send_fds(ours, [pickle.dumps(payload).hex().encode() + b"\n"], fds)
        for fd in fds:
            os.close(fd)
        out, _ = proc.communicate(timeout=120)
        if protect:
            protect_supervisor(False)
        torch.cuda.synchronize()
        written = bool((t == 7).all())
        results[name] = (proc.returncode, written)
        print(f"=== {name}: child exit {proc.returncode}, parent sees the child's 7s: {written}")
        print(out.decode(errors="replace")[-2500:])
        if mode == "vmm":
            del t
            m.close()
    print("SUMMARY")
    for name, (rc, written) in results.items():
        print(f"  {name}: {'WORKS' if rc == 0 and written else 'FAILS'} (exit {rc}, write seen {written})")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "child":
        child(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]))
    else:
        parent()
