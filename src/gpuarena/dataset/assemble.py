"""Harvests into a dataset: `gpuarena dataset add HARVEST... -o ROOT`.

A harvest (dataset/harvest.py) writes one problem per (op, arguments) of one model and phase, with
one workload: the shapes it recorded, often a GPU's worth. A dataset problem needs more:
- a workload small enough for the CPU (CI checks every problem there): each size over 32 is
  shrunk, distinct sizes staying distinct and in order, equal sizes equal (so a matmul's inner
  sizes still agree, and the key and query of attention keep one length); a fusion's sizes are
  all divided by one power of two instead (`scale_down`), which keeps hidden = heads x head_dim;
- the same op on the same arguments seen in several harvests is one problem: each harvest adds
  its workload (named by model and phase) and its provenance;
- its weight: the sum of its shares over the harvests that found it, so each model-phase weighs
  the same in the dataset, and within it each op by its measured share of the time.

A harvest's raw profile (profile.jsonl, or profile.jsonl.gz as the repository keeps it) lets the
reference be written anew by today's candidate writer (an attention recorded as cuDNN's op becomes
the portable `scaled_dot_product_attention`, which the CPU runs too).

Every assembled problem is checked on the CPU (`gpuarena check`); one that fails is left out and
listed with its reasons in ROOT/dataset.json, with the share of candidates that failed.
"""

from __future__ import annotations

import gzip
import json
import re
import shutil
import tomllib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict

from gpuarena.dataset import candidate, graph, jax_sizes
from gpuarena.dataset.record import CallRecord, ModuleCall
from gpuarena.dataset.small_workload import (
    cpu_only_small,
    degenerate_small,
    halved_factor,
    scale_down,
    shrink,
)
from gpuarena.dataset.traffic import with_formulas
from gpuarena.errors import GpuarenaError
from gpuarena.problems.model import ProblemSpec
from gpuarena.suite.model import SuiteResult

if TYPE_CHECKING:  # types only: the check imports torch
    from gpuarena.harness.problem_check import CheckReport


class Entry(BaseModel):
    """One problem of the dataset and where it came from: an entry of dataset.json."""

    model_config = ConfigDict(extra="forbid")

    problem: str
    """level1/<op>-<hash>, as in the harvests."""
    status: Literal["kept", "left-out"]
    weight: float
    harvests: list[str]
    """The harvests (model phase) that found it."""
    reasons: list[str] = []
    merged: list[str] = []
    """The problems folded into it by `dataset merge` (and into those, before): a harvest's
    group names its problem by the id it was written under (`dataset weigh` maps it here)."""


class Dataset(BaseModel):
    """ROOT/dataset.json: what the dataset holds, what was left out and why."""

    model_config = ConfigDict(extra="forbid")

    harvests: list[str]
    """Each harvest's command."""
    kept: int
    left_out: int
    left_out_share: float
    """The share of candidates that failed a check (the CPU's at assembly, a device's by recheck)."""
    entries: list[Entry]


def model_slug(model: str) -> str:
    """hf:Qwen2MoeForCausalLM:size=full -> qwen2moe; hf:MixtralForCausalLM:size=full,num_hidden_layers=8 ->
    mixtral; llama:dim=4096,layers=32,... -> llama-d4096-l32."""
    if model.startswith("jax:"):  # jax:keras:LlamaBackbone,num_layers=4 -> jax-llama; jax:tiny-llama -> jax-tiny-llama
        name = model.split(":")[-1].split(",")[0].removesuffix("Backbone")
        return "jax-" + re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
    if model.startswith("llama:"):  # gpuarena's own Llama: its width and depth name it
        sizes = dict(item.partition("=")[::2] for item in model.removeprefix("llama:").split(","))
        return f"llama-d{sizes.get('dim', '')}-l{sizes.get('layers', '')}"
    name = model.removeprefix("hf:").replace(":size=full", "").split(",")[0]
    name = re.sub(r"(For(CausalLM|ImageClassification|MaskedLM|SequenceClassification)|LMHeadModel)$", "", name)
    return re.sub(r"[^a-z0-9]+", "-", name.lower().replace("=", "")).strip("-")


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{k} = {_toml_value(v)}" for k, v in value.items()) + " }"
    raise TypeError(f"no TOML for {value!r}")


