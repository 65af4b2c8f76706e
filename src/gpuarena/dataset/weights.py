"""Weights that mean one thing (issue 48): `gpuarena dataset weigh ROOT --harvests ...`.

A problem's weight was the sum of its shares over the harvests that found it: per model the
weights summed to 0.22-1.57, a fusion counted its ops' time again, and a share was the CPU's or
the recording's time, not the GPU's. The rule now, for each harvest h (a model-phase, its label
`<model slug>-<phase>` as the workloads are named), every op call of h counted once:

- **weight**: each op call of h is claimed by the outermost kept problem of ROOT covering it: a
  kept fusion (a module group, levels 2-4, whose problem ROOT keeps) covers the calls in its
  module calls' spans, a level-1 problem its own calls. A fusion's call partly inside a larger
  kept one (a residual norm across two layers) claims the share of its recorded time outside it.
  A problem's time in h is what it claims: a fusion's whole time a call, an op's claimed calls
  times its time a call. w(p, h) = p's time / every problem's time in h, so each model-phase's
  weights sum to 1 over what the dataset covers of it; p's weight is the mean of w(p, h) over
  the model-phases (0 where p is absent), so the dataset's weights sum to 1 and each
  model-phase weighs alike.
- **level_weight**: the same with claims among the problems of p's own level only (each level a
  view of the whole model at its granularity: level-1 ops claim their own calls; an attention
  block inside a kept level-3 stage is claimed by the stage), the mean over the model-phases
  with a problem at that level: each level's level_weights sum to 1.
- **model_weights**: w(p, h) by label, for the per-model scores.
- a **workload's weight**: the share of its model-phase's time its shapes stand for (the group's
  whole time over h's claimed time, summed over the labels in its name): w(p, h) where p claims
  all its calls, and still the model time it stands for where a fusion claims them (where
  w(p, h) is 0, a workload weight must not be). A workload that stands for no harvest given
  (the CPU's `small`) keeps its weight.

Times: a group's time a call is the suite's (`--timings`, eager PyTorch on a GPU: the median of
the workload holding its shape), else the harvest's own (`seconds` over its calls), and the
report says which. A suite time more than DISAGREE times off the harvest's (a GPU harvest's:
a CPU's recording is not a GPU's time) is listed as a disagreement, and the harvest's time is
used for it until the two agree (DISAGREE says what the first one investigated was).

Problems written from published configs (`level*/layer-*`, `fusion-*`: their harvest in
dataset.json is "published config <model>") are grouped by config: per level, a problem's
level weight in its config is its share of the config's suite time at that level (the mean of
its GPU workloads' medians; equal shares where one of them has no time), and its weight the
same divided by the config's number of levels (nothing records which contains which). A config
counts as 1 / (the number of configs) of a model-phase in the means: together they weigh one
model-phase, so that a config of one fusion does not weigh a whole model. A problem that no harvest and no config names weighs 0
and is listed.
"""

from __future__ import annotations

import json
import re
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from gpuarena.dataset.assemble import Dataset, _lines, _write, dump_problem_toml, model_slug
from gpuarena.dataset.record import CallRecord, ModuleCall
from gpuarena.dataset.recorded_layout import strided_share
from gpuarena.dataset.weights_claims import Member, claimed, find_modules, find_ops
from gpuarena.errors import GpuarenaError
from gpuarena.problems.model import ProblemSpec
from gpuarena.suite.model import ProblemTime, SuiteResult

DISAGREE = 2.0
"""A suite time this many times above or below a GPU harvest's recorded time is a disagreement,
listed. Investigated on an H200 (stop 69): SegFormer's upsample_bilinear2d takes 473 µs on its
recorded channels_last input and 5,118 µs on a contiguous one, and the harness timed every input
as a contiguous copy until stop 69 (its shared buffers were contiguous; the shipped baseline was
timed before the fix): for an op whose recorded inputs are mostly strided (`strided_share`), the
harvest's time is the model's and is used. Where they are
contiguous the suite's stands: the decode KV-cache `cat` recorded at 810 µs a call moves 537 MB,
132 µs at the H200's bandwidth, which is what the suite timed."""
CONFIG = "published config "
DUPLICATE = re.compile(r"^repeats (\S+) \(([^)]*)\)")


