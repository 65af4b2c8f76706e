"""Group a model's recorded calls by (op, argument signature), weigh each group by its share of
the measured time, and write the worthwhile groups as problems that pass `gpuarena check`.

The output folder holds what made it: harvest.json (the command, sizes, seed and every group's
calls, share, status and reasons) and profile.jsonl (the raw calls), next to level1/<problem>/.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from typing import Any, Callable, Literal

from pydantic import BaseModel, ConfigDict

from gpuarena.dataset import candidate
from gpuarena.dataset.record import CallRecord, TensorInfo, Timer, cpu_timer, record
from gpuarena.errors import GpuarenaError

Status = Literal["written", "rejected", "duplicate", "metadata", "unsupported", "below-share"]


class Group(BaseModel):
    """Calls with the same op and arguments: one problem candidate. An entry of harvest.json."""

    model_config = ConfigDict(extra="forbid")

    name: str
    """The problem's name (and folder, level1/<name>): the op and a hash of the signature."""
    op: str
    signature: str
    """The arguments that define the group, as JSON: names, shapes, dtypes, strides, values."""
    calls: int
    """Calls per forward."""
    first_call: int
    """Index in profile.jsonl of the first call (groups are listed in this order)."""
    seconds: float
    """Measured time of all its calls, over all recorded forwards."""
    share: float
    """seconds / the time of every recorded call: the problem's weight."""
    status: Status = "unsupported"
    reasons: list[str] = []
    problem: str | None = None
    """The written problem's folder, relative to the harvest folder."""


class Harvest(BaseModel):
    """harvest.json: enough to rerun the harvest and to see what was kept and why."""

    model_config = ConfigDict(extra="forbid")

    command: str
    model: str
    phase: str
    sizes: dict[str, int]
    device: str
    seed: int
    repeats: int
    min_share: float
    total_seconds: float
    calls: int
    """Calls per forward."""
    written: int
    rejected: int
    rejected_share: float
    """Time share of the groups `gpuarena check` rejected."""
    duplicates: int = 0
    """Groups not written because a dataset problem already runs the same op on the same shapes."""
    against: list[str] = []
    """The problem roots the groups were compared with (empty: not compared)."""
    groups: list[Group]


def _merged(calls: list[CallRecord]) -> CallRecord:
    """The first call, with each input's value range widened to cover all calls of the group."""
    def widen(infos: list[TensorInfo]) -> TensorInfo:
        lows = [i.low for i in infos if i.low is not None]
        highs = [i.high for i in infos if i.high is not None]
        return infos[0].model_copy(update={"low": min(lows) if lows else None, "high": max(highs) if highs else None})

    args = []
    for k, arg in enumerate(calls[0].args):
        if arg.tensor is not None:
            arg = arg.model_copy(update={"tensor": widen([c.args[k].tensor for c in calls])})  # type: ignore[misc]
        elif arg.tensors is not None:
            arg = arg.model_copy(update={"tensors": [widen([c.args[k].tensors[j] for c in calls])  # type: ignore[index]
                                                     for j in range(len(arg.tensors))]})
        args.append(arg)
    return calls[0].model_copy(update={"args": args})


def group_calls(calls: list[CallRecord], repeats: int = 1) -> list[tuple[Group, CallRecord]]:
    """Groups in the order of their first call, each with its representative call; shares sum to 1."""
    by_key: dict[str, list[CallRecord]] = {}
    for call in calls:
        key = json.dumps([call.op, [a.signature() for a in call.args]])
        by_key.setdefault(key, []).append(call)
    total = sum(c.seconds for c in calls) or 1.0
    groups = []
    for key, members in by_key.items():
        op = members[0].op
        base = "".join(ch if ch.isalnum() else "_" for ch in op.split(".")[1].lower()).strip("_") or "op"
        name = f"{base}-{hashlib.sha256(key.encode()).hexdigest()[:8]}"
        seconds = sum(c.seconds for c in members)
        groups.append((Group(name=name, op=op, signature=key, calls=len(members) // repeats,
                             first_call=members[0].index, seconds=seconds, share=seconds / total), _merged(members)))
    return groups


