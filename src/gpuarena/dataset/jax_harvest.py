"""Harvest problems from a JAX model: its primitives (level 1) and its layers' scopes (levels 2-4),
each written as a problem whose reference is JAX (`provenance.framework = "jax"`), checked and
weighed by its share of the measured time, as `harvest.py` does for PyTorch models.

A reference calls the recorded primitives themselves (`jax.lax.dot_general_p.bind(...)` with
the recorded parameters), so it computes exactly what the model did, as a PyTorch harvest's
calls the recorded aten op. A layer's scope (a Keras layer, a Flax module: every equation traced
under `llama_backbone/transformer_layer_0/self_attention`) is one fusion; the layers that compute
alike (the same equations on the same shapes) are one group. Inputs are drawn by the same
writer as a PyTorch harvest's (`candidate.render`), from the recorded shapes and value ranges.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from gpuarena.dataset import candidate
from gpuarena.dataset.harvest import IGNORED, Group, Harvest, _slug
from gpuarena.dataset.jax_sizes import FACTOR, sized_lines
from gpuarena.dataset.jax_source import (
    CUDNN_ATTENTION,
    JAX_TEMPLATE,
    SIZED_TEMPLATE,
    Unwritable,
    attention_source,
    literal_source,
    param_source,
    primitive_source,
)
from gpuarena.dataset.jax_trace import Const, Equation, Trace, flatten, run
from gpuarena.dataset.record import ArgRecord, CallRecord, TensorInfo
from gpuarena.errors import GpuarenaError
from gpuarena.problems.model import DTYPES

LAYOUT_ONLY = frozenset(
    {
        "reshape",
        "squeeze",
        "expand_dims",
        "broadcast_in_dim",
        "stop_gradient",
        "copy",
        "copy_p",
        "convert_element_type",
        "iota",
    }
)
"""Primitives that move no data worth a kernel alone (XLA folds them into their neighbours), or
make it from nothing: part of a fusion's body, never a level-1 problem."""
IDENTITY = frozenset({"stop_gradient", "copy", "copy_p", "optimization_barrier"})
"""Primitives that return their input in a forward pass: written as the value itself."""
MATMULS = frozenset({"dot_general", "conv_general_dilated", "ragged_dot", "ragged_dot_general"})


