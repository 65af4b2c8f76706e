"""Write the whole-layer problems (issue 48) from published model configs:

    .venv/bin/python scripts/make_layers.py -o dataset/layers              # the shipped root
    .venv/bin/python scripts/make_layers.py -o /tmp/layers --check         # and run gpuarena check on each
    .venv/bin/python scripts/make_layers.py -o /tmp/layers --check --device cuda --match 'deepseek*'

The same command writes the same files (tests/dataset/test_layers.py checks it). With --check,
each problem's `gpuarena check` runs on --device and what it says is printed, with the `outside`
share its reference's own float32 computation asks for (to be put in layers.TOLERANCE)."""

from __future__ import annotations

import argparse
import fnmatch
import sys
from pathlib import Path

from gpuarena.dataset.layers import LAYERS, write


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "-o",
        "--out",
        type=Path,
        required=True,
        help="problem root (dataset/layers; a dataset root's dataset.json lists them)",
    )
    parser.add_argument("--check", action="store_true", help="run gpuarena check on each problem written")
    parser.add_argument("--device", default="cpu", help="device for --check (cpu, cuda)")
    parser.add_argument("--match", default="*", help="only problems whose name (without layer-) matches")
    args = parser.parse_args(argv)
    chosen = [layer for layer in LAYERS if fnmatch.fnmatch(layer.name.removeprefix("layer-"), args.match)]
    folders = write(args.out, None if args.match == "*" else chosen)
    print(f"wrote {len(folders)} problems under {args.out}")
    if not args.check:
        return 0
    import torch

    from gpuarena.harness.problem_check import check_problem

    failed = 0
    for folder in folders:
        cuda = args.device.startswith("cuda")
        if cuda:
            torch.cuda.reset_peak_memory_stats()
        report = check_problem(folder, args.device)
        failed += not report.ok
        extra = f" outside needed: {report.outside_needed}" if report.outside_needed else ""
        if cuda:  # the check's peak: inputs of two seeds, the reference, its float32 computation
            extra += f" (peak {torch.cuda.max_memory_allocated() / 2**30:.1f} GiB)"
        print(f"{'ok  ' if report.ok else 'FAIL'} {folder.parent.name}/{folder.name}: {report.summary}{extra}")
        for error in report.errors:
            print(f"     - {error}")
    print(f"{len(folders) - failed} of {len(folders)} pass on {args.device}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
