"""Group a model's recorded calls by (op, argument signature), weigh each group by its share of
the measured time, and write the worthwhile groups as problems that pass `gpuarena check`.

The output folder holds what made it: harvest.json (the command, sizes, seed and every group's
calls, share, status and reasons) and profile.jsonl (the raw calls), next to level1/<problem>/.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal, cast

from pydantic import BaseModel, ConfigDict

from gpuarena.dataset import candidate
from gpuarena.dataset.graph import ModuleGraph, module_graph, residual_norms
from gpuarena.dataset.record import CallRecord, ModuleCall, Recorder, TensorInfo, Timer, cpu_timer, record
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
    kind: Literal["op", "module"] = "op"
    """One aten op (level 1), or a submodule's calls as a graph (levels 2-4, dataset/graph.py)."""
    level: int = 1


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
    """Time share of the op groups `gpuarena check` rejected (a module's share overlaps its ops')."""
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
    # the calls of a group share their signature: each has a tensor (or tensors) where the first has
    for k, arg in enumerate(calls[0].args):
        if arg.tensor is not None:
            arg = arg.model_copy(update={"tensor": widen([cast(TensorInfo, c.args[k].tensor) for c in calls])})
        elif arg.tensors is not None:
            arg = arg.model_copy(
                update={
                    "tensors": [
                        widen([cast(list[TensorInfo], c.args[k].tensors)[j] for c in calls])
                        for j in range(len(arg.tensors))
                    ]
                }
            )
        args.append(arg)
    return calls[0].model_copy(update={"args": args})


def call_key(call: CallRecord) -> str:
    """What groups calls (an op group's `signature`): the op and its arguments' signatures. The
    weights (dataset/weights.py) find a group's calls in profile.jsonl by it."""
    return json.dumps([call.op, [a.signature() for a in call.args]])


def module_key(cls: str, graph: ModuleGraph | str) -> str:
    """What groups module calls: the class and its graph's inputs and body (or why it is none).
    A module group's `signature` is its sha256; the weights (dataset/weights.py) find a group's
    module calls in modules.jsonl by it."""
    if isinstance(graph, str):
        return json.dumps([cls, graph])
    return json.dumps([cls, [a.signature() for a in graph.call.args], graph.body])


def group_calls(calls: list[CallRecord], repeats: int = 1) -> list[tuple[Group, CallRecord]]:
    """Groups in the order of their first call, each with its representative call; shares sum to 1."""
    by_key: dict[str, list[CallRecord]] = {}
    for call in calls:
        by_key.setdefault(call_key(call), []).append(call)
    total = sum(c.seconds for c in calls) or 1.0
    groups = []
    for key, members in by_key.items():
        op = members[0].op
        base = _slug(op.split(".")[1])
        name = f"{base}-{hashlib.sha256(key.encode()).hexdigest()[:8]}"
        seconds = sum(c.seconds for c in members)
        groups.append(
            (
                Group(
                    name=name,
                    op=op,
                    signature=key,
                    calls=len(members) // repeats,
                    first_call=members[0].index,
                    seconds=seconds,
                    share=seconds / total,
                ),
                _merged(members),
            )
        )
    return groups


def fusion_calls(recorder: Recorder) -> list[ModuleCall]:
    """The submodules' calls, and the fusions across their boundaries (graph.residual_norms):
    what modules.jsonl keeps and group_modules groups."""
    return [*recorder.modules, *residual_norms(recorder.calls, recorder.modules)]


