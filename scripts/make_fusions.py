"""Write the level-2 fusion problems (issue 48) from published model configs:

    .venv/bin/python scripts/make_fusions.py -o dataset/layers              # the shipped root
    .venv/bin/python scripts/make_fusions.py -o /tmp/layers --check         # and run gpuarena check on each
    .venv/bin/python scripts/make_fusions.py -o /tmp/layers --check --compiled --device cuda --match 'deepseek*'

The same command writes the same files (tests/dataset/test_fusions.py checks it). With --check,
each problem's `gpuarena check` runs on --device and what it says is printed, with the `outside`
share its reference's own float32 computation asks for (to be put in the fusion's tolerance).
With --compiled, torch.compile of each reference (an honest kernel that rounds elsewhere) is
judged against the reference with the problem's tolerance on its workloads for --device; the
recurrences are left out (compiling unrolls their loop over the sequence)."""

from __future__ import annotations

import argparse
import fnmatch
import sys
import time
from pathlib import Path

from gpuarena.dataset.fusions import FUSIONS, families, write


def check(folders: list[Path], device: str) -> int:
    """`gpuarena check` of each problem; the number that fail."""
    import torch

    from gpuarena.harness.problem_check import check_problem

    failed = 0
    for folder in folders:
        cuda = device.startswith("cuda")
        if cuda:
            torch.cuda.reset_peak_memory_stats()
        start = time.perf_counter()
        report = check_problem(folder, device)
        failed += not report.ok
        extra = f" outside needed: {report.outside_needed}" if report.outside_needed else ""
        if cuda:  # the check's peak: inputs of two seeds, the reference, its float32 computation
            extra += f" (peak {torch.cuda.max_memory_allocated() / 2**30:.1f} GiB)"
        took = time.perf_counter() - start
        print(
            f"{'ok  ' if report.ok else 'FAIL'} {folder.parent.name}/{folder.name}: {report.summary}{extra} [{took:.1f} s]"
        )
        for error in report.errors:
            print(f"     - {error}")
    print(f"{len(folders) - failed} of {len(folders)} pass gpuarena check on {device}")
    return failed


def compiled(folders: list[Path], device: str) -> int:
    """torch.compile of each reference judged against it, workload by workload; the number that fail."""
    import torch

    from gpuarena.harness.compare import compare
    from gpuarena.problems import load_problem

    failed = 0
    for folder in folders:
        problem = load_problem(folder)
        if "recurrence" in problem.spec.tags:
            print(f"skip {folder.name}: compiling unrolls its loop over the sequence")
            continue
        for workload in problem.spec.workloads_for(torch.device(device).type):
            generator = torch.Generator(device=device).manual_seed(1)
            inputs = problem.make_inputs(dict(workload.axes), workload.torch_dtype, torch.device(device), generator)
            start = time.perf_counter()
            try:
                with torch.no_grad():
                    ref, got = problem.reference(**inputs), torch.compile(problem.reference)(**inputs)
            except Exception as exc:  # the compiler's own failure: no verdict on the tolerance
                print(f"ERR  {folder.name} {workload.name}: {type(exc).__name__}: {str(exc).splitlines()[0][:160]}")
                torch._dynamo.reset()
                continue
            refs, gots = (ref if isinstance(ref, tuple) else (ref,)), (got if isinstance(got, tuple) else (got,))
            tol = problem.spec.tolerance_for(workload.dtype)
            results = [compare(n, g, r, tol) for n, g, r in zip(problem.spec.outputs, gots, refs)]
            ok = all(c.ok for c in results)
            failed += not ok
            detail = "; ".join(
                f"{n}: {c.outside} of {r.numel()} outside, largest error {c.max_abs_error:.3g}"
                + ("" if c.ok else f" ({c.reason})")
                for n, c, r in zip(problem.spec.outputs, results, refs)
            )
            print(
                f"{'ok  ' if ok else 'FAIL'} {folder.name} {workload.name} [{time.perf_counter() - start:.1f} s] {detail}"
            )
            torch._dynamo.reset()
    print(f"torch.compile: {failed} failed on {device}")
    return failed


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
    parser.add_argument("--compiled", action="store_true", help="judge torch.compile of each reference against it")
    parser.add_argument("--device", default="cpu", help="device for --check and --compiled (cpu, cuda)")
    parser.add_argument("--match", default="*", help="only problems whose name (without fusion-) matches")
    args = parser.parse_args(argv)
    chosen = [f for f in FUSIONS if fnmatch.fnmatch(f.name.removeprefix("fusion-"), args.match)]
    folders = write(args.out, None if args.match == "*" else chosen)
    print(f"wrote {len(folders)} problems under {args.out}")
    print("op families: " + ", ".join(f"{name} {count}" for name, count in families(chosen).most_common()))
    failed = check(folders, args.device) if args.check else 0
    failed += compiled(folders, args.device) if args.compiled else 0
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
