"""`gpuarena dataset distinct` and `gpuarena dataset merge` (issue 48): how many computations a
set of problems holds, and one problem per computation. torch is imported inside the commands."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from gpuarena.cli.console import err, fail, out
from gpuarena.errors import GpuarenaError


def _root(problems: Path | None) -> Path:
    from gpuarena.bundled import bundled_root

    root = problems or bundled_root()
    if not root.is_dir():
        raise GpuarenaError(f"{root}: not a folder of problems")
    return root


def distinct_cmd(
    problems: Annotated[
        Path | None, typer.Argument(help="A folder of problems (default: the bundled problems), e.g. dataset/problems")
    ] = None,
    json_out: Annotated[Path | None, typer.Option("--json", help="Write the report here as JSON")] = None,
) -> None:
    """Count the distinct computations among problems: exact duplicates (the same reference graph
    on the same shapes, whatever the names), families (the same graph on other shapes), per level,
    and each level's largest op family (docs/dataset.md)."""
    from gpuarena.dataset.distinct import DOMINANT_SHARE, distinct

    try:
        root = _root(problems)
        with err.status("tracing references") as status:
            report = distinct(root, progress=lambda text: status.update(f"tracing {text}"))
    except GpuarenaError as exc:
        fail(exc)
        return
    if json_out is not None:
        json_out.write_text(report.model_dump_json(indent=2) + "\n")
    out.print(
        f"{report.problems} problems in {root}: {report.exact} distinct on their shapes, "
        f"{report.distinct} distinct computations; {len(report.duplicate_groups)} groups of exact duplicates "
        f"({sum(len(g.problems) for g in report.duplicate_groups)} problems), {len(report.families)} families "
        "on other shapes",
        highlight=False,
    )
    out.print("level  problems  on-shapes  distinct  largest op family (share of distinct, of weight)", highlight=False)
    for level in report.levels:
        flag = f"  more than {DOMINANT_SHARE:.0%}" if level.dominated else ""
        out.print(
            f"{level.level:>5}  {level.problems:>8}  {level.exact:>9}  {level.distinct:>8}  {level.largest_kind} "
            f"{level.largest_kind_distinct} ({level.largest_share:.0%}, {level.largest_weight_share:.0%}){flag}",
            highlight=False,
            markup=False,
        )
    for group in report.duplicate_groups:
        out.print(f"  same: {', '.join(group.problems)}", highlight=False, markup=False)
    for problem in report.untraced:
        out.print(f"  untraced (counted alone): {problem}", highlight=False, markup=False)


def merge_cmd(
    problems: Annotated[Path, typer.Argument(help="A folder of problems, e.g. dataset/problems")],
    output: Annotated[Path, typer.Option("-o", "--output", help="A new folder for the merged copy")],
    exact_only: Annotated[
        bool, typer.Option("--exact-only", help="Fold exact duplicates only, not families on other shapes")
    ] = False,
    json_out: Annotated[Path | None, typer.Option("--json", help="Write the plan (what folds into what) here")] = None,
) -> None:
    """Write a copy of the problems with one problem per computation: the problems of a family (or,
    with --exact-only, exact duplicates) folded into the heaviest, their shapes its workloads, weights
    summed, the loosest tolerance per field; dataset.json follows (docs/dataset.md)."""
    from gpuarena.dataset.distinct import identities
    from gpuarena.dataset.merge import plan, write
    from gpuarena.problems.loader import discover

    try:
        found = discover(_root(problems))
        with err.status("tracing references") as status:
            ids = identities(found, progress=lambda text: status.update(f"tracing {text}"))
        merge_plan, specs = plan(found, ids, exact_only=exact_only)
        write(problems, output, merge_plan, specs)
    except GpuarenaError as exc:
        fail(exc)
        return
    if json_out is not None:
        json_out.write_text(merge_plan.model_dump_json(indent=2) + "\n")
    out.print(
        f"{merge_plan.problems} problems -> {merge_plan.after} in {output}: {len(merge_plan.folds)} merged problems "
        f"({sum(f.exact for f in merge_plan.folds)} of exact duplicates only); {len(merge_plan.apart)} problems of a "
        f"family joined none (--json says why). Check them: gpuarena check {output}",
        highlight=False,
    )