def dump_problem_toml(spec: dict[str, Any]) -> str:
    """problem.toml from its parsed dict: top-level keys, then tables, then the workloads."""
    tables = {k: v for k, v in spec.items() if isinstance(v, dict)}
    lines = [f"{k} = {_toml_value(v)}" for k, v in spec.items() if k not in tables and k != "workloads"]
    for name, table in tables.items():
        lines += ["", f"[{name}]", *(f"{k} = {_toml_value(v)}" for k, v in table.items())]
    for workload in spec.get("workloads", []):
        lines += ["", "[[workloads]]", *(f"{k} = {_toml_value(v)}" for k, v in workload.items())]
    return "\n".join(lines) + "\n"


def _lines(folder: Path, name: str) -> list[str]:
    """A harvest's raw record file, as kept: name, or name.gz (as the repository keeps it)."""
    for path, opener in ((folder / name, open), (folder / f"{name}.gz", gzip.open)):
        if path.is_file():
            with opener(path, "rt") as f:
                return f.read().splitlines()
    return []


def _module_references(folder: Path, calls: list[CallRecord], groups: list[dict[str, Any]]) -> dict[str, str]:
    """Module groups' references written anew by today's graph writer (dataset/graph.py), from the
    harvest's calls and modules.jsonl, with the names (and the inputs made zeros) its first
    writing gave them; by problem. Empty where the harvest kept no modules.jsonl."""
    modules: dict[tuple[int, str], list[ModuleCall]] = {}
    for m in map(ModuleCall.model_validate_json, _lines(folder, "modules.jsonl")):
        modules.setdefault((m.start, m.cls), []).append(m)  # a layer and its norm start alike
    if not modules or not groups or not calls:
        return {}
    written: dict[str, str] = {}
    for group in groups:
        old = folder / group["problem"] / "reference.py"
        if not old.is_file():
            continue
        names, ignored = graph.names_of(old.read_text())
        # nested modules of one class start alike too (RegNet's Sequential in a Sequential): the
        # one whose graph reads as many inputs as the first writing named
        made: graph.ModuleGraph | str | None = None
        for module in modules.get((group["first_call"], group["op"].removeprefix("module:")), []):
            made = graph.module_graph(calls, module, [], ignored=ignored, names=names)
            if isinstance(made, graph.ModuleGraph) and len(made.call.args) + len(ignored) == len(names):
                break
            made = None
        if isinstance(made, graph.ModuleGraph):
            title = old.read_text().split("\n", 1)[0].strip('"')
            written[group["problem"]] = candidate.render(
                made.call, title, f"the {made.ops} aten calls of the module's forward", made.body
            )
    return written