class Claim(BaseModel):
    """One harvest group that stands for a kept problem: its time and what it claims."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)
    group: str
    problem: str
    level: int
    workload: str | None
    """The problem's workload holding its shapes."""
    calls: float
    """Calls a forward."""
    us_per_call: float
    """The time used: the suite's, or the harvest's own (source)."""
    source: str
    """suite or harvest (a config's problem: suite, or equal where one of its level has no time)."""
    recorded_us_per_call: float
    claimed_us: float
    """Microseconds a forward it claims among every kept problem."""
    weight: float
    """claimed_us over the model-phase's claimed time."""
    level_weight: float
    """The same among its level's problems."""


class ModelWeights(BaseModel):
    """One model-phase (a harvest) or published config: what the dataset covers of it."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)
    label: str
    source: str
    """The harvest's folder, or the published config."""
    covered: float | None
    """The share of the harvest's recorded time (total_seconds) its kept problems claim."""
    claimed_us: float
    """Microseconds a forward its problems claim, as timed."""
    problems: int
    weight_sum: float
    """The sum of w(p, h) over its problems: 1 (0: it covers nothing)."""
    harvest_timed: int = 0
    """Groups timed by the harvest's own seconds (the suite had no time for them)."""
    notes: list[str] = []
    claims: list[Claim] = []


class Disagreement(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)
    label: str
    group: str
    problem: str
    calls: float
    """Calls a forward."""
    recorded_us: float
    """The harvest's microseconds a call."""
    timed_us: float
    """The suite's."""
    ratio: float
    """timed / recorded."""


class ProblemWeights(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)
    problem: str
    level: int
    weight: float
    level_weight: float
    model_weights: dict[str, float]
    workloads: dict[str, float]
    """The new weight of each workload that stands for a harvest given."""


class WeighReport(BaseModel):
    """`gpuarena dataset weigh`'s report (--json)."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)
    root: str
    models: list[ModelWeights]
    problems: list[ProblemWeights]
    """By weight, heaviest first."""
    unclaimed: list[str]
    """Problems of ROOT that no harvest and no config names: weight 0."""
    disagreements: list[Disagreement]
    weight_sum: float
    level_sums: dict[int, float]
    written: bool = False


@dataclass
class _Root:
    path: Path
    specs: dict[str, dict[str, Any]]
    merged: dict[str, str] = field(default_factory=dict)
    """A problem folded by `dataset merge` -> the problem holding it."""
    configs: dict[str, str] = field(default_factory=dict)
    """A problem written from a published config -> the config."""


@dataclass
class _Model:
    summary: ModelWeights
    weights: dict[str, float] = field(default_factory=dict)
    levels: dict[int, dict[str, float]] = field(default_factory=dict)
    workloads: dict[tuple[str, str], float] = field(default_factory=dict)
    share: float = 1.0
    """What it counts for in the dataset's means: a harvest 1, a published config 1 / the configs'
    number (together they are one model-phase)."""


def load_root(root: Path) -> _Root:
    """ROOT's problems (problem.toml as read) and, from its dataset.json, merges and configs."""
    specs = {
        f"{path.parent.parent.name}/{path.parent.name}": tomllib.loads(path.read_text())
        for path in sorted(Path(root).glob("level[1-4]/*/problem.toml"))
    }
    if not specs:
        raise GpuarenaError(f"{root}: no problems (level1-4/*/problem.toml)")
    found = _Root(Path(root), specs)
    index = Path(root) / "dataset.json"
    entries = Dataset.model_validate_json(index.read_text()).entries if index.is_file() else []
    for entry in entries:
        found.merged.update({m: entry.problem for m in entry.merged if entry.problem in specs})
        for harvest in entry.harvests:
            if harvest.startswith(CONFIG) and entry.problem in specs:
                found.configs[entry.problem] = harvest.removeprefix(CONFIG)
    for problem, spec in specs.items():
        if problem not in found.configs and "published-config" in spec.get("tags", []):
            models = spec.get("provenance", {}).get("models", [])
            found.configs[problem] = models[0].split(" (")[0] if models else spec["name"]
    return found


