"""How much of each peer's whole published material gpuarena's importers take on this machine
(issue 49): every KernelBench problem file, every GPU MODE task folder, every FlashInfer-Trace
definition (with its workloads) and solution, each run through the real importer in a process of
its own, with a time limit, and every outcome classified (imported, or refused with its reason
shortened to a category).

The peers' files are not in this repository, nor ever committed to it: pass local copies,
fetched at run time (any of the three may be left out):

    git clone https://github.com/ScalingIntelligence/KernelBench /tmp/peers/KernelBench
    git clone https://github.com/gpu-mode/reference-kernels /tmp/peers/reference-kernels
    git clone https://huggingface.co/datasets/flashinfer-ai/flashinfer-trace /tmp/peers/flashinfer-trace

    python bench/peer_material.py --kernelbench /tmp/peers/KernelBench \\
        --gpumode /tmp/peers/reference-kernels --flashinfer-trace /tmp/peers/flashinfer-trace \\
        --device cpu --out bench/results                  # on the CPU VM: cpu-vm
    python bench/peer_material.py ... --device cuda --out bench/results   # on a GPU machine
    python bench/peer_material.py --kernelbench /tmp/peers/KernelBench --limit 8 --out /tmp/pm   # a quick look

- `--kernelbench DIR`: a KernelBench checkout (its KernelBench/level1..level4 folders; DIR may
  be the KernelBench/ folder itself). Each file: `gpuarena import kernelbench FILE -o W/kernelbench`,
  the level from its folder.
- `--gpumode DIR`: a gpu-mode/reference-kernels checkout (its problems/ folder, or DIR itself):
  every folder holding task.yml. Each folder: `gpuarena import gpumode FOLDER -o W/gpumode/GROUP`,
  GROUP being the folders above it (pmpp, pmpp_v2), so tasks of one name in two groups
  (pmpp/sort_py, pmpp_v2/sort_py) never meet in one output folder; the name gpuarena gives each
  when they are imported together (interop/gpumode.py `problem_names`) is recorded too.
- `--flashinfer-trace DIR`: a folder in FlashInfer-Trace's layout, as FlashInfer-Bench's TraceSet
  reads it: definitions/**/*.json (definitions/OP_TYPE/NAME.json in the dataset),
  workloads/**/*.jsonl (workloads/OP_TYPE/NAME.jsonl, one Trace a line naming its definition),
  solutions/**/*.json (solutions/AUTHOR/OP_TYPE/DEFINITION/NAME.json). Each definition with
  workloads: `gpuarena import flashinfer DEF -w WORKLOADS -o W/flashinfer/NAME`; each solution
  whose definition was imported: `gpuarena import flashinfer-solution SOL --problem
  W/flashinfer/DEFINITION -o W/flashinfer-solutions/...`.

`--device` is passed as the importers' `--check-device` (cpu or cuda); `--jobs` runs that many
imports at once; `--gpus N` shares them out among N GPUs (each import sees one, the one running
the fewest imports when it starts), and an import that ran out of memory beside others on its GPU
is run again at the end, alone there (the record says so); `--groups` takes only the named groups
(KernelBench's level3, GPU MODE's pmpp_v2), `--names` only the named items; `--submissions`
also judges GPU MODE's own submissions of each imported task (bench/peer_submissions.py;
`--gpumode-eval`: GPU MODE's own eval.py judges each too); `--limit N` takes at most N items of each material, evenly from its groups
(levels, GPU MODE groups, op types); `--timeout` (300 s) and `--max-memory-gb` (8, through
prlimit) bound each import, whose overrun is its outcome (timeout, out of memory), never the
run's end; `--budget S` bounds the whole run (items not started by then are listed as not run). Writes OUT/peer-material-MACHINE-DATE.json (every item with its command, outcome,
category and the importer's own messages) and .md (the table and the refusals by category), and
prints the table. MACHINE is cpu-vm on the CPU, else the GPU's name (NVIDIA-H200).
`--reclassify REPORT` applies today's categories to a report's recorded messages; `--merge
REPORT...` makes one report of several runs on one machine (an item's outcome from the last that
ran it: a run again of what an earlier one refused, after a fix). How an
import's output is read and a refusal's reason shortened to a category: bench/peer_refusals.py.
How each import runs (its process, time limit, memory, cores and GPU): bench/peer_material_run.py.
What a run records of each item and how the report is written: bench/peer_material_report.py.
"""

from __future__ import annotations

import argparse
import datetime
import itertools
import json
import platform
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]