class Piece:
    """Equations written as one reference: its inputs (values made before it, in order of first
    use), its outputs (values used outside it, or the forward's), and its body's lines, with
    canonical names, so that two layers computing alike read alike."""

    def __init__(
        self,
        trace: Trace,
        equations: list[Equation],
        needed_outside: Callable[[int, set[int]], bool],
        zeroed: frozenset[int] = frozenset(),
    ):
        """zeroed: inputs the check found the outputs do not depend on (the maximum a softmax
        subtracts), written as zeros, as a PyTorch harvest's module graph makes them."""
        self.trace, self.needed_outside, self.zeroed = trace, needed_outside, zeroed
        self.equations = equations
        made = {o for e in equations for o in e.outputs}
        self.inputs: list[int] = []
        self.order: list[int] = []  # the inputs it takes with none zeroed
        written_in: dict[int, Const] = {}
        for eqn in equations:
            for given in eqn.inputs:
                if not isinstance(given, int) or given in made or given in self.inputs or given in written_in:
                    continue
                scalar = _scalar(trace.info[given])
                if scalar is None and 0 not in trace.info[given].shape:
                    self.order.append(given)
                if given in zeroed or 0 in trace.info[given].shape:  # an empty value is zeros too
                    written_in[given] = Const(0, trace.info[given].dtype, tuple(trace.info[given].shape))
                elif scalar is not None:
                    written_in[given] = scalar
                else:
                    self.inputs.append(given)
        inside = {e.index for e in equations}  # a scope's equations need not be contiguous
        self.outputs = [o for e in equations for o in e.outputs if needed_outside(o, inside)]
        if not self.outputs:
            self.outputs = list(equations[-1].outputs)
        names = {given: f"x{k}" for k, given in enumerate(self.inputs)}
        self.lines: list[str] = []
        for eqn in equations:
            for out in eqn.outputs:
                names[out] = f"t{len(names) - len(self.inputs)}"
            args = [
                literal_source(g)
                if isinstance(g, Const)
                else literal_source(written_in[g])
                if g in written_in
                else names[g]
                for g in eqn.inputs
            ]
            outs = ", ".join(names[o] for o in eqn.outputs) + (
                "," if eqn.primitive.multiple_results and len(eqn.outputs) == 1 else ""
            )
            if eqn.name in IDENTITY and len(args) == len(eqn.outputs) == 1:
                self.lines.append(f"{outs} = {args[0]}")
                continue
            if eqn.name == CUDNN_ATTENTION:
                # empty: given so, or made inside a scope (KerasHub's layers make their own)
                empty = [0 in (g.shape if isinstance(g, Const) else trace.info[g].shape) for g in eqn.inputs]
                self.lines.append(f"{outs} = {attention_source(eqn, args, empty)}")
                continue
            params = [f"{key}={param_source(value)}" for key, value in sorted(eqn.params.items())]
            self.lines.append(f"{outs} = {primitive_source(eqn)}({', '.join([*args, *params])})")
        results = [names[o] for o in self.outputs]
        self.lines.append(f"return {results[0]}" if len(results) == 1 else f"return ({', '.join(results)})")
        self.input_info = [trace.info[i] for i in self.inputs]
        self.output_info = [trace.info[o] for o in self.outputs]
        self.sized = False
        self.smaller: Piece | None = None  # the piece at half the sizes it was sized by

    def with_zeros(self, ignored: set[int]) -> Piece:
        """The piece with these inputs made zeros too, its sizes written as before."""
        piece = Piece(self.trace, self.equations, self.needed_outside, self.zeroed | ignored)
        piece.size_by(self.smaller)
        return piece

    def size_by(self, smaller: Piece | None, factor: int = FACTOR) -> None:
        """Write the numbers that are sizes as S(n) (dataset/jax_sizes.py): `smaller` is the same
        piece traced with the model's sizes divided by factor (its inputs zeroed alike)."""
        if smaller is None or len(smaller.order) != len(self.order):
            return
        given = smaller
        if self.zeroed:  # the same inputs, by place, made zeros there too
            zeroed = frozenset(smaller.order[self.order.index(i)] for i in self.zeroed)
            smaller = Piece(smaller.trace, smaller.equations, smaller.needed_outside, zeroed)
        lines = sized_lines(self.lines, smaller.lines, factor)
        if lines is None or lines == self.lines:
            return
        self.smaller = given
        recorded = tuple(tuple(info.shape) for info in self.input_info)
        inputs = "".join(f"x{k}, " for k in range(len(self.inputs)))
        self.lines, self.sized = [f"S = _sizes({recorded!r}, ({inputs}))", *lines], True

    def call(self, op: str, seconds: float) -> CallRecord:
        """The piece as the candidate writer's call: its inputs as x0, x1... and its results."""
        args = [ArgRecord(name=f"x{k}", kind="tensor", tensor=info) for k, info in enumerate(self.input_info)]
        return CallRecord(
            index=self.equations[0].index,
            op=op,
            args=args,
            outputs=self.output_info,
            seconds=seconds,
            metadata_only=False,
            mutates=False,
        )

    def why_not(self) -> str | None:
        if not self.inputs:
            return "no array input (made from nothing, as iota)"
        for info in [*self.input_info, *self.output_info]:
            if info.dtype not in DTYPES:
                return f"dtype {info.dtype} is not one problems support"
            if 0 in info.shape:
                return "an empty array"
        return None


def _scalar(info: TensorInfo) -> Const | None:
    """A 0-dim value made before a piece is one of the model's constants (an epsilon, a mask's fill
    value, a scale), written into the body as it was, not drawn: drawn, a mask's fill value of
    -2.4e38 would be the same for every seed, and the check would reject the piece for it."""
    if info.shape or info.low is None or info.low != info.high:
        return None
    value: float | int = int(info.low) if info.dtype.startswith(("int", "uint")) else info.low
    return Const(value, info.dtype)


