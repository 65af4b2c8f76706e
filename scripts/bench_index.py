#!/usr/bin/env python3
"""Write bench/results/README.md: one row per result file in bench/results/ with the bench script
that made it, the machine and the date (both from the file name's conventions) and the command
where the file records one (a JSON file's "command" key, a Markdown file's "Command:" line).

    .venv/bin/python scripts/bench_index.py            # rewrite the index
    .venv/bin/python scripts/bench_index.py --check    # exit 1 when the index is stale

tests/test_docs.py fails when the index is stale: run this after adding a result file.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
INDEX = "README.md"

# The script behind each family of result files, by the start of the file name (the longest
# prefix that fits wins). A file no prefix fits gets the bench script (or gpuarena command) its
# recorded command names, else the first bench script its text names.
MADE_BY = {
    "adapter-cost": "bench/adapter_cost.py",
    "add-cute-dsl": "gpuarena run",
    "add-helion": "gpuarena run",
    "app-jobs": "bench/app_jobs.py",
    "chaos": "bench/chaos.py",
    "check-dataset": "gpuarena check",
    "contest-leaderboard-reads": "bench/contest_leaderboard_reads.py",
    "contest-standings-service": "bench/contest_standings_service.py",
    "eval-latency": "bench/eval_latency.py",
    "fidelity": "bench/fidelity.py",
    "first-hour": "bench/first_hour.sh",
    "fusions-check": "scripts/make_fusions.py",
    "gpu-tests": "bench/gpu/validate.sh",
    "gpu-validate": "bench/gpu/validate.sh",
    "dataset-distinct": "gpuarena dataset distinct",
    "harvest": "gpuarena harvest",
    "image-build": "scripts/image.sh",
    "job-latency": "bench/job_latency.py",
    "kernelbench-sizes": "bench/kernelbench_sizes.py",
    "languages-self-test": "gpuarena languages",
    "languages-softmax": "gpuarena run",
    "layers-check": "gpuarena check",
    "migration-examples": "gpuarena app",
    "multi-gpu": "bench/multi_gpu.py",
    "nine-workloads": "gpuarena run",
    "page-cost": "bench/page_cost.py",
    "peer-gpumode": "bench/peer_gpumode.py",
    "peer-kernelbench": "bench/peer_kernelbench.py",
    "peer-flashinfer": "bench/peer_flashinfer.py",
    "peer-material": "bench/peer_material.py",
    "profile-mode": "gpuarena run",
    "recheck-dataset": "gpuarena dataset recheck",
    "redteam-concurrency": "bench/redteam_concurrency.py",
    "redteam-cpu": "bench/redteam_stream.py",
    "redteam-cuda": "bench/redteam_stream.py",
    "redteam-gpu-only": "bench/redteam_stream.py",
    "service": "bench/service.py",
    "softmax-": "gpuarena run",
    "standings": "bench/standings.py",
    "suite": "gpuarena suite run",
    "warm-path": "bench/warm_path.py",
}
# scripts that moved since a result recorded their old path
MOVED = {"bench/gpu_validate.sh": "bench/gpu/validate.sh", "bench/gpu_carry.sh": "bench/gpu/carry.sh"}

DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
# the machine, as result names spell it: 4xH200 (several GPUs of one host), NVIDIA-H100 (one
# GPU, as nvidia-smi names it), cpu-vm (the 2-core development VM), a bare H200, or cpu
MACHINES = (
    re.compile(r"(?<![A-Za-z0-9])\d+x(?:NVIDIA-)?[A-Z]+\d+(?![A-Za-z0-9])"),
    re.compile(r"NVIDIA-[A-Z]+\d+"),
    re.compile(r"(?<![A-Za-z0-9])cpu-vm(?![A-Za-z0-9])"),
    re.compile(r"(?<![A-Za-z0-9])[A-Z]\d{2,3}(?![A-Za-z0-9])"),
    re.compile(r"(?<![A-Za-z0-9])cpu(?![A-Za-z0-9])"),
)
BENCH_SCRIPT = re.compile(r"\bbench/[\w/]+\.(?:py|sh)\b")
COMMAND_LINE = re.compile(r"\bCommands?\b[^:\n`]*:")
TEXT_SUFFIXES = {".json", ".md", ".txt", ".log"}
READ_AT_MOST = 200_000  # characters of a file read for its command and the scripts it names


class Row(NamedTuple):
    name: str
    made_by: str
    machine: str
    date: str
    command: str


def machine(name: str) -> str:
    for pattern in MACHINES:
        found = pattern.search(name)
        if found:
            return found.group(0)
    return ""


def _text(path: Path) -> str:
    if path.is_dir() or path.suffix not in TEXT_SUFFIXES:
        return ""
    with path.open(errors="replace") as file:
        return file.read() if path.suffix == ".json" else file.read(READ_AT_MOST)  # JSON parsed whole


def _document(path: Path, text: str) -> dict:
    """A JSON result's top-level object ({} for a list, another format or a broken file)."""
    if path.suffix != ".json":
        return {}
    try:
        document = json.loads(text)
    except ValueError:
        return {}
    return document if isinstance(document, dict) else {}