def group_modules(recorder: Recorder, repeats: int = 1) -> list[tuple[Group, ModuleGraph | None]]:
    """The submodules' calls (and the fusions across their boundaries) as groups, one per (class,
    graph, inputs' shapes): the 32 layers of a model that compute alike are one group of 32 calls.
    A module that cannot be a graph is a group of its class and reason, status unsupported, with
    no graph."""
    calls, total = recorder.calls, sum(c.seconds for c in recorder.calls) or 1.0
    by_key: dict[str, tuple[list[ModuleCall], ModuleGraph | str]] = {}
    for module in fusion_calls(recorder):
        graph = module_graph(calls, module, recorder.externals)
        key = module_key(module.cls, graph)
        by_key.setdefault(key, ([], graph))[0].append(module)
    groups: list[tuple[Group, ModuleGraph | None]] = []
    for key, (members, graph) in by_key.items():
        cls = members[0].cls
        seconds = sum(c.seconds for m in members for c in calls[m.start : m.end])
        name = f"{_slug(cls)}-{hashlib.sha256(key.encode()).hexdigest()[:8]}"
        group = Group(
            name=name,
            op=f"module:{cls}",
            signature=hashlib.sha256(key.encode()).hexdigest(),
            calls=max(1, len(members) // repeats),
            first_call=members[0].start,
            seconds=seconds,
            share=seconds / total,
            kind="module",
        )
        if isinstance(graph, str):
            group.reasons = [graph]
            groups.append((group, None))
        else:
            group.level = graph.level
            groups.append((group, graph))
    return groups


def _slug(text: str) -> str:
    return "".join(ch if ch.isalnum() else "_" for ch in text.lower()).strip("_") or "op"


IGNORED = re.compile(r"the output does not depend on input (\w+) ")


def _check_graph(
    checker: Any,
    graph: ModuleGraph,
    recorder: Recorder,
    staged: Path,
    group: Group,
    where: str,
    models: list[str],
    phase: str,
) -> Any:
    """Write and check a module's graph. An input the check finds ignored (attention's key bias,
    which softmax cancels) is made zeros in the reference and the graph checked again: the module
    is still what it computes, and the filter still holds for its other inputs."""
    ignored: frozenset[str] = frozenset()
    while True:
        summary = f"{graph.call.op.removeprefix('module:')} ({graph.ops} ops) as called in {where}"
        reference = candidate.render(
            graph.call, summary, f"the {graph.ops} aten calls of the module's forward", graph.body
        )
        shutil.rmtree(staged, ignore_errors=True)
        candidate.write(
            staged,
            graph.call,
            group.name,
            summary,
            max(group.share, 1e-6),
            models,
            ["harvested", group.op, phase],
            level=group.level,
            reference=reference,
        )
        report = checker(staged)
        said = report.errors + report.notes  # one whose effect fades under the tolerance is a note
        found = {m.group(1) for line in said for m in [IGNORED.search(line)] if m}
        if not found or found <= ignored or len(ignored) >= 4:
            return report
        ignored |= found
        again = module_graph(recorder.calls, graph.module, recorder.externals, ignored)
        if isinstance(again, str):
            return report
        graph = again


def _describe(model: str, phase: str, sizes: dict[str, int]) -> str:
    return f"{model} {phase} (" + ", ".join(f"{k} {v}" for k, v in sizes.items()) + ")"


def harvest(
    forward: Callable[[], Any],
    out: Path,
    *,
    model: str,
    phase: str,
    sizes: dict[str, int],
    command: str,
    device: str = "cpu",
    seed: int = 0,
    min_share: float = 0.01,
    repeats: int = 3,
    timer: Timer = cpu_timer,
    progress: Callable[[str], None] = lambda _: None,
    against: list[Path] | None = None,
    net: Any = None,
) -> Harvest:
    """Record forward(), group, check and write the problems under out/level1/ (and, given the
    model `net`, its submodules' graphs under out/level2-4/); returns (and writes) harvest.json.
    out must be new, empty, or a previous harvest's folder (then replaced).
    against: problem roots; a group whose problem repeats one of theirs (the same operators on
    the same shapes, dataset/fingerprint.py) is not written (status duplicate)."""
    from gpuarena.dataset.checker import CandidateChecker
    from gpuarena.dataset.fingerprint import fingerprints, index, matches
    from gpuarena.problems.loader import load_problem

    out = Path(out)
    if out.exists() and any(out.iterdir()) and not (out / "harvest.json").exists():
        raise GpuarenaError(f"{out}: not empty and not a harvest folder; give a new folder with -o")
    for old in (
        "level1",
        "level2",
        "level3",
        "level4",
        ".candidates",
        "harvest.json",
        "profile.jsonl",
        "modules.jsonl",
    ):
        shutil.rmtree(out / old, ignore_errors=True) if (out / old).is_dir() else (out / old).unlink(missing_ok=True)
    out.mkdir(parents=True, exist_ok=True)
    progress("recording")
    recorder = record(forward, repeats=repeats, timer=timer, model=net)
    calls = recorder.calls
    with open(out / "profile.jsonl", "w") as f:
        for call in calls:
            f.write(call.model_dump_json() + "\n")
    if recorder.modules:
        with open(out / "modules.jsonl", "w") as f:
            for module in fusion_calls(recorder):
                f.write(module.model_dump_json() + "\n")
    where = _describe(model, phase, sizes)
    groups: list[tuple[Group, CallRecord | ModuleGraph | None]] = [*group_calls(calls, repeats)]
    groups += group_modules(recorder, repeats)
    if against:
        progress("fingerprinting the dataset")
    known = index(list(against)) if against else {}
    with CandidateChecker(device) as checker:
        for n, (group, made) in enumerate(groups):
            if made is None:  # a module that is no graph: its reason is set
                continue
            call = made.call if isinstance(made, ModuleGraph) else made
            why = None if isinstance(made, ModuleGraph) else candidate.unsupported(call)
            if why is not None:
                group.status, group.reasons = ("metadata" if call.metadata_only else "unsupported"), [why]
                continue
            if group.share < min_share:
                group.status, group.reasons = "below-share", [f"share {group.share:.4f} < --min-share {min_share:g}"]
                continue
            progress(f"checking {n + 1}/{len(groups)}: {group.op}")
            staged = out / ".candidates" / group.name
            summary = f"{group.op} as called in {where}"
            models = [
                f"{where}: {group.calls} call(s) a forward, {group.share:.2%} of the measured time "
                f"(gpuarena harvest, seed {seed}, on {device})"
            ]
            if isinstance(made, ModuleGraph):
                report = _check_graph(checker, made, recorder, staged, group, where, models, phase)
            else:
                candidate.write(
                    staged, call, group.name, summary, max(group.share, 1e-6), models, ["harvested", group.op, phase]
                )
                report = checker(staged)
            ours = fingerprints(load_problem(staged)) if report.ok and known else {}
            same = [(problem, pairs) for problem, pairs in matches(ours, known).items() if len(pairs) == len(ours)]
            if same:
                group.status = "duplicate"
                group.reasons = [
                    f"repeats {problem} ({', '.join(pairs.values())}): the same op on the same shapes"
                    for problem, pairs in same
                ]
            elif report.ok:
                final = out / f"level{group.level}" / group.name
                final.parent.mkdir(exist_ok=True)
                staged.rename(final)
                group.status, group.problem = "written", f"level{group.level}/{group.name}"
            else:
                group.status, group.reasons = "rejected", report.errors
    shutil.rmtree(out / ".candidates", ignore_errors=True)
    rejected = [g for g, _ in groups if g.status == "rejected"]
    rejected_ops = [g for g in rejected if g.kind == "op"]  # a module's share overlaps its ops' shares
    result = Harvest(
        command=command,
        model=model,
        phase=phase,
        sizes=sizes,
        device=device,
        seed=seed,
        repeats=repeats,
        min_share=min_share,
        total_seconds=sum(c.seconds for c in calls),
        calls=len(calls) // repeats,
        written=sum(g.status == "written" for g, _ in groups),
        rejected=len(rejected),
        rejected_share=sum(g.share for g in rejected_ops),
        duplicates=sum(g.status == "duplicate" for g, _ in groups),
        against=[str(root) for root in against or []],
        groups=[g for g, _ in groups],
    )
    (out / "harvest.json").write_text(result.model_dump_json(indent=2) + "\n")
    return result