class _Times:
    """The suite results' medians by problem and workload, the first result that timed one."""

    def __init__(self, results: Sequence[SuiteResult]):
        self.by: dict[str, list[ProblemTime]] = {}
        for result in results:
            for p in result.problems:
                self.by.setdefault(p.problem, []).append(p)

    def of(self, problem: str, workload: str | None) -> float | None:
        for p in self.by.get(problem, []):
            if workload is not None and p.workloads.get(workload, 0) > 0:
                return p.workloads[workload]
        return None

    def gpu(self, problem: str, spec: dict[str, Any]) -> float | None:
        """A config problem's time: the mean of its GPU workloads' medians."""
        names = [w["name"] for w in spec["workloads"] if "cuda" in w.get("devices", ["cuda"]) and w["name"] != "small"]
        found = [t for t in (self.of(problem, n) for n in names) if t is not None]
        return sum(found) / len(found) if found else None


def _labels(name: str) -> set[str]:
    """The model-phases a workload stands for: `llama-prefill.mistral-prefill-2` (merge joins
    the names of a shape two models share, and numbers a second shape of one)."""
    return {re.sub(r"-\d+$", "", part) for part in name.split(".")}


def _workload(spec: dict[str, Any], label: str, recorded: Path) -> str | None:
    """The workload of a problem that holds a harvest group's shapes: the one named by its
    label, or of several, the one with the recorded axes' sizes and dtype."""
    mine = [w for w in spec["workloads"] if label in _labels(w["name"])]
    for shape in tomllib.loads(recorded.read_text())["workloads"][:1] if len(mine) > 1 and recorded.is_file() else []:
        key = (sorted(shape["axes"].values()), shape["dtype"])
        mine = [w for w in mine if (sorted(w["axes"].values()), w["dtype"]) == key] or mine
    return mine[0]["name"] if mine else None


def _members(folder: Path, harvest: dict[str, Any], label: str, root: _Root) -> list[Member]:
    """The harvest's groups whose problem ROOT keeps (written, folded into another, or a
    duplicate of one), each with the workload holding its shapes."""
    members = []
    for group in harvest["groups"]:
        problem, workload = group.get("problem") if group["status"] == "written" else None, None
        for reason in group.get("reasons", []) if group["status"] == "duplicate" else []:
            found = DUPLICATE.match(reason)
            if found and (found.group(1) in root.specs or found.group(1) in root.merged):
                problem, workload = found.group(1), found.group(2).split(", ")[0]
        problem = problem if problem in root.specs else root.merged.get(problem or "")
        if problem is None:
            continue
        spec = root.specs[problem]
        if workload is None:
            workload = _workload(spec, label, folder / (group.get("problem") or "-") / "problem.toml")
        module = group.get("kind", "op") == "module"
        members.append(Member(group=group, problem=problem, level=spec["level"], workload=workload, module=module))
    return members