def level_of(equations: list[Equation]) -> int:
    """As for PyTorch fusions (graph.level_of): 2 without a matrix multiply, 3 with one, 4 for an
    attention (two matrix multiplies around an exp) or five matrix multiplies and more."""
    names = [e.name for e in equations]
    matmuls = sum(n in MATMULS for n in names)
    if matmuls >= 5 or (matmuls >= 2 and "exp" in names) or CUDNN_ATTENTION in names:
        return 4
    return 3 if matmuls else 2


def _normal_scope(scope: str) -> str:
    """A layer's scope with its index taken off (transformer_layer_0 -> transformer_layer), so the
    layers that compute alike group together."""
    return "/".join(re.sub(r"_\d+$", "", part) for part in scope.split("/"))


def _needed_outside(trace: Trace) -> Callable[[int, set[int]], bool]:
    """Whether a value is needed outside a piece (the equations of these indices): an equation
    elsewhere takes it, or the forward returns it."""
    uses: dict[int, set[int]] = {}
    for eqn in trace.equations:
        for given in eqn.inputs:
            if isinstance(given, int):
                uses.setdefault(given, set()).add(eqn.index)
    outputs = set(trace.outputs)
    return lambda value, inside: value in outputs or bool(uses.get(value, set()) - inside)


def _signature(info: TensorInfo) -> list[Any]:
    return [info.shape, info.dtype]


def groups_of(trace: Trace) -> list[tuple[Group, Piece | None]]:
    """Level-1 groups (one primitive with the same parameters on the same shapes) and fusion
    groups (a layer's scope: the same body on the same shapes), in order of first call."""
    needed_outside = _needed_outside(trace)
    total = sum(trace.seconds) or 1.0
    found: dict[str, tuple[Group, Piece | None, list[int]]] = {}
    for eqn in trace.equations:
        try:
            piece: Piece | None = Piece(trace, [eqn], needed_outside)
            assert piece is not None
            body = piece.lines
            reason = None
        except Unwritable as exc:
            piece, body, reason = None, [eqn.name, repr(sorted(eqn.params))], str(exc)
        shapes = [_signature(trace.info[g]) if isinstance(g, int) else literal_source(g) for g in eqn.inputs]
        key = json.dumps(["op", eqn.name, body, shapes])
        if key not in found:
            group = Group(
                name=f"jax-{_slug(eqn.name)}-{hashlib.sha256(key.encode()).hexdigest()[:8]}",
                op="jax.nn.dot_product_attention" if eqn.name == CUDNN_ATTENTION else f"jax.lax.{eqn.name}",
                signature=key,
                calls=0,
                first_call=eqn.index,
                seconds=0.0,
                share=0.0,
            )
            if eqn.name in LAYOUT_ONLY:
                group.status, group.reasons = "metadata", ["moves or makes data XLA folds into its neighbours"]
            elif why := reason or (piece.why_not() if piece else None):
                group.status, group.reasons = "unsupported", [why]
            found[key] = (group, piece, [])
        found[key][2].append(eqn.index)
    scopes: dict[str, list[Equation]] = {}
    for eqn in trace.equations:
        parts = eqn.scope.split("/") if eqn.scope else []
        for depth in range(2, len(parts) + 1):  # the model's own scope (depth 1) is the whole forward
            scopes.setdefault("/".join(parts[:depth]), []).append(eqn)
    for scope, equations in scopes.items():
        if sum(e.name not in LAYOUT_ONLY for e in equations) < 2:
            continue  # one primitive: a level-1 problem already
        normal = _normal_scope(scope)
        try:
            piece = Piece(trace, equations, needed_outside)
            body, reason = piece.lines, piece.why_not()
        except Unwritable as exc:
            piece, body, reason = None, [e.name for e in equations], str(exc)
        key = json.dumps(["scope", normal, body, [_signature(i) for i in (piece.input_info if piece else [])]])
        if key not in found:
            group = Group(
                name=f"jax-{_slug(normal.split('/')[-1])}-{hashlib.sha256(key.encode()).hexdigest()[:8]}",
                op=f"scope:{normal}",
                signature=hashlib.sha256(key.encode()).hexdigest(),
                calls=0,
                first_call=equations[0].index,
                seconds=0.0,
                share=0.0,
                kind="module",
                level=level_of(equations),
            )
            if reason:
                group.status, group.reasons = "unsupported", [reason]
            found[key] = (group, piece, [])
        found[key][2].extend(e.index for e in equations)
        found[key][0].calls += 1
    result = []
    for group, piece, indices in found.values():
        if group.kind == "op":
            group.calls = len(indices)
        group.seconds = sum(trace.seconds[i] for i in indices)
        group.share = group.seconds / total
        result.append((group, piece))
    return sorted(result, key=lambda pair: (pair[0].first_call, pair[0].kind != "op"))