def _describe(model: str, phase: str, sizes: dict[str, int]) -> str:
    return f"{model} {phase} (" + ", ".join(f"{k} {v}" for k, v in sizes.items()) + ")"


def harvest(forward: Callable[[], Any], out: Path, *, model: str, phase: str, sizes: dict[str, int],
            command: str, device: str = "cpu", seed: int = 0, min_share: float = 0.01, repeats: int = 3,
            timer: Timer = cpu_timer, progress: Callable[[str], None] = lambda _: None,
            against: list[Path] | None = None) -> Harvest:
    """Record forward(), group, check and write the problems under out/level1/; returns (and writes)
    harvest.json. out must be new, empty, or a previous harvest's folder (then replaced).
    against: problem roots; a group whose problem repeats one of theirs (the same operators on
    the same shapes, dataset/fingerprint.py) is not written (status duplicate)."""
    from gpuarena.dataset.fingerprint import fingerprints, index, matches
    from gpuarena.dataset.checker import CandidateChecker
    from gpuarena.problems.loader import load_problem

    out = Path(out)
    if out.exists() and any(out.iterdir()) and not (out / "harvest.json").exists():
        raise GpuarenaError(f"{out}: not empty and not a harvest folder; give a new folder with -o")
    for old in ("level1", ".candidates", "harvest.json", "profile.jsonl"):
        shutil.rmtree(out / old, ignore_errors=True) if (out / old).is_dir() else (out / old).unlink(missing_ok=True)
    out.mkdir(parents=True, exist_ok=True)
    progress("recording")
    calls = record(forward, repeats=repeats, timer=timer)
    with open(out / "profile.jsonl", "w") as f:
        for call in calls:
            f.write(call.model_dump_json() + "\n")
    where = _describe(model, phase, sizes)
    groups = group_calls(calls, repeats)
    if against:
        progress("fingerprinting the dataset")
    known = index(list(against)) if against else {}
    with CandidateChecker(device) as checker:
        for n, (group, call) in enumerate(groups):
            why = candidate.unsupported(call)
            if why is not None:
                group.status, group.reasons = ("metadata" if call.metadata_only else "unsupported"), [why]
                continue
            if group.share < min_share:
                group.status, group.reasons = "below-share", [f"share {group.share:.4f} < --min-share {min_share:g}"]
                continue
            progress(f"checking {n + 1}/{len(groups)}: {group.op}")
            staged = out / ".candidates" / group.name
            summary = f"{group.op} as called in {where}"
            models = [f"{where}: {group.calls} call(s) a forward, {group.share:.2%} of the measured time "
                      f"(gpuarena harvest, seed {seed}, on {device})"]
            candidate.write(staged, call, group.name, summary, max(group.share, 1e-6), models,
                            ["harvested", group.op, phase])
            report = checker(staged)
            ours = fingerprints(load_problem(staged)) if report.ok and known else {}
            same = [(problem, pairs) for problem, pairs in matches(ours, known).items() if len(pairs) == len(ours)]
            if same:
                group.status = "duplicate"
                group.reasons = [f"repeats {problem} ({', '.join(pairs.values())}): the same op on the same shapes"
                                 for problem, pairs in same]
            elif report.ok:
                final = out / "level1" / group.name
                final.parent.mkdir(exist_ok=True)
                staged.rename(final)
                group.status, group.problem = "written", f"level1/{group.name}"
            else:
                group.status, group.reasons = "rejected", report.errors
    shutil.rmtree(out / ".candidates", ignore_errors=True)
    rejected = [g for g, _ in groups if g.status == "rejected"]
    result = Harvest(command=command, model=model, phase=phase, sizes=sizes, device=device, seed=seed,
                     repeats=repeats, min_share=min_share, total_seconds=sum(c.seconds for c in calls),
                     calls=len(calls) // repeats, written=sum(g.status == "written" for g, _ in groups),
                     rejected=len(rejected), rejected_share=sum(g.share for g in rejected),
                     duplicates=sum(g.status == "duplicate" for g, _ in groups),
                     against=[str(root) for root in against or []], groups=[g for g, _ in groups])
    (out / "harvest.json").write_text(result.model_dump_json(indent=2) + "\n")
    return result
