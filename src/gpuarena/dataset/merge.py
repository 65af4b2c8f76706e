"""One problem per computation (issue 48, `gpuarena dataset merge`): the problems of one family
(`identity.py`) folded into one, their shapes its workloads.

A family's **representative** is its heaviest member; its reference (and the value ranges its
inputs are drawn in) is the merged problem's. Another member joins only where the
representative's reference, run on that member's every workload (its axes renamed to the
representative's inputs, matched by the order the graph reads them), makes exactly the graph the
member's own reference makes there: same calls, shapes, dtypes and strides. A member that does
not (a JAX reference whose sizes are written in its equations, axes that do not name inputs) stays
a problem of its own, and the plan says why.

The merged problem:
- **workloads**: the representative's and each member's, one per distinct (axes, dtype); a shape
  two models share is one workload named by both (`llama-prefill.mistral-prefill`), runs where
  either ran;
- **weight**: the members' sum (each member's weight is its share of a model's time, so the
  computation keeps the time all the models spend in it); tags and provenance: every member's;
  its dataset.json entry names the members (`merged`), which `dataset weigh` maps harvests by;
- **tolerance**: per dtype, the loosest of the members' in each field. The members' derived
  tolerances (`outside`) differ only by the value ranges their inputs were drawn in (Llama's and
  Mistral's RMSNorm + residual: 8e-07 and 2e-06); the strictest would fail an honest kernel on the
  inputs that derived a looser one, and a dataset's tolerance must pass honest kernels.
  `gpuarena dataset recheck --device cuda` derives it again for the merged problem's inputs.
"""

from __future__ import annotations

import shutil
import tomllib
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from gpuarena.dataset.assemble import Dataset, Entry, _write, dump_problem_toml
from gpuarena.dataset.identity import trace
from gpuarena.dataset.keys import Identity, Trace
from gpuarena.dataset.small_workload import cpu_only_small
from gpuarena.dataset.traffic import with_formulas
from gpuarena.errors import GpuarenaError
from gpuarena.problems.loader import Problem
from gpuarena.problems.model import Workload


class Fold(BaseModel):
    """One merged problem: the representative and the members folded into it."""

    model_config = ConfigDict(extra="forbid")

    problem: str
    members: list[str]
    """Folded into it (the representative not included)."""
    exact: bool
    """Every member an exact duplicate of the representative (same shapes)."""
    refused: dict[str, str] = {}
    """Members of the family that could not join it, with the reason (they may have joined another)."""


class MergePlan(BaseModel):
    model_config = ConfigDict(extra="forbid")

    problems: int
    after: int
    """Problems once merged."""
    folds: list[Fold]
    apart: dict[str, str] = {}
    """Problems of a family that joined no other, with the reason the last fold refused them."""


def _rename(axes: dict[str, int], mapping: dict[str, str]) -> dict[str, int] | None:
    """A member's axes in the representative's input names (`{input}_{d}`), or None where an axis
    names no input."""
    renamed = {}
    for key, value in axes.items():
        owner = max((n for n in mapping if key.startswith(f"{n}_")), key=len, default=None)
        if owner is None:
            return None
        renamed[mapping[owner] + key[len(owner) :]] = value
    return renamed


