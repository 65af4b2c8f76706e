"""Write every dataset problem's `bytes` and `flops` formulas (the figures the speed of light and
the physical-floor check use) into its problem.toml, derived from its reference
(gpuarena/dataset/traffic.py says how):

    .venv/bin/python scripts/derive_traffic.py                  # every problem under dataset/problems
    .venv/bin/python scripts/derive_traffic.py PROBLEM_DIR ...  # some problems
    .venv/bin/python scripts/derive_traffic.py --check          # list the problems lacking them (exit 1)

The file is edited as text: the two top-level lines are replaced where present, else added at the
end of the top-level keys (before the first table); where no formula covers every workload (a
merged problem's shapes), each [[workloads]] block gets its own traced `bytes`/`flops` line after
its name instead; every other byte stays as it was. Running it again changes nothing. A problem
whose reference cannot be traced keeps what it has and is listed with the reason; `--report FILE`
writes every problem's outcome as JSON.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tomllib
from pathlib import Path

TOP_KEY = re.compile(r"^(bytes|flops)\s*=")
TABLE = re.compile(r"^\s*\[")


def _split(text: str) -> tuple[list[str], int]:
    """The file's lines (ends kept) and the index of its first table header (or the line count)."""
    lines = text.splitlines(keepends=True)
    first = next((i for i, line in enumerate(lines) if TABLE.match(line)), len(lines))
    return lines, first


def with_formulas(text: str, formulas: dict[str, str | None]) -> str:
    """The problem.toml text with these top-level formulas set (None: removed, the workloads
    carrying their own figures); nothing else changes."""
    lines, first = _split(text)
    newline = "\r\n" if text.endswith("\r\n") or "\r\n" in text else "\n"
    rendered = {key: f"{key} = {json.dumps(value)}{newline}" for key, value in formulas.items() if value is not None}
    removed = {key for key, value in formulas.items() if value is None}
    head = [line for line in lines[:first] if not ((m := TOP_KEY.match(line)) and m.group(1) in removed)]
    for i, line in enumerate(head):
        match = TOP_KEY.match(line)
        if match and match.group(1) in rendered:
            head[i] = rendered.pop(match.group(1))
    if rendered:
        end = len(head)
        while end > 0 and not head[end - 1].strip():
            end -= 1
        if end > 0 and not head[end - 1].endswith(("\n", "\r")):
            head[end - 1] += newline
        head[end:end] = [rendered[key] for key in ("bytes", "flops") if key in rendered]
    return "".join(head + lines[first:])


WORKLOAD_KEY = re.compile(r"^\s*(bytes|flops)\s*=")
WORKLOADS = re.compile(r"^\s*\[\[workloads\]\]")
NAME = re.compile(r"^\s*name\s*=\s*\"([^\"]*)\"")


def with_workload_figures(text: str, figures: dict[str, dict[str, int]]) -> str:
    """The problem.toml text with each [[workloads]] block's own bytes/flops lines set to
    `figures[name]` (none where it has none): they go right after the block's name line, and no
    other line changes."""
    lines = text.splitlines(keepends=True)
    newline = "\r\n" if "\r\n" in text else "\n"
    out: list[str] = []
    in_workload = False
    for line in lines:
        if TABLE.match(line):
            in_workload = bool(WORKLOADS.match(line))
        if in_workload and WORKLOAD_KEY.match(line):
            continue  # set again below, from the figures
        out.append(line)
        name = NAME.match(line) if in_workload else None
        if name:
            own = figures.get(name.group(1), {})
            out += [f"{key} = {own[key]}{newline}" for key in ("bytes", "flops") if key in own]
    return "".join(out)


def lacking(text: str) -> list[str]:
    """The figures some workload gets neither from a top-level formula nor from its own line."""
    spec = tomllib.loads(text)
    workloads = spec.get("workloads", [])
    return [
        key for key in ("bytes", "flops") if key not in spec and (not workloads or any(key not in w for w in workloads))
    ]


def problem_dirs(paths: list[Path]) -> list[Path]:
    found: list[Path] = []
    for path in paths:
        if (path / "problem.toml").is_file():
            found.append(path)
        else:
            found.extend(sorted(p.parent for p in path.glob("level*/*/problem.toml")))
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("paths", nargs="*", type=Path, default=[Path("dataset/problems")])
    parser.add_argument("--check", action="store_true", help="only list the problems lacking bytes or flops")
    parser.add_argument("--dry-run", action="store_true", help="derive and report, write nothing")
    parser.add_argument("--report", type=Path, help="write each problem's outcome here as JSON")
    args = parser.parse_args(argv)
    folders = problem_dirs(args.paths)
    if args.check:
        without = []
        for folder in folders:
            missing = lacking((folder / "problem.toml").read_text())
            if missing:
                without.append(folder)
                print(f"{folder}: no {' and no '.join(missing)}")
        print(f"{len(folders) - len(without)} of {len(folders)} problems have bytes and flops")
        return 1 if without else 0

    from gpuarena.dataset.traffic import derive
    from gpuarena.problems.loader import load_problem

    report: dict[str, dict[str, object]] = {}
    written = unchanged = failed = 0
    for folder in folders:
        toml = folder / "problem.toml"
        problem = load_problem(folder)
        derived = derive(problem)
        formulas: dict[str, str | None] = {"bytes": derived.bytes, "flops": derived.flops}
        report[str(folder)] = {
            "bytes": derived.bytes,
            "flops": derived.flops,
            "counts": derived.counts,
            "reason": derived.reason,
            "workload_figures": derived.workload_figures(),
            "notes": derived.notes,
        }
        if derived.reason:
            failed += 1
            print(f"{folder}: {derived.reason}", file=sys.stderr)
        if not derived.complete or args.dry_run:
            continue
        with open(toml, newline="") as f:  # line ends as they are
            text = f.read()
        new = with_workload_figures(with_formulas(text, formulas), derived.workload_figures())
        if new == text:
            unchanged += 1
            continue
        with open(toml, "w", newline="") as f:
            f.write(new)
        load_problem(folder)  # still a valid problem, or fail loudly
        written += 1
    if args.report:
        args.report.write_text(json.dumps(report, indent=1, sort_keys=True) + "\n")
    print(f"{len(folders)} problems: {written} written, {unchanged} unchanged, {failed} without (some) figures")
    return 0


if __name__ == "__main__":
    sys.exit(main())