def _merge(
    target: Path,
    source: Path,
    harvest: dict[str, Any],
    share: float,
    call: CallRecord | None,
    reference: str | None = None,
) -> None:
    """Add one harvest's problem to the dataset's folder (made from it when new). With the recorded
    call at hand, the reference is written anew from it, by today's candidate writer; a module's
    graph is given written anew (`reference`), or keeps its lines with today's input drawing."""
    spec = tomllib.loads((source / "problem.toml").read_text())
    if spec["provenance"].get("framework", "pytorch") != "pytorch":
        call = reference = None  # a JAX reference keeps its own lines (today's writer writes aten calls)
    (recorded,) = spec["workloads"]
    label = f"{model_slug(harvest['model'])}-{harvest['phase']}"
    recorded = {**recorded, "name": label, "devices": ["cuda"] if harvest["device"] != "cpu" else ["cpu", "cuda"]}
    tags = ["harvested", model_slug(harvest["model"]), harvest["phase"]]
    if not target.exists():
        shutil.copytree(source, target)
        spec["summary"] = f"{spec['provenance']['operator']} as called in real models (gpuarena harvest)"
        if call is not None:  # and the outputs it returns (a norm's saved statistics no longer)
            (target / "reference.py").write_text(candidate.reference_source(call, spec["summary"]))
            spec["outputs"] = candidate.output_names(call)
        elif reference is not None:
            (target / "reference.py").write_text(reference)
        else:  # a module's graph without its raw records: its own lines, today's input drawing
            path = target / "reference.py"
            path.write_text(candidate.refresh_helpers(path.read_text()))
        spec.update(weight=share, workloads=[recorded], tags=[spec["provenance"]["operator"], *tags])
    else:
        mine = tomllib.loads((target / "problem.toml").read_text())
        names = {w["name"] for w in mine["workloads"]}
        if label not in names:
            mine["workloads"].append(recorded)
        mine["weight"] = mine["weight"] + share
        mine["tags"] = list(dict.fromkeys([*mine["tags"], *tags]))
        mine["provenance"]["models"] = list(
            dict.fromkeys([*mine["provenance"]["models"], *spec["provenance"]["models"]])
        )
        spec = mine
    spec["workloads"] = [w for w in spec["workloads"] if w["name"] != "small"]
    if not any("cpu" in w["devices"] for w in spec["workloads"]):
        first = spec["workloads"][0]
        # a JAX reference's sizes scale by one factor, and the sizes its body names (S(n)) with them
        jax = spec["provenance"].get("framework") == "jax"
        named = jax_sizes.sizes_in((target / "reference.py").read_text()) if jax else []
        small = scale_down(first["axes"], named) if spec["level"] > 1 or jax else shrink(first["axes"])
        spec["workloads"].append({**first, "name": "small", "axes": small, "devices": ["cpu", "cuda"]})
    spec["workloads"] = cpu_only_small(spec["workloads"])
    spec["weight"] = float(f"{spec['weight']:.6g}")
    (target / "problem.toml").write_text(dump_problem_toml(spec))
    # bytes and FLOPs over the workloads as they now are (a model's shapes may have joined)
    (target / "problem.toml").write_text(dump_problem_toml(with_formulas(spec, target)))


def retried(entries: list[Entry], on: Sequence[str] = ()) -> set[str]:
    """The problems a retry assembles again: those the CPU's check left out at assembly, and those
    a recheck on one of the devices `on` left out (its reasons start with "on <device>:"): that
    device has to take them back, so they are checked on it again (`recheck`) before use."""

    def again(entry: Entry) -> bool:
        devices = {r.split(":", 1)[0][3:] for r in entry.reasons if r.startswith("on ")}
        return not devices or devices <= set(on)

    return {e.problem for e in entries if e.status == "left-out" and again(e)}


