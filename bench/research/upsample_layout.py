"""Issue 48: SegFormer's upsample_bilinear2d on its recorded channels_last input and on a
contiguous one, CUDA events, median of 20 calls (the eager suite had timed it 11x above the
model's own recording: the harness's shared input buffers were contiguous then).

    python3 bench/research/upsample_layout.py --out upsample-layout.json      # on a GPU
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable

import torch


def median_us(fn: Callable[[], object], n: int = 20) -> float:
    fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(n):
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) * 1e3)
    return sorted(times)[n // 2]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="upsample-layout.json")
    args = parser.parse_args()
    found: dict[str, float] = {}
    for side in (7, 14, 28):  # SegFormer-B0's decode head upsamples each stage to 56 x 56 (batch 64, 256 channels)
        x = torch.randn(64, 256, side, side, device="cuda", dtype=torch.bfloat16)
        last = x.contiguous(memory_format=torch.channels_last)
        up = torch.ops.aten.upsample_bilinear2d.default
        found[f"upsample {side}->56 contiguous us"] = median_us(lambda: up(x, [56, 56], False))
        found[f"upsample {side}->56 channels_last us"] = median_us(lambda: up(last, [56, 56], False))
    result = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "medians": found}
    print(json.dumps(result, indent=1))
    with open(args.out, "w") as f:
        json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