# reading an import's output and a refusal's category: peer_refusals.py, beside this file
# (bench/ is not a package, so it is found by path); its names are importable from here too
sys.path.insert(0, str(Path(__file__).resolve().parent))
from peer_material_report import PEER_COUNTS, Item, write_report  # noqa: E402
from peer_material_run import (  # noqa: E402, F401  (names the tests and callers take from here)
    GpuSlots,
    _slug,
    import_command,
    run_all,
    run_flashinfer,
)
from peer_refusals import BUDGET_SPENT, IMPORTED, REFUSED, TIMEOUT, classify, parse_output  # noqa: E402, F401
from peer_submissions import imported_problems, judge_all  # noqa: E402
from peer_submissions import write as write_submissions  # noqa: E402

# ---------------------------------------------------------------------------------------------
# The material


def kernelbench_items(root: Path) -> list[Item]:
    """Every problem file of a KernelBench checkout (KernelBench/levelN/*.py), level by level."""
    base = root / "KernelBench" if (root / "KernelBench").is_dir() else root
    items = []
    for level in sorted(base.glob("level[0-9]*"), key=lambda p: int(p.name.removeprefix("level") or 0)):
        if not level.is_dir() or not level.name.removeprefix("level").isdigit():
            continue
        for path in sorted(level.glob("*.py"), key=_natural):
            items.append(Item("kernelbench", f"{level.name}/{path.name}", level.name, str(path)))
    return items


def gpumode_items(root: Path) -> list[Item]:
    """Every GPU MODE task folder (a folder holding task.yml) of a reference-kernels checkout, with
    the name `gpuarena import gpumode` gives it when all are imported together."""
    base = root / "problems" if (root / "problems").is_dir() else root
    folders = sorted({p.parent for p in base.rglob("task.yml")}, key=lambda p: p.relative_to(base).parts)
    names = _gpumode_names(folders)
    items = []
    for folder in folders:
        relative = folder.relative_to(base)
        group = "/".join(relative.parts[:-1]) or "."
        items.append(Item("gpumode", str(relative), group, str(folder), {"problem_name": names.get(folder, "")}))
    return items


def _gpumode_names(folders: list[Path]) -> dict[Path, str]:
    try:
        from gpuarena.interop.gpumode import problem_names
    except ImportError:  # run with a Python that lacks gpuarena: the names are only recorded
        return {}
    return problem_names(folders)


def _definition_name(path: Path) -> str:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return path.stem
    name = data.get("name") if isinstance(data, dict) else None
    return name if isinstance(name, str) and name else path.stem


def _workloads_by_definition(root: Path) -> dict[str, Path]:
    """definition name -> its workloads file: a JSONL file under workloads/ is a definition's by
    the `definition` its first line names, else by its file name."""
    found: dict[str, Path] = {}
    for path in sorted((root / "workloads").rglob("*.jsonl")):
        name = path.stem
        try:
            with path.open(encoding="utf-8") as file:
                first = next((line for line in file if line.strip()), "")
            named = json.loads(first).get("definition") if first else None
            if isinstance(named, str) and named:
                name = named
        except (OSError, ValueError, AttributeError):
            pass
        found.setdefault(name, path)
    return found


def flashinfer_items(root: Path) -> tuple[list[Item], list[Item]]:
    """The definitions (each with its workloads file, where the material has one) and the
    solutions (each with the definition it names) of a folder in FlashInfer-Trace's layout."""
    workloads = _workloads_by_definition(root)
    definitions = []
    for path in sorted((root / "definitions").rglob("*.json")):
        relative = path.relative_to(root / "definitions")
        name = _definition_name(path)
        extra = {"definition": name}
        if name in workloads:
            extra["workloads"] = str(workloads[name])
        group = relative.parts[0] if len(relative.parts) > 1 else "."
        definitions.append(Item("flashinfer-definition", str(relative), group, str(path), extra))
    solutions = []
    for path in sorted((root / "solutions").rglob("*.json")):
        relative = path.relative_to(root / "solutions")
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            definition = str(data.get("definition", "")) if isinstance(data, dict) else ""
        except (OSError, ValueError):
            definition = ""
        group = relative.parts[0] if len(relative.parts) > 1 else "."
        solutions.append(Item("flashinfer-solution", str(relative), group, str(path), {"definition": definition}))
    return definitions, solutions