def add(
    harvests: list[Path],
    root: Path,
    check: bool = True,
    progress: Any = lambda _text: None,
    retry: bool = False,
    retry_on: Sequence[str] = (),
) -> Dataset:
    """Assemble the harvests' written problems into root/level1 (a dataset folder, new or made by
    this command: its problems are merged with the new ones), check each on the CPU, and write
    root/dataset.json. retry: also assemble again, from the harvests given that made them, the
    problems the CPU's check left out before (`retried`), and check only those and the new ones:
    after a fix to the writer or the check (a tolerance's `outside` share, say). retry_on: also
    those a recheck on these devices left out; they pass the CPU's check here and need
    `recheck` on that device before the dataset is used."""
    from gpuarena.dataset.checker import CandidateChecker

    root = Path(root)
    if root.exists() and any(root.iterdir()) and not (root / "dataset.json").exists():
        raise GpuarenaError(f"{root}: not empty and not a dataset folder; give a new folder with -o")
    previous = (
        Dataset.model_validate_json((root / "dataset.json").read_text()) if (root / "dataset.json").exists() else None
    )
    entries = {e.problem: e for e in previous.entries} if previous else {}
    commands = list(previous.harvests) if previous else []
    retrying = retry or bool(retry_on)
    again = retried(list(entries.values()), retry_on) if retrying else set()
    for problem in again:  # from scratch: the weights add up again over the harvests that made it
        entries[problem] = Entry(problem=problem, status="kept", weight=0.0, harvests=[])
        shutil.rmtree(root / problem, ignore_errors=True)
    touched = set(again)  # the problems this call assembles: what a retry checks
    for folder in harvests:
        path = Path(folder) / "harvest.json"
        if not path.is_file():
            raise GpuarenaError(f"{folder}: no harvest.json (give folders written by gpuarena harvest -o)")
        harvest = json.loads(path.read_text())
        before = harvest["command"] in commands
        if before and not again:
            continue  # added before: its shares are in the weights already
        if not before:
            commands.append(harvest["command"])
        where = f"{model_slug(harvest['model'])} {harvest['phase']}"
        calls = [CallRecord.model_validate_json(line) for line in _lines(Path(folder), "profile.jsonl")]
        graphs = _module_references(
            Path(folder),
            calls,
            [g for g in harvest["groups"] if g["status"] == "written" and g.get("kind", "op") == "module"],
        )
        for group in harvest["groups"]:
            if group["status"] != "written":
                continue
            problem = group["problem"]
            if before and problem not in again:
                continue  # its share is in the weight already
            touched.add(problem)
            entry = entries.get(problem)
            if entry is None or entry.status == "left-out":  # new, or tried again from scratch
                entry = Entry(problem=problem, status="kept", weight=0.0, harvests=[])
            op = group.get("kind", "op") == "op" and group["first_call"] < len(calls)
            call = calls[group["first_call"]] if op else None  # a module's graph: `graphs`
            _merge(root / problem, Path(folder) / problem, harvest, group["share"], call, graphs.get(problem))
            entry.weight = float(f"{entry.weight + group['share']:.6g}")
            entry.harvests = list(dict.fromkeys([*entry.harvests, where]))
            entries[problem] = entry
    with CandidateChecker("cpu") as checker:
        for n, entry in enumerate(entries.values()):
            if entry.status != "kept" or not check or (retrying and entry.problem not in touched):
                continue
            progress(f"checking {n + 1}/{len(entries)}: {entry.problem}")
            report = tolerant_check(checker, root / entry.problem)
            while degenerate_small(report.errors, report.notes) and _halve_small(root / entry.problem):
                report = tolerant_check(checker, root / entry.problem)  # a less small workload
            if not report.ok:
                _leave_out(root, entry, report.errors)
    return _write(root, commands, list(entries.values()))


def _halve_small(folder: Path) -> bool:
    """Write folder's small workload with half its factor (small_workload.halved_factor), its
    bytes and FLOPs derived again; False where there is none to halve."""
    path = folder / "problem.toml"
    spec = halved_factor(tomllib.loads(path.read_text()))
    if spec is None:
        return False
    path.write_text(dump_problem_toml(spec))
    path.write_text(dump_problem_toml(with_formulas(spec, folder)))
    return True


def tolerant_check(checker: Callable[[Path], CheckReport], folder: Path) -> CheckReport:
    """A candidate's check, and where rounding amplified in a few elements is what failed it, the
    tolerance its reference's own float32 computation needs (`outside`, problem_check.py)
    written into its problem.toml and the check run once more: a decoder layer whose float32
    computation misses its bfloat16 reference on 1 element in 10,000 is a fair problem with that
    allowance, where an elementwise bound over every element fails every honest kernel. Written
    also where the check passes but honest kernels may not (check.HONEST_SPREAD)."""
    report = checker(folder)
    path = folder / "problem.toml"
    spec = tomllib.loads(path.read_text())
    defaults = ProblemSpec.model_validate(spec)
    wider = {
        dtype: {**defaults.tolerance_for(dtype).model_dump(), "outside": outside}
        for dtype, outside in sorted(report.outside_needed.items())
        if outside > defaults.tolerance_for(dtype).outside
    }
    if not wider:
        return report
    spec.setdefault("tolerance", {}).update(wider)
    path.write_text(dump_problem_toml(spec))
    return checker(folder)


