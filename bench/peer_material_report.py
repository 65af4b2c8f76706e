"""What bench/peer_material.py records of each piece of a peer's material (`Item`, with the
materials and their peers' own counts) and how a run is written: the summary table, the
refusals by reason, the Markdown and the JSON."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from peer_refusals import BUDGET_SPENT, IMPORTED

PEER_COUNTS = {
    "kernelbench": "270",
    "gpumode": "42",
    "flashinfer-definition": "156",
    "flashinfer-solution": "102+",
}
"""What each peer's own tooling counts in its published material (issue 49's table)."""
MATERIAL = {
    "kernelbench": "KernelBench problems",
    "gpumode": "GPU MODE tasks",
    "flashinfer-definition": "FlashInfer-Trace definitions",
    "flashinfer-solution": "FlashInfer-Trace solutions",
}
SOURCES = {
    "kernelbench": "KernelBench",
    "gpumode": "GPU MODE reference-kernels",
    "flashinfer-trace": "FlashInfer-Trace",
}


@dataclass
class Item:
    """One piece of a peer's material and what became of it."""

    peer: str
    """kernelbench, gpumode, flashinfer-definition or flashinfer-solution."""
    name: str
    """Its path inside the material (level1/1_Square_matrix_multiplication_.py, pmpp/sort_py, ...)."""
    group: str
    """level1-4 for KernelBench, the group folder for GPU MODE, the op type for FlashInfer-Trace."""
    source: str
    extra: dict[str, str] = field(default_factory=dict)
    """What the import needs besides the source (workloads, the definition) or says (its name)."""
    command: list[str] = field(default_factory=list)
    outcome: str = ""
    """imported or refused."""
    category: str = ""
    """The reason, shortened (refused items only)."""
    messages: list[str] = field(default_factory=list)
    """The importer's own words: the check's findings, the error, or notes."""
    rc: int | None = None
    seconds: float = 0.0


def _counts(items: list[Item]) -> str:
    refused = Counter(i.category for i in items if i.outcome != IMPORTED and i.category != BUDGET_SPENT)
    return "; ".join(f"{category} {n}" for category, n in sorted(refused.items(), key=lambda kv: (-kv[1], kv[0])))


def summary_cell(peer: str, items: list[Item]) -> str:
    """The 'gpuarena, this machine' cell of one material's row."""
    if not items:
        return "none found"
    imported = [i for i in items if i.outcome == IMPORTED]
    cell = f"imported {len(imported)} of {len(items)}"
    if peer == "kernelbench":
        groups = sorted({i.group for i in items}, key=lambda g: int(g.removeprefix("level") or 0))
        by_level = ", ".join(
            f"L{g.removeprefix('level')} {sum(i.group == g for i in imported)}/{sum(i.group == g for i in items)}"
            for g in groups
        )
        cell += f" ({by_level})"
    if peer == "flashinfer-definition":
        with_workloads = [i for i in items if "workloads" in i.extra]
        cell = f"with workloads {len(with_workloads)} of {len(items)}; imported {len(imported)}"
    if peer == "flashinfer-solution":
        cell = f"loaded {len(imported)} of {len(items)}"
    refused = _counts(items)
    unrun = sum(i.category == BUDGET_SPENT for i in items)
    return (
        cell + (f"; refused: {refused}" if refused else "") + (f"; {unrun} not run (--budget spent)" if unrun else "")
    )


def table(items: list[Item], given: set[str]) -> str:
    lines = ["| material | peer's tooling | gpuarena, this machine |", "| --- | --- | --- |"]
    for peer, label in MATERIAL.items():
        mine = [i for i in items if i.peer == peer]
        cell = summary_cell(peer, mine) if peer in given else "not given"
        lines.append(f"| {label} | {PEER_COUNTS[peer]} | {cell} |")
    return "\n".join(lines)


def refusals(items: list[Item]) -> str:
    """Every refusal category with its items (the first 12 named)."""
    lines = ["| material | reason | count | items |", "| --- | --- | --- | --- |"]
    grouped: dict[tuple[str, str], list[Item]] = {}
    for item in items:
        if item.outcome != IMPORTED:
            grouped.setdefault((item.peer, item.category), []).append(item)
    for (peer, category), members in sorted(grouped.items(), key=lambda kv: (kv[0][0], -len(kv[1]), kv[0][1])):
        names = ", ".join(f"`{m.name}`" for m in members[:12]) + (
            f" and {len(members) - 12} more" if len(members) > 12 else ""
        )
        lines.append(f"| {MATERIAL[peer]} | {category.replace('|', '/')} | {len(members)} | {names} |")
    return "\n".join(lines)


def markdown(report: dict[str, Any], items: list[Item], given: set[str]) -> str:
    sources = "\n".join(
        f"- {SOURCES[peer]}: `{s['path']}`" + (f" at {s['revision']}" if s["revision"] else "")
        for peer, s in report["material"].items()
    )
    return "\n".join(
        [
            f"# Peers' published material through gpuarena's importers ({report['machine']}, {report['date']})",
            "",
            f"Command: `{report['command']}`",
            "",
            f"Each item imported by `gpuarena import ...` in a process of its own (`--check-device {report['device']}`, "
            f"{report['timeout_s']:g} s each); the peer's own count is what its tooling publishes. "
            f"{report['elapsed_s']:.0f} s in all.",
            *([f"\n{report['note']}"] if report["note"] else []),
            "",
            "Material:",
            "",
            sources or "- none given",
            "",
            table(items, given),
            "",
            "## Refused, by reason",
            "",
            refusals(items),
            "",
            "Every item, its command and the importer's own messages: the JSON file beside this one.",
            "",
        ]
    )


def write_report(report: dict[str, Any], items: list[Item], given: set[str], base: Path) -> None:
    report["table"] = {MATERIAL[p]: summary_cell(p, [i for i in items if i.peer == p]) for p in MATERIAL if p in given}
    report["items"] = [asdict(i) for i in items]
    base.with_suffix(".json").write_text(json.dumps(report, indent=1) + "\n")
    base.with_suffix(".md").write_text(markdown(report, items, given))
    print()
    print(table(items, given))
    print(f"\nwrote {base}.json and {base}.md")