def _natural(path: Path) -> list[Any]:
    """1_, 2_, ..., 10_: KernelBench's files in their numbers' order."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", path.name)]


def chosen(items: list[Item], groups: str | None, names: str | None = None) -> list[Item]:
    """The items of the named groups, or of the named items (level3/35_LSTM.py; @FILE: one a
    line); all where neither is given."""
    if groups:
        wanted = {g.strip() for g in groups.split(",") if g.strip()}
        items = [i for i in items if i.group in wanted]
    if names:
        listed = Path(names[1:]).read_text().split() if names.startswith("@") else names.split(",")
        items = [i for i in items if i.name in {n.strip() for n in listed}]
    return items


def limited(items: list[Item], limit: int | None) -> list[Item]:
    """At most `limit` items, taken in turn from each group (so a quick run sees every level)."""
    if limit is None or len(items) <= limit:
        return items
    groups: dict[str, list[Item]] = {}
    for item in items:
        groups.setdefault(item.group, []).append(item)
    taken = [i for i in itertools.chain(*itertools.zip_longest(*groups.values())) if i is not None][:limit]
    order = {id(item): n for n, item in enumerate(items)}
    return sorted(taken, key=lambda i: order[id(i)])


# ---------------------------------------------------------------------------------------------
# The table


def machine_name(device: str) -> str:
    """cpu-vm on the CPU, else the GPU's name as bench/results spells it (NVIDIA-H200)."""
    if device == "cpu":
        return "cpu-vm"
    try:
        import torch

        return torch.cuda.get_device_name(0).replace(" ", "-")
    except Exception:  # no torch, or no GPU where one was asked for: the file still gets a name
        return device


def _revision(folder: Path | None) -> str:
    if folder is None or not (folder / ".git").exists():  # a checkout's own root only
        return ""
    done = subprocess.run(["git", "-C", str(folder), "rev-parse", "HEAD"], capture_output=True, text=True)
    return done.stdout.strip() if done.returncode == 0 else ""


def reclassify(path: Path, command: str) -> int:
    """A report's refusals put in today's CATEGORIES from the importers' messages it recorded
    (the imports are not run again; time-outs, kills and items not run keep their category)."""
    report = json.loads(path.read_text())
    items = [Item(**entry) for entry in report["items"]]
    kept = (TIMEOUT, BUDGET_SPENT)
    for item in items:
        if item.outcome == REFUSED and item.rc is not None and item.rc >= 0 and item.category not in kept:
            item.category = classify(item.messages)
    report["reclassified"] = command
    write_report(report, items, set(_given(report)), path.with_suffix(""))
    return 0


def merge(paths: list[Path], out: Path, command: str) -> int:
    """Reports of runs on one machine as one: each item's outcome from the last report that ran
    it (a run again of what an earlier one refused, after a fix), every source report named."""
    reports = [json.loads(p.read_text()) for p in paths]
    by_name: dict[tuple[str, str], Item] = {}
    for report, path in zip(reports, paths):
        for entry in report["items"]:
            item = Item(**entry)
            if item.category != BUDGET_SPENT or (item.peer, item.name) not in by_name:
                item.extra = {**item.extra, "report": path.name}
                by_name[(item.peer, item.name)] = item
    items = list(by_name.values())
    merged = {**reports[0], "command": command, "merged_from": [p.name for p in paths]}
    merged["elapsed_s"] = round(sum(r.get("elapsed_s", 0) for r in reports), 1)
    given = {g for r in reports for g in _given(r)}
    out.mkdir(parents=True, exist_ok=True)
    write_report(merged, items, given, out / f"peer-material-{merged['machine']}-{merged['date']}-merged")
    return 0


def _given(report: dict[str, Any]) -> list[str]:
    named = {"kernelbench": ["kernelbench"], "gpumode": ["gpumode"]}
    named["flashinfer-trace"] = ["flashinfer-definition", "flashinfer-solution"]
    return [peer for source in report["material"] for peer in named[source]]