def profile_lines(trace: Trace) -> list[str]:
    """profile.jsonl: each equation as a call record (op jax.lax.<primitive>, literals as values)."""
    lines = []
    for eqn in trace.equations:
        args = []
        for k, given in enumerate(eqn.inputs):
            if isinstance(given, Const):
                value = np.asarray(given.value).item()
                kind = "bool" if isinstance(value, bool) else "int" if isinstance(value, int) else "float"
                args.append(
                    ArgRecord(
                        name=f"x{k}",
                        kind=kind,
                        value=value if not isinstance(value, float) or math.isfinite(value) else str(value),
                    )
                )
            else:
                args.append(ArgRecord(name=f"x{k}", kind="tensor", tensor=trace.info[given]))
        lines.append(
            CallRecord(
                index=eqn.index,
                op=f"jax.lax.{eqn.name}",
                args=args,
                outputs=[trace.info[o] for o in eqn.outputs],
                seconds=trace.seconds[eqn.index],
                metadata_only=eqn.name in LAYOUT_ONLY,
                mutates=False,
            ).model_dump_json()
        )
    return lines


def _write(staged: Path, group: Group, piece: Piece, summary: str, what: str, models: list[str], phase: str) -> None:
    call = piece.call(group.op, group.seconds)
    reference = candidate.render(call, summary, what, piece.lines, SIZED_TEMPLATE if piece.sized else JAX_TEMPLATE)
    candidate.write(
        staged,
        call,
        group.name,
        summary,
        max(group.share, 1e-6),
        models,
        ["harvested", "jax", group.op, phase],
        level=group.level,
        reference=reference,
        framework="jax",
    )


def _size_layers(groups: list[tuple[Group, Piece | None]], halved: tuple[Callable[..., Any], list[Any]]) -> None:
    """Each layer's piece with its sizes written as S(n), from the same layer traced at half the
    model's sizes (the first of that scope's pieces there that reads alike but for sizes)."""
    import jax

    forward, arguments = halved
    smaller = flatten(jax.make_jaxpr(forward)(*arguments))
    run(smaller, list(arguments), repeats=0)
    halves: dict[str, list[Piece]] = {}
    for group, piece in groups_of(smaller):
        if piece is not None and group.kind == "module":
            halves.setdefault(group.op, []).append(piece)
    for group, piece in groups:
        if piece is None or group.kind != "module":
            continue
        for half in halves.get(group.op, []):
            piece.size_by(half)
            if piece.sized:
                break


def jax_device(device: str) -> Any:
    """The JAX device a harvest on `device` (cpu, cuda, cuda:N: the CLI refuses others) runs on;
    a clear error where JAX has none of that kind (a CPU-only jaxlib on a GPU host, say)."""
    import jax

    if device != "cpu":  # the check's child processes share the GPU with this one
        os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    platform = "cpu" if device == "cpu" else "gpu"
    try:
        devices = jax.devices(platform)
    except RuntimeError as exc:
        raise GpuarenaError(f"--device {device}: JAX has no {platform} here ({exc})") from None
    index = int(device.partition(":")[2] or 0)
    if index >= len(devices):
        raise GpuarenaError(f"--device {device}: JAX sees {len(devices)} {platform} device(s)")
    return devices[index]