def _harvest(folder: Path, root: _Root, times: _Times) -> tuple[_Model, list[Disagreement]]:
    """One model-phase's claims (see the module's docstring)."""
    path = folder / "harvest.json"
    if not path.is_file():
        raise GpuarenaError(f"{folder}: no harvest.json (give folders written by gpuarena harvest -o)")
    harvest = json.loads(path.read_text())
    label = f"{model_slug(harvest['model'])}-{harvest['phase']}"
    calls = [CallRecord.model_validate_json(line) for line in _lines(folder, "profile.jsonl")]
    modules = [ModuleCall.model_validate_json(line) for line in _lines(folder, "modules.jsonl")]
    jax = harvest["model"].startswith("jax:")
    forwards = max(1, round(len(calls) / max(1, harvest["calls"]))) if calls else 1 if jax else harvest["repeats"]
    seconds = [c.seconds for c in calls]
    members = _members(folder, harvest, label, root)
    find_ops(members, calls)
    find_modules(members, calls, modules, forwards, seconds)
    notes, disagreements = [], []
    for m in members:
        m.count = len(m.spans) if m.known else max(1, m.group["calls"]) * forwards
        m.recorded_us = m.group["seconds"] / m.count * 1e6
        timed = times.of(m.problem, m.workload)
        if timed is None and m.group.get("problem") != m.problem:  # a suite run from before the merge
            timed = times.of(m.group["problem"], label)
        m.us, m.source = (timed, "suite") if timed is not None else (m.recorded_us, "harvest")
        if not m.known:
            notes.append(
                f"{m.group['name']}: its calls were not found in the recording: it claims its own time where no kept scope holds it"
            )
        ratio = m.us / m.recorded_us if m.source == "suite" and m.recorded_us > 0 else 1.0
        if harvest["device"] != "cpu" and not 1 / DISAGREE <= ratio <= DISAGREE:
            disagreements.append(
                Disagreement(
                    label=label,
                    group=m.group["name"],
                    problem=m.problem,
                    calls=m.count / forwards,
                    recorded_us=m.recorded_us,
                    timed_us=m.us,
                    ratio=ratio,
                )
            )
            if strided_share(m.group.get("signature", "")) >= 0.5:  # the suite timed contiguous copies: DISAGREE
                m.us, m.source = m.recorded_us, "harvest (the suite's disagreed, its inputs strided)"
    model = _Model(
        ModelWeights(label=label, source=str(folder), covered=None, claimed_us=0.0, problems=0, weight_sum=0.0)
    )
    counts, covered = claimed(members, seconds)
    time = [n * m.us for n, m in zip(counts, members)]
    total = sum(time)
    if total <= 0:
        model.summary.notes = [*notes, "no kept problem of ROOT stands for any of its time"]
        return model, disagreements
    levels: dict[int, list[float]] = {}
    for level in sorted({m.level for m in members}):
        own = [n * m.us for n, m in zip(claimed(members, seconds, level)[0], members)]
        levels[level] = [t / sum(own) if sum(own) > 0 else 0.0 for t in own]
        model.levels[level] = {}
    for k, m in enumerate(members):
        model.weights[m.problem] = model.weights.get(m.problem, 0.0) + time[k] / total
        model.levels[m.level][m.problem] = model.levels[m.level].get(m.problem, 0.0) + levels[m.level][k]
        if m.workload is not None:
            key = (m.problem, m.workload)
            model.workloads[key] = model.workloads.get(key, 0.0) + m.count * m.us / total
    model.summary = ModelWeights(
        label=label,
        source=str(folder),
        covered=covered / harvest["total_seconds"] if harvest["total_seconds"] > 0 else None,
        claimed_us=total / forwards,
        problems=len(model.weights),
        weight_sum=sum(model.weights.values()),
        harvest_timed=sum(m.source == "harvest" for m in members),
        notes=notes,
        claims=sorted(
            (
                Claim(
                    group=m.group["name"],
                    problem=m.problem,
                    level=m.level,
                    workload=m.workload,
                    calls=m.count / forwards,
                    us_per_call=m.us,
                    source=m.source,
                    recorded_us_per_call=m.recorded_us,
                    claimed_us=time[k] / forwards,
                    weight=time[k] / total,
                    level_weight=levels[m.level][k],
                )
                for k, m in enumerate(members)
            ),
            key=lambda c: -c.weight,
        ),
    )
    return model, disagreements


def _configs(root: _Root, times: _Times) -> list[_Model]:
    """The published configs as model-phases (see the module's docstring)."""
    by_config: dict[str, dict[int, list[str]]] = {}
    for problem, config in sorted(root.configs.items()):
        by_config.setdefault(config, {}).setdefault(root.specs[problem]["level"], []).append(problem)
    models = []
    for config, levels in by_config.items():
        slug = re.sub(r"[^a-z0-9]+", "-", config.lower()).strip("-")
        model = _Model(
            ModelWeights(
                label=f"config-{slug}", source=CONFIG + config, covered=None, claimed_us=0.0, problems=0, weight_sum=0.0
            )
        )
        claims = []
        for level, problems in levels.items():
            found = [times.gpu(p, root.specs[p]) for p in problems]
            timed = [t for t in found if t is not None]
            shares = (
                [t / sum(timed) for t in timed]
                if len(timed) == len(found) and sum(timed) > 0
                else [1 / len(found)] * len(found)
            )
            model.levels[level] = dict(zip(problems, shares))
            for problem, share, t in zip(problems, shares, found):
                model.weights[problem] = share / len(levels)
                claims.append(
                    Claim(
                        group=problem.split("/")[-1],
                        problem=problem,
                        level=level,
                        workload=None,
                        calls=1,
                        us_per_call=t or 0.0,
                        source="suite" if len(timed) == len(found) else "equal",
                        recorded_us_per_call=0.0,
                        claimed_us=t or 0.0,
                        weight=share / len(levels),
                        level_weight=share,
                    )
                )
        model.summary.problems = len(model.weights)
        model.summary.weight_sum = sum(model.weights.values())
        model.summary.claims = sorted(claims, key=lambda c: -c.weight)
        models.append(model)
    for model in models:  # one model-phase together: a config of one fusion must not weigh a model
        model.share = 1 / len(models)
    return models


