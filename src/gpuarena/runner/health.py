"""A GPU's health check: a tiny CUDA op in a process of its own, pinned to one GPU by the
runner (CUDA_VISIBLE_DEVICES). Exit status 0 and the device's name on stdout when it works;
otherwise the error on stderr and a non-zero status.

    CUDA_VISIBLE_DEVICES=1 python -m gpuarena.runner.health
"""

from __future__ import annotations

import sys


def main() -> int:
    import torch

    if not torch.cuda.is_available() or torch.cuda.device_count() < 1:
        print(
            "no CUDA device is visible (CUDA_VISIBLE_DEVICES="
            f"{__import__('os').environ.get('CUDA_VISIBLE_DEVICES', '')!r})",
            file=sys.stderr,
        )
        return 1
    try:
        x = torch.arange(1024, device="cuda", dtype=torch.float32)
        total = float((x * 2).sum().item())
        torch.cuda.synchronize()
    except Exception as exc:  # a CUDA error, an ECC fault, a device that fell off the bus
        print(f"{type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    if total != 1023 * 1024:
        print(f"wrong answer from the device: {total} instead of {1023 * 1024}", file=sys.stderr)
        return 1
    print(torch.cuda.get_device_name(0))
    return 0


if __name__ == "__main__":
    sys.exit(main())