def _joins(representative: Problem, rep: Identity, member: Problem, mine: Identity) -> list[Workload] | str:
    """The member's workloads in the representative's axes, or why it cannot join."""
    if rep.framework != "pytorch" or mine.framework != "pytorch":
        if rep.exact == mine.exact and rep.order and len(rep.order) == len(mine.order):
            mapping = dict(zip(mine.order, rep.order, strict=True))
            pairs = [(w, _rename(dict(w.axes), mapping)) for w in member.spec.workloads]
            if all(axes is not None for _, axes in pairs):
                return [w.model_copy(update={"axes": axes}) for w, axes in pairs]
        return "a JAX reference writes its sizes in its equations: only an exact duplicate joins"
    if len(rep.order) != len(mine.order):
        return "the references read different numbers of inputs"
    mapping = dict(zip(mine.order, rep.order, strict=True))
    joined = []
    for workload in member.spec.workloads:
        axes = _rename(dict(workload.axes), mapping)
        if axes is None:
            return f"workload {workload.name}: an axis names no input"
        moved = workload.model_copy(update={"axes": axes})
        theirs = mine.traced.get(workload.name)
        ours = trace(representative, moved)
        if theirs is None or ours is None:
            return f"workload {workload.name}: a reference fails there (sizes or strides its code fixes do not fit these shapes)"
        if ours.trace != theirs:
            if _unstrided(ours.trace) == _unstrided(theirs):
                return (
                    f"workload {workload.name}: an input's strides are fixed in the representative's INPUTS "
                    "(a transposed weight, a slice of a fused projection), which lays it out otherwise on these shapes"
                )
            return f"workload {workload.name}: the representative's reference computes another graph there"
        joined.append(moved)
    return joined


def _unstrided(traced: Trace) -> Any:
    calls, returned = traced
    return tuple((op, tuple(leaf[:4] if leaf[0] == "T" else leaf for leaf in leaves)) for op, leaves in calls), returned


def _workloads(groups: list[tuple[str, list[Workload]]]) -> list[dict[str, Any]]:
    """One workload per distinct (axes, dtype): names joined, devices united."""
    merged: dict[tuple[Any, ...], dict[str, Any]] = {}
    for _problem, workloads in groups:
        for w in workloads:
            key = (tuple(sorted(w.axes.items())), w.dtype)
            if key in merged:
                known = merged[key]
                if w.name not in known["name"].split("."):
                    known["name"] += f".{w.name}"
                if "devices" in known and "devices" in w.model_fields_set:
                    known["devices"] = [d for d in ("cpu", "cuda") if d in known["devices"] or d in w.devices]
                else:  # one runs on every device (the default): so does the shape
                    known.pop("devices", None)
            else:
                merged[key] = w.model_dump(exclude_unset=True)
    taken: set[str] = set()
    result = []
    for workload in merged.values():
        name, n = workload["name"], 2
        while workload["name"] in taken:
            workload["name"], n = f"{name}-{n}", n + 1
        taken.add(workload["name"])
        result.append(workload)
    return result


def _tolerance(specs: list[Any]) -> dict[str, dict[str, float]]:
    """Per dtype named by any member: the loosest of each field (module docstring)."""
    dtypes = sorted({d for s in specs for d in s.tolerance})
    loosest: dict[str, dict[str, float]] = {}
    for dtype in dtypes:
        each = [s.tolerance_for(dtype).model_dump() for s in specs]
        loosest[dtype] = {field: max(t[field] for t in each) for field in each[0]}
        if not loosest[dtype].get("outside"):
            loosest[dtype].pop("outside", None)
    return loosest


def plan(problems: list[Problem], ids: list[Identity], exact_only: bool = False) -> tuple[MergePlan, dict[str, Any]]:
    """Which problems fold into which, and each merged problem.toml (by representative id)."""
    by_id = {p.id: p for p in problems}
    families: dict[str, list[Identity]] = {}
    for one in ids:
        if one.error is None:
            families.setdefault(one.exact if exact_only else one.family, []).append(one)
    folds, specs = [], {}
    pending = [sorted(m, key=lambda i: (-by_id[i.problem].spec.weight, i.problem)) for m in families.values()]
    while pending:
        members = pending.pop()
        if len(members) < 2:
            continue
        fold, spec, apart = _fold(by_id, ids, members)
        folds.append(fold)
        if spec is not None:
            specs[fold.problem] = spec
        pending.append(apart)  # those that could not join the heaviest may still join one another
    folds.sort(key=lambda f: f.problem)
    folded = {f.problem for f in folds if f.members} | {m for f in folds for m in f.members}
    reasons = {p: why for f in folds for p, why in f.refused.items()}
    for f in folds:  # a heaviest member that none could join: why the first of them could not
        if not f.members and f.refused and f.problem not in reasons:
            first, why = next(iter(f.refused.items()))
            reasons[f.problem] = f"its reference on {first}'s {why}"
    alone = {p: why for p, why in sorted(reasons.items()) if p not in folded}
    folds = [f for f in folds if f.members]
    gone = sum(len(f.members) for f in folds)
    merged = MergePlan(problems=len(problems), after=len(problems) - gone, folds=folds, apart=alone)
    return merged, specs