def _round(value: float) -> float:
    return float(f"{value:.6g}")


def weigh(root: Path, harvests: Sequence[Path], timings: Sequence[SuiteResult] = ()) -> WeighReport:
    """Every kept problem's weight, level weight, model weights and workload weights under the
    rule (module docstring), with the report; nothing is written (`write` does)."""
    found = load_root(root)
    times = _Times(timings)
    models, disagreements = [], []
    for folder in harvests:
        model, theirs = _harvest(Path(folder), found, times)
        models.append(model)
        disagreements += theirs
    models += _configs(found, times)
    counted = [m for m in models if m.weights]
    by_label: dict[str, list[_Model]] = {}
    for m in counted:
        by_label.setdefault(m.summary.label, []).append(m)
    everything = sum(m.share for m in counted)
    problems = []
    for problem, spec in found.specs.items():
        level = spec["level"]
        at_level = [m for m in counted if m.levels.get(level)]
        level_share = sum(m.share for m in at_level)
        workloads: dict[str, float] = {}
        for m in counted:
            for (owner, workload), share in m.workloads.items():
                if owner == problem:
                    workloads[workload] = workloads.get(workload, 0.0) + share
        problems.append(
            ProblemWeights(
                problem=problem,
                level=level,
                weight=sum(m.share * m.weights.get(problem, 0.0) for m in counted) / (everything or 1.0),
                level_weight=sum(m.share * m.levels[level].get(problem, 0.0) for m in at_level) / (level_share or 1.0),
                model_weights={
                    label: sum(m.weights[problem] for m in ms) / len(ms)
                    for label, ms in sorted(by_label.items())
                    if any(problem in m.weights for m in ms)
                },
                workloads={w: share for w, share in workloads.items() if share > 0},
            )
        )
    problems.sort(key=lambda p: (-p.weight, p.problem))
    level_sums: dict[int, float] = {}
    for p in problems:
        level_sums[p.level] = level_sums.get(p.level, 0.0) + p.level_weight
    return WeighReport(
        root=str(root),
        models=[m.summary for m in models],
        problems=problems,
        unclaimed=sorted(p.problem for p in problems if not p.model_weights),
        disagreements=sorted(disagreements, key=lambda d: -max(d.ratio, 1 / d.ratio)),
        weight_sum=sum(p.weight for p in problems),
        level_sums=dict(sorted(level_sums.items())),
    )


def write(root: Path, report: WeighReport) -> None:
    """The report's weights into each problem.toml (weight, level_weight, model_weights and the
    workloads' weights, in the assembly's format) and into ROOT/dataset.json's kept entries."""
    root = Path(root)
    for weights in report.problems:
        path = root / weights.problem / "problem.toml"
        spec = tomllib.loads(path.read_text())
        updated: dict[str, Any] = {}
        at = "weight" if "weight" in spec else "level"  # where the weight was: the format stays
        for key, value in spec.items():
            if key not in ("weight", "level_weight", "model_weights"):
                updated[key] = value
            if key == at:
                updated["weight"] = _round(weights.weight)
                updated["level_weight"] = _round(weights.level_weight)
        if weights.model_weights:
            updated["model_weights"] = {k: _round(v) for k, v in weights.model_weights.items()}
        for workload in updated["workloads"]:
            if workload["name"] in weights.workloads:
                workload["weight"] = _round(weights.workloads[workload["name"]])
        ProblemSpec.model_validate(updated)  # what is written loads
        path.write_text(dump_problem_toml(updated))
    index = root / "dataset.json"
    if index.is_file():
        dataset = Dataset.model_validate_json(index.read_text())
        new = {p.problem: _round(p.weight) for p in report.problems}
        for entry in dataset.entries:
            if entry.status == "kept" and entry.problem in new:
                entry.weight = new[entry.problem]
        _write(root, dataset.harvests, dataset.entries)
    report.written = True