def harvest_jax(
    forward: Callable[..., Any],
    arguments: list[Any],
    out: Path,
    *,
    model: str,
    phase: str,
    sizes: dict[str, int],
    command: str,
    seed: int = 0,
    min_share: float = 0.01,
    repeats: int = 3,
    progress: Callable[[str], None] = lambda _: None,
    fusions: bool = True,
    device: str = "cpu",
    halved: tuple[Callable[..., Any], list[Any]] | None = None,
) -> Harvest:
    """Trace forward(*arguments), run it primitive by primitive, group, check and write the
    problems under out/level1-4/; returns (and writes) harvest.json. out must be new, empty, or a
    previous harvest's folder (then replaced). halved: the model's forward and arguments at half
    its sizes, traced to tell which numbers of the layers' references are sizes (jax_sizes.py)."""
    import jax

    from gpuarena.dataset.checker import CandidateChecker

    out = Path(out)
    if out.exists() and any(out.iterdir()) and not (out / "harvest.json").exists():
        raise GpuarenaError(f"{out}: not empty and not a harvest folder; give a new folder with -o")
    for old in ("level1", "level2", "level3", "level4", ".candidates", "harvest.json", "profile.jsonl"):
        shutil.rmtree(out / old, ignore_errors=True) if (out / old).is_dir() else (out / old).unlink(missing_ok=True)
    out.mkdir(parents=True, exist_ok=True)
    progress("tracing")
    trace = flatten(jax.make_jaxpr(forward)(*arguments))
    progress(f"running {len(trace.equations)} primitives one by one")
    run(trace, list(arguments), repeats=repeats)
    (out / "profile.jsonl").write_text("".join(line + "\n" for line in profile_lines(trace)))
    where = f"{model} {phase} (" + ", ".join(f"{k} {v}" for k, v in sizes.items()) + ")"
    groups = [(g, p) for g, p in groups_of(trace) if fusions or g.kind == "op"]
    if halved is not None:
        progress("tracing the model at half its sizes")
        _size_layers(groups, halved)
    with CandidateChecker(device) as checker:
        for n, (group, piece) in enumerate(groups):
            if group.reasons or piece is None:  # metadata or unsupported, and why
                continue
            if group.share < min_share:
                group.status, group.reasons = "below-share", [f"share {group.share:.4f} < --min-share {min_share:g}"]
                continue
            progress(f"checking {n + 1}/{len(groups)}: {group.op}")
            staged = out / ".candidates" / group.name
            summary = f"{group.op} as called in {where}"
            what = (
                "the recorded primitive"
                if group.kind == "op"
                else f"the {len(piece.equations)} primitives traced in the layer's scope"
            )
            models = [
                f"{where}: {group.calls} call(s) a forward, {group.share:.2%} of the measured time "
                f"(gpuarena harvest, seed {seed}, on {device}, each primitive timed alone)"
            ]
            _write(staged, group, piece, summary, what, models, phase)
            report = checker(staged)
            for _ in range(4):  # inputs the outputs ignore are made zeros, and the piece checked again
                ignored = {
                    piece.inputs[int(m.group(1)[1:])]
                    for error in report.errors
                    for m in [IGNORED.search(error)]
                    if m and m.group(1)[1:].isdigit() and int(m.group(1)[1:]) < len(piece.inputs)
                }
                if report.ok or not ignored:
                    break
                piece = piece.with_zeros(ignored)
                shutil.rmtree(staged)
                _write(staged, group, piece, summary, what, models, phase)
                report = checker(staged)
            if report.ok:
                final = out / f"level{group.level}" / group.name
                final.parent.mkdir(exist_ok=True)
                staged.rename(final)
                group.status, group.problem = "written", f"level{group.level}/{group.name}"
            else:
                group.status, group.reasons = "rejected", report.errors
    shutil.rmtree(out / ".candidates", ignore_errors=True)
    listed = [g for g, _ in groups]
    rejected = [g for g in listed if g.status == "rejected"]
    result = Harvest(
        command=command,
        model=model,
        phase=phase,
        sizes=sizes,
        device=device,
        seed=seed,
        repeats=repeats,
        min_share=min_share,
        total_seconds=sum(trace.seconds),
        calls=len(trace.equations),
        written=sum(g.status == "written" for g in listed),
        rejected=len(rejected),
        rejected_share=sum(g.share for g in rejected if g.kind == "op"),
        groups=listed,
    )
    (out / "harvest.json").write_text(result.model_dump_json(indent=2) + "\n")
    return result