def _fold(
    by_id: dict[str, Problem], ids: list[Identity], members: list[Identity]
) -> tuple[Fold, dict[str, Any] | None, list[Identity]]:
    """The heaviest member with those that can join it, its problem.toml (None where none can),
    and the members left apart."""
    rep = members[0]
    representative = by_id[rep.problem]
    joined: list[tuple[str, list[Workload]]] = [(rep.problem, list(representative.spec.workloads))]
    refused, apart = {}, []
    for mine in members[1:]:
        found = _joins(representative, rep, by_id[mine.problem], mine)
        if isinstance(found, str):
            refused[mine.problem] = found
            apart.append(mine)
        else:
            joined.append((mine.problem, found))
    names = [p for p, _ in joined]
    exact = all(_exact(ids, p, rep) for p in names)
    fold = Fold(problem=rep.problem, members=names[1:], exact=exact, refused=refused)
    if len(joined) < 2:
        return fold, None, apart
    parts = [by_id[p].spec for p in names]
    spec = tomllib.loads((representative.path / "problem.toml").read_text())
    spec["weight"] = float(f"{sum(s.weight for s in parts):.6g}")
    spec["tags"] = list(dict.fromkeys(t for s in parts for t in s.tags))
    spec["provenance"]["models"] = list(dict.fromkeys(m for s in parts for m in s.provenance.models))
    tolerance = _tolerance(parts)
    if tolerance:
        spec["tolerance"] = tolerance
    spec["workloads"] = cpu_only_small(_workloads(joined))
    return fold, spec, apart


def _exact(ids: list[Identity], problem: str, rep: Identity) -> bool:
    return any(i.problem == problem and i.exact == rep.exact for i in ids)


def write(root: Path, output: Path, merge_plan: MergePlan, specs: dict[str, Any]) -> None:
    """A copy of the problems under `root` in `output` with every fold applied, and its
    dataset.json (where `root` has one) with the folded entries made one."""
    if output.exists() and any(output.iterdir()):
        raise GpuarenaError(f"{output}: not empty (merge writes a new folder)")
    gone = {m: f.problem for f in merge_plan.folds for m in f.members}
    shutil.copytree(root, output, dirs_exist_ok=True, ignore=shutil.ignore_patterns("__pycache__"))
    for member in gone:
        shutil.rmtree(output / member)
    for problem, spec in specs.items():
        (output / problem / "problem.toml").write_text(dump_problem_toml(spec))
        # the representative's bytes and FLOPs may hold sizes fixed for its own shapes
        spec = with_formulas(spec, output / problem)
        (output / problem / "problem.toml").write_text(dump_problem_toml(spec))
    index = root / "dataset.json"
    if index.is_file():
        dataset = Dataset.model_validate_json(index.read_text())
        entries: dict[str, Entry] = {e.problem: e for e in dataset.entries}
        for member, into in gone.items():
            folded = entries.pop(member, None)
            target = entries.get(into)
            if folded is not None and target is not None:
                target.weight = float(f"{target.weight + folded.weight:.6g}")
                target.harvests = list(dict.fromkeys([*target.harvests, *folded.harvests]))
                target.merged = list(dict.fromkeys([*target.merged, member, *folded.merged]))
        _write(output, dataset.harvests, list(entries.values()))
