"""A GPU MODE task whose entries make data of different layouts, imported as one problem a layout.

A gpuarena problem has one set of named inputs and outputs for all its workloads, and GPU MODE's
tasks mostly do too. Some do not: `nvidia/nvfp4_group_gemm` has 2 to 8 groups an entry, each
with its own tensors and one output, and `amd/moe`'s entries make 17 or 29 tensors. The
importer refused them whole; now each layout's entries (its tests and benchmarks, in task.yml's
order) become a problem of their own, NAME_layout1, NAME_layout2, ..., numbered as the layouts
first appear, and a submission runs unmodified against each (its `custom_kernel` takes whatever
data the task makes).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Literal

from gpuarena.interop.outcome import Outcome


class LayoutsDiffer(Exception):
    """Raised by the import's probe: the entries' data come in more than one layout."""

    def __init__(self, groups: list[list[int]], entries: int):
        """groups: the probed entries of each layout; entries: how many the task has. Those whose
        data could not be made here (CUDA only, on a CPU machine) go with the first layout, as in
        a task of one layout: never dropped."""
        super().__init__(f"{len(groups)} layouts")
        seen = {i for group in groups for i in group}
        self.groups = [sorted(groups[0] + [i for i in range(entries) if i not in seen]), *groups[1:]]
        """Each layout's entries (indices into the task's entries), the first entry's layout first."""


def import_parts(
    folder: Path, name: str, groups: list[list[int]], import_one: Callable[[list[int], str], Outcome]
) -> Outcome:
    """Each group of entries imported as NAME_layoutK (`import_one(entries, name)`); the folder's
    outcome holds each part's, and says which entries went where."""
    parts = [import_one(group, f"{name}_layout{k}") for k, group in enumerate(groups, start=1)]
    said = "; ".join(
        f"{part.problem_id or f'{name}_layout{k}'}: {', '.join(part.workloads) or part.status}"
        for k, part in enumerate(parts, start=1)
    )
    lead = f"its entries make data of {len(groups)} layouts (tensors or outputs differ), one problem each: {said}"
    for part in parts:
        part.messages.insert(0, lead)
    statuses = {part.status for part in parts}
    status: Literal["imported", "failed-check", "error"] = (
        "imported" if statuses == {"imported"} else "error" if statuses == {"error"} else "failed-check"
    )
    return Outcome(folder, status, messages=[lead], workloads=[w for p in parts for w in p.workloads], parts=parts)