def _say(line: str) -> None:
    print(line, flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--kernelbench", type=Path, help="a KernelBench checkout (KernelBench/level1..level4)")
    parser.add_argument("--gpumode", type=Path, help="a gpu-mode/reference-kernels checkout (problems/)")
    parser.add_argument("--flashinfer-trace", type=Path, help="a folder in FlashInfer-Trace's layout")
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu", help="the importers' --check-device")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results", help="where the JSON and Markdown go")
    parser.add_argument("--jobs", type=int, default=1, help="imports at once")
    parser.add_argument(
        "--gpus", type=int, default=0, help="share the imports out among this many GPUs (CUDA_VISIBLE_DEVICES)"
    )
    parser.add_argument("--limit", type=int, help="at most this many items of each material (a quick run)")
    parser.add_argument(
        "--groups",
        help="only these groups, comma-separated: KernelBench's levels (level3), GPU MODE's folders (pmpp_v2)",
    )
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds each import may take")
    parser.add_argument(
        "--max-memory-gb",
        type=float,
        help="each import's address space at most (0: no cap; default 8 on the CPU, none with CUDA, whose "
        "context maps far more address space than it uses)",
    )
    parser.add_argument(
        "--submissions",
        action="store_true",
        help="also judge every GPU MODE submission of each imported task (peer_submissions.py)",
    )
    parser.add_argument(
        "--gpumode-eval",
        action="store_true",
        help="with --submissions: GPU MODE's own eval.py judges each Python submission too (test mode), "
        "and gpuarena's verdict is held against that",
    )
    parser.add_argument("--names", help="only these items, comma-separated (level3/35_LSTM.py), or @FILE, one a line")
    parser.add_argument("--budget", type=float, help="seconds for the whole run: items not started by then are not run")
    parser.add_argument("--work", type=Path, help="where the imported problems go (default: a temporary folder)")
    parser.add_argument("--note", default="", help="a line for the record (where the material came from)")
    parser.add_argument(
        "--reclassify",
        type=Path,
        metavar="REPORT",
        help="re-apply today's categories to a report's recorded messages (nothing is imported again)",
    )
    parser.add_argument(
        "--merge",
        type=Path,
        nargs="+",
        metavar="REPORT",
        help="one report from runs on one machine: each item as the last report that ran it says",
    )
    args = parser.parse_args(argv)
    if args.merge:
        return merge(
            args.merge, args.out, "python bench/peer_material.py " + " ".join(sys.argv[1:] if argv is None else argv)
        )
    if args.max_memory_gb is None:
        args.max_memory_gb = 8.0 if args.device == "cpu" else 0.0
    if args.reclassify:
        return reclassify(
            args.reclassify, "python bench/peer_material.py " + " ".join(sys.argv[1:] if argv is None else argv)
        )
    given_paths = {"kernelbench": args.kernelbench, "gpumode": args.gpumode, "flashinfer-trace": args.flashinfer_trace}
    if not any(given_paths.values()):
        parser.error("give at least one of --kernelbench, --gpumode, --flashinfer-trace")
    for flag, path in given_paths.items():
        if path is not None and not path.is_dir():
            parser.error(f"--{flag} {path}: not a folder")

    started = time.perf_counter()
    deadline = time.monotonic() + args.budget if args.budget else None
    with tempfile.TemporaryDirectory(prefix="peer-material-") as scratch:
        work = (args.work or Path(scratch)).resolve()
        work.mkdir(parents=True, exist_ok=True)
        items: list[Item] = []
        given: set[str] = set()
        judged: list[Any] = []
        if args.gpumode:
            gm = limited(chosen(gpumode_items(args.gpumode.resolve()), args.groups, args.names), args.limit)
            given.add("gpumode")
            run_all(gm, work, args.device, args.timeout, args.jobs, _say, args.max_memory_gb, deadline, args.gpus)
            items += gm
            if args.submissions:
                tasks = [
                    (i.name, Path(i.source), found)
                    for i in gm
                    if i.outcome == IMPORTED
                    and (
                        found := imported_problems(
                            work, _slug(i.group), Path(i.source), i.extra.get("problem_name", "")
                        )
                    )
                ]
                judged = judge_all(
                    tasks, args.device, args.timeout, args.jobs, args.gpus, _say, deadline, args.gpumode_eval
                )
        if args.kernelbench:
            kb = limited(chosen(kernelbench_items(args.kernelbench.resolve()), args.groups, args.names), args.limit)
            given.add("kernelbench")
            run_all(kb, work, args.device, args.timeout, args.jobs, _say, args.max_memory_gb, deadline, args.gpus)
            items += kb
        if args.flashinfer_trace:
            definitions, solutions = flashinfer_items(args.flashinfer_trace.resolve())
            definitions, solutions = limited(definitions, args.limit), limited(solutions, args.limit)
            given |= {"flashinfer-definition", "flashinfer-solution"}
            run_flashinfer(
                definitions, solutions, work, args.device, args.timeout, args.jobs, _say, args.max_memory_gb, deadline
            )
            items += definitions + solutions

    machine = machine_name(args.device)
    stamp = datetime.date.today().isoformat()
    report: dict[str, Any] = {
        "command": "python bench/peer_material.py " + " ".join(sys.argv[1:] if argv is None else argv),
        "machine": machine,
        "device": args.device,
        "host": platform.node(),
        "date": stamp,
        "timeout_s": args.timeout,
        "max_memory_gb": args.max_memory_gb,
        "budget_s": args.budget,
        "jobs": args.jobs,
        "gpus": args.gpus,
        "limit": args.limit,
        "groups": args.groups,
        "names": args.names,
        "elapsed_s": round(time.perf_counter() - started, 1),
        "note": args.note,
        "material": {
            peer: {"path": str(path), "revision": _revision(path)} for peer, path in given_paths.items() if path
        },
        "peer_counts": PEER_COUNTS,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    write_report(report, items, given, args.out / f"peer-material-{machine}-{stamp}")
    if args.gpumode and args.submissions:
        _say(write_submissions(judged, args.out, f"peer-submissions-{machine}-{stamp}", report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
