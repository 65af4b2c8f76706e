"""Problems an importer writes where it cannot check them (every workload needs a GPU, the import
runs without one): marked `unchecked = [...]` in problem.toml, so that their first run on such a
device checks them before judging (problem_pending.py), instead of being refused here or written
as if they had passed."""

from __future__ import annotations

from pathlib import Path

from gpuarena.problems.loader import PROBLEM_FILE, load_spec


def devices_not_checked(folder: Path, checked_on: str) -> list[str]:
    """The device types the problem's workloads run on, but the one it was checked on."""
    spec = load_spec(folder)
    return sorted({d for w in spec.workloads for d in w.devices} - {checked_on.split(":", 1)[0]})


def mark_unchecked(folder: Path, device_types: list[str]) -> None:
    """Add `unchecked = [...]` among problem.toml's top-level keys (before its first table)."""
    if not device_types:
        return
    path = folder / PROBLEM_FILE
    lines = path.read_text().split("\n")
    first_table = next((i for i, line in enumerate(lines) if line.startswith("[")), len(lines))
    listed = ", ".join(f'"{d}"' for d in device_types)
    lines.insert(first_table, f"unchecked = [{listed}]  # checked by its first run there (docs/formats.md)")
    path.write_text("\n".join(lines))
    load_spec(folder)  # still a problem.toml