def recheck(root: Path, device: str, progress: Any = lambda _text: None) -> tuple[Dataset, list[Entry]]:
    """Check every kept problem of the dataset at `root` on `device` and leave out those that fail,
    with the device in their reasons: the CPU's check at assembly runs the small workloads only,
    and a GPU's kernels can show what the CPU's did not (an input the result does not depend on
    at the recorded sizes, a view the GPU's attention output refuses). A problem given a wider
    tolerance there (`tolerant_check`) is checked again on the CPU, whose small workloads it
    also governs. Returns the dataset and the entries this left out."""
    from gpuarena.dataset.checker import CandidateChecker

    root = Path(root)
    dataset = _existing(root)
    kept = [e for e in dataset.entries if e.status == "kept"]
    newly: list[Entry] = []
    with CandidateChecker(device) as checker, CandidateChecker("cpu") as on_cpu:
        for n, entry in enumerate(kept):
            progress(f"checking {n + 1}/{len(kept)} on {device}: {entry.problem}")
            spec = root / entry.problem / "problem.toml"
            before = spec.read_text()
            report = tolerant_check(checker, root / entry.problem)
            if report.ok and device != "cpu" and spec.read_text() != before:
                # the tolerance derived at the recorded size holds for the CPU's small workloads too:
                # with T5's block's `outside = 0.0002` from an H200, a fresh key weight passed there
                report = on_cpu(root / entry.problem)
                report.errors = [f"the tolerance derived here fails the CPU's check: {e}" for e in report.errors]
            if not report.ok:
                newly.append(_leave_out(root, entry, [f"on {device}: {error}" for error in report.errors]))
    return _write(root, dataset.harvests, dataset.entries), newly


def leave_out_failed(root: Path, result: SuiteResult) -> tuple[Dataset, list[Entry]]:
    """Leave out the kept problems whose implementation in a suite run gave wrong values: a
    framework's own implementation of a reference (torch.compile of it, say) is an honest kernel,
    and a tolerance it fails is one that kernels rounding as it does fail too (docs/dataset.md).
    The reasons name the run's device first, as a recheck's do, so `dataset add
    --retry-left-out-on DEVICE` can take them back after a fix. Returns the dataset and the
    entries this left out."""
    root = Path(root)
    dataset = _existing(root)
    failed = {p.problem: p for p in result.problems if p.status == "WRONG_VALUES"}
    newly: list[Entry] = []
    for entry in dataset.entries:
        run = failed.get(entry.problem)
        if entry.status == "kept" and run is not None:
            newly.append(
                _leave_out(
                    root,
                    entry,
                    [
                        f"on {result.device}: {result.framework} of the reference, an honest "
                        f"implementation, gave wrong values on {result.device_name}: {run.reason}"
                    ],
                )
            )
    return _write(root, dataset.harvests, dataset.entries), newly


def leave_out_named(root: Path, problems: list[str], reason: str) -> tuple[Dataset, list[Entry]]:
    """Leave out kept problems by id, for a reason found by reading them (a reference whose
    activation the writer fixed to zeros measures nothing, say); an id the dataset does not
    keep is refused before anything changes."""
    root = Path(root)
    dataset = _existing(root)
    kept = {e.problem: e for e in dataset.entries if e.status == "kept"}
    unknown = [name for name in problems if name not in kept]
    if unknown:
        raise GpuarenaError(f"{root} keeps no problem {', '.join(unknown)} (dataset.json lists what it keeps)")
    newly = [_leave_out(root, kept[name], [reason]) for name in dict.fromkeys(problems)]
    return _write(root, dataset.harvests, dataset.entries), newly


def _existing(root: Path) -> Dataset:
    """The index of the dataset at `root`, or a clear refusal where there is none."""
    if not (root / "dataset.json").is_file():
        raise GpuarenaError(f"{root}: no dataset.json (give a folder made by gpuarena dataset add)")
    return Dataset.model_validate_json((root / "dataset.json").read_text())


def _leave_out(root: Path, entry: Entry, reasons: list[str]) -> Entry:
    """Mark a kept problem left out with its reasons and remove its folder (the index keeps why)."""
    entry.status, entry.reasons = "left-out", reasons
    shutil.rmtree(root / entry.problem)
    return entry


def _write(root: Path, commands: list[str], entries: list[Entry]) -> Dataset:
    """root/dataset.json: the entries by weight, with the counts."""
    ordered = sorted(entries, key=lambda e: (-e.weight, e.problem))
    left = [e for e in ordered if e.status == "left-out"]
    result = Dataset(
        harvests=commands,
        kept=len(ordered) - len(left),
        left_out=len(left),
        left_out_share=len(left) / len(ordered) if ordered else 0.0,
        entries=ordered,
    )
    root.mkdir(parents=True, exist_ok=True)
    (root / "dataset.json").write_text(result.model_dump_json(indent=2) + "\n")
    return result