def command(path: Path, text: str) -> str:
    """The command the file records: a JSON object's "command" key, else the first code span
    after a Markdown "Command:" (or "Commands (...):") label, else an indented line after it."""
    if path.suffix == ".json":
        found = _document(path, text).get("command")
        if isinstance(found, list):
            found = "; ".join(str(part) for part in found)
        return " ".join(str(found).split()) if found else ""
    if path.suffix != ".md":
        return ""
    for label in COMMAND_LINE.finditer(text):
        after = text[label.end() : label.end() + 600]
        span = re.match(r"\s*`([^`]+)`", after) or re.match(r"[^`]*?\n\n((?: {4}.*\n?)+)", after)
        if span is None:
            span = re.search(r"`([^`]+)`", after.split("\n\n", 1)[0])
        if span:
            return " ".join(span.group(1).replace("\\\n", " ").split())
    return ""


def _script(named: str) -> str:
    named = MOVED.get(named, named)
    if (ROOT / named).exists():
        return named
    for folder in ("bench/research", "bench/gpu"):  # a probe or a driver's helper that moved there
        if (ROOT / folder / Path(named).name).exists():
            return f"{folder}/{Path(named).name}"
    return named


def made_by(name: str, recorded: str, text: str) -> str:
    """The bench script (or gpuarena command) that made the file (see MADE_BY)."""
    fits = [prefix for prefix in MADE_BY if name.startswith(prefix)]
    if fits:
        return MADE_BY[max(fits, key=len)]
    named = BENCH_SCRIPT.search(recorded)
    if named:
        return _script(named.group(0))
    if recorded.startswith("gpuarena "):
        words = [w for w in recorded.split()[1:3] if not w.startswith("-")]
        return " ".join(["gpuarena", *words[:1]])
    named = BENCH_SCRIPT.search(text)
    return _script(named.group(0)) if named else ""


def row(path: Path) -> Row:
    text = _text(path)
    recorded = command(path, text)
    dated = DATE.search(path.name)
    if dated is None and path.suffix == ".json":  # a record's own date, where the name has none
        dated = DATE.match(str(_document(path, text).get("date", "")))
    elif dated is None:  # or the date a page's or a log's heading gives
        dated = DATE.search("\n".join(text.splitlines()[:3]))
    return Row(
        path.name, made_by(path.name, recorded, text), machine(path.name), dated.group(0) if dated else "", recorded
    )


def rows(folder: Path = RESULTS) -> list[Row]:
    return [row(path) for path in sorted(folder.iterdir()) if path.name != INDEX and not path.name.startswith(".")]


def _cell(text: str, limit: int = 220) -> str:
    if not text:
        return ""
    text = text if len(text) <= limit else text[: limit - 1] + "…"
    text = text.replace("|", "\\|")
    fence = "``" if "`" in text else "`"
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def _made_by_cell(made: str, folder: Path) -> str:
    if not made:
        return ""
    if made.startswith("gpuarena"):
        return f"`{made}`"
    target = ROOT / made
    if target.exists() and folder.resolve() == RESULTS.resolve():
        return (
            f"[{made}](../{Path(made).relative_to('bench')})"
            if made.startswith("bench/")
            else f"[{made}](../../{made})"
        )
    return f"`{made}`"


def index(folder: Path = RESULTS) -> str:
    """The index's text, as scripts/bench_index.py writes it."""
    lines = [
        "# Results",
        "",
        "Every result file in this folder, one row each: the script that made it, the machine (from the",
        "file name: `cpu-vm` is the 2-core development VM, `NVIDIA-H100` and `NVIDIA-H200` one lent GPU,",
        "`4xH200` four of one host), the date (from the name, else the record's own) and the command",
        "where the file records one. What the figures mean is in [../measured.md](../measured.md) and",
        "[../README.md](../README.md).",
        "",
        "Generated by `scripts/bench_index.py`: do not edit; after adding a result file run",
        "`.venv/bin/python scripts/bench_index.py` (tests/test_docs.py fails while this is stale).",
        "",
        "| file | made by | machine | date | command |",
        "| --- | --- | --- | --- | --- |",
    ]
    for r in rows(folder):
        link = f"[{r.name}]({r.name}{'/' if (folder / r.name).is_dir() else ''})"
        lines.append(f"| {link} | {_made_by_cell(r.made_by, folder)} | {r.machine} | {r.date} | {_cell(r.command)} |")
    return "\n".join(lines) + "\n"


def is_current(folder: Path = RESULTS) -> bool:
    """Whether the folder's README.md is what index() writes now (a new result file makes it stale)."""
    written = folder / INDEX
    return written.is_file() and written.read_text() == index(folder)


def write(folder: Path = RESULTS) -> Path:
    (folder / INDEX).write_text(index(folder))
    return folder / INDEX


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="exit 1 when the index is stale, writing nothing")
    parser.add_argument("--folder", type=Path, default=RESULTS, help="the results folder (default: bench/results)")
    args = parser.parse_args()
    if args.check:
        current = is_current(args.folder)
        print(f"{args.folder / INDEX}: {'current' if current else 'stale: run scripts/bench_index.py'}")
        return 0 if current else 1
    print(f"wrote {write(args.folder)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
