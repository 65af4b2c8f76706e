"""Compare one produced output with its golden file: whether it matches, how close it is (in
[0, 1], used by the score when it does not match), and the worst differences to show.

Closeness per comparison:
- exact: the share of equal elements (tensor), lines by position (text) or JSON leaves (json);
- tolerance: the share of elements (or numeric JSON leaves) within atol + rtol * |expected|;
- tokens: the share of equal positions over the longer sequence;
- metric: 1 when within the threshold, else threshold / value (max_abs, rel_l2) or
  max(0, value) / threshold (cosine).
A file that is missing, unreadable or of another shape has closeness 0.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict

from gpuarena.migration.model import Exact, Metric, Output, Tokens, Tolerance

WORST = 5
"""How many differences a comparison lists."""


class Difference(BaseModel):
    """One place where the output differs from the golden one."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)
    where: str
    """An index (tensor), a position (tokens), a line number (text) or a JSON path."""
    got: str
    """The produced value, as text (shortened)."""
    expected: str
    """The golden value, as text (shortened)."""
    abs_diff: float | None = None
    """|got - expected| where both are numbers."""


class OutputComparison(BaseModel):
    """The comparison of one output."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)
    file: str
    """The output file."""
    kind: str
    """tensor, text or json."""
    method: str
    """The comparison with its parameters, e.g. 'tolerance(atol=1e-05, rtol=1e-05)'."""
    produced: bool
    """Whether the app wrote the file."""
    matched: bool
    """Whether the comparison passed."""
    closeness: float
    """How close, in [0, 1] (1 when matched)."""
    summary: str
    """One line: what was measured."""
    worst: list[Difference] = []
    """The worst differences (largest absolute ones, or the first positions that differ)."""


def _short(value: Any, limit: int = 80) -> str:
    text = (
        value
        if isinstance(value, str)
        else json.dumps(value)
        if not isinstance(value, np.generic)
        else repr(value.item())
    )
    return text if len(text) <= limit else text[: limit - 1] + "…"


def describe(compare: Exact | Tolerance | Tokens | Metric) -> str:
    params = ", ".join(
        f"{k}={v!r}" if isinstance(v, str) else f"{k}={v:g}" for k, v in compare.model_dump().items() if k != "kind"
    )
    return f"{compare.kind}({params})" if params else compare.kind


# -- loading ---------------------------------------------------------------------------------------


def load_tensors(path: Path) -> dict[str, np.ndarray]:
    """name -> array of a .npy ('' as the name), .npz or .pt (a tensor or a dict of tensors)."""
    if path.suffix == ".npy":
        return {"": np.load(path, allow_pickle=False)}
    if path.suffix == ".npz":
        with np.load(path, allow_pickle=False) as data:
            return {key: data[key] for key in data.files}
    import torch

    loaded = torch.load(path, map_location="cpu", weights_only=True)
    items = loaded.items() if isinstance(loaded, dict) else [("", loaded)]
    arrays = {}
    for key, value in items:
        if not isinstance(value, torch.Tensor):
            raise ValueError(f"{path.name}: entry {key!r} is a {type(value).__name__}, not a tensor")
        value = value.detach().cpu()
        arrays[str(key)] = (value.float() if value.dtype == torch.bfloat16 else value).numpy()
    return arrays


def _load(path: Path, kind: str) -> Any:
    if kind == "tensor":
        return load_tensors(path)
    text = path.read_text(encoding="utf-8")
    return json.loads(text) if kind == "json" else text


# -- tensors ---------------------------------------------------------------------------------------


def _index(name: str, flat: int, shape: tuple[int, ...]) -> str:
    where = str(tuple(int(i) for i in np.unravel_index(flat, shape))) if shape else "()"
    return f"{name}{where}" if name else where


def _tensor(
    got: dict[str, np.ndarray], expected: dict[str, np.ndarray], compare: Any
) -> tuple[bool, float, str, list[Difference]]:
    if sorted(got) != sorted(expected):
        return False, 0.0, f"arrays {sorted(got)} instead of {sorted(expected)}", []
    if isinstance(compare, Tokens):
        a = np.concatenate([got[k].ravel() for k in sorted(got)]) if got else np.array([])
        b = np.concatenate([expected[k].ravel() for k in sorted(expected)]) if expected else np.array([])
        return _tokens(a.tolist(), b.tolist(), compare)
    total, worst, summaries, matched = 0, [], [], True
    good: float = 0  # equal elements, and a metric's closeness (a share of one)
    for name in sorted(expected):
        a, b = got[name], expected[name]
        label = name or "tensor"
        if a.shape != b.shape:
            summaries.append(f"{label}: shape {a.shape} instead of {b.shape}")
            total += b.size
            matched = False
            continue
        if b.dtype.kind not in "biufc" or a.dtype.kind not in "biufc":
            eq = a == b
            total, good = total + b.size, good + int(eq.sum())
            matched &= bool(eq.all())
            summaries.append(f"{label}: {int((~eq).sum())} of {b.size} differ")
            continue
        a64, b64 = a.astype(np.float64), b.astype(np.float64)
        with np.errstate(invalid="ignore", over="ignore"):
            diff = np.abs(a64 - b64)
        diff = np.where(np.isnan(a64) & np.isnan(b64), 0.0, np.where(np.isnan(diff), np.inf, diff))
        if isinstance(compare, Metric):
            value = _metric(compare.name, a64, b64, diff)
            ok = value >= compare.threshold if compare.name == "cosine" else value <= compare.threshold
            summaries.append(
                f"{label}: {compare.name} = {value:.6g} "
                f"({'>=' if compare.name == 'cosine' else '<='} {compare.threshold:g} needed)"
            )
            matched &= bool(ok)
            total += 1
            good += _metric_closeness(compare, value) if not ok else 1.0
        else:
            if isinstance(compare, Exact):
                within = (a64 == b64) | (np.isnan(a64) & np.isnan(b64))
            else:
                within = np.isclose(a64, b64, atol=compare.atol, rtol=compare.rtol, equal_nan=True)
            bad = int(b.size - within.sum())
            matched &= bad == 0
            total, good = total + b.size, good + int(within.sum())
            max_abs = float(diff.max()) if diff.size else 0.0
            summaries.append(f"{label}: {bad} of {b.size} elements outside, max |diff| {max_abs:.3g}")
        if diff.size:
            flat = diff.ravel()
            for i in np.argsort(-flat, kind="stable")[:WORST]:
                if flat[i] == 0:
                    break
                worst.append(
                    Difference(
                        where=_index(name, int(i), b.shape),
                        got=_short(a.ravel()[i]),
                        expected=_short(b.ravel()[i]),
                        abs_diff=float(flat[i]),
                    )
                )
    worst.sort(key=lambda d: -(d.abs_diff or 0.0))
    closeness = 1.0 if matched else (good / total if total else 0.0)
    return matched, float(closeness), "; ".join(summaries), worst[:WORST]


def _metric(name: str, a: np.ndarray, b: np.ndarray, diff: np.ndarray) -> float:
    if name == "max_abs":
        return float(diff.max()) if diff.size else 0.0
    if name == "rel_l2":
        norm = float(np.linalg.norm(b))
        err = float(np.linalg.norm(diff))
        return err / norm if norm > 0 else (0.0 if err == 0 else math.inf)
    na, nb = float(np.linalg.norm(a)), float(np.linalg.norm(b))
    if na == 0 or nb == 0:
        return 1.0 if na == nb else 0.0
    return float(np.dot(a.ravel(), b.ravel()) / (na * nb))


def _metric_closeness(compare: Metric, value: float) -> float:
    if compare.name == "cosine":
        return max(0.0, value) / compare.threshold if compare.threshold > 0 else 1.0
    if not math.isfinite(value) or value <= 0:
        return 0.0 if not math.isfinite(value) else 1.0
    return min(1.0, compare.threshold / value)


# -- tokens and text -------------------------------------------------------------------------------


def _tokens(got: list[Any], expected: list[Any], compare: Tokens) -> tuple[bool, float, str, list[Difference]]:
    length = max(len(got), len(expected))
    equal = sum(1 for a, b in zip(got, expected) if a == b)
    share = equal / length if length else 1.0
    worst: list[Difference] = []
    for i in range(length):
        if len(worst) == WORST:
            break
        a = got[i] if i < len(got) else "(missing)"
        b = expected[i] if i < len(expected) else "(missing)"
        if i >= len(got) or i >= len(expected) or a != b:
            worst.append(Difference(where=f"position {i}", got=_short(a), expected=_short(b)))
    summary = f"{equal} of {length} positions equal ({share:.1%}; {compare.threshold:.1%} needed)"
    if len(got) != len(expected):
        summary += f"; {len(got)} tokens instead of {len(expected)}"
    matched = share >= compare.threshold
    return matched, share, summary, worst


def _text_exact(got: str, expected: str) -> tuple[bool, float, str, list[Difference]]:
    if got == expected:
        return True, 1.0, "identical", []
    a, b = got.splitlines(), expected.splitlines()
    length = max(len(a), len(b), 1)
    equal = sum(1 for x, y in zip(a, b) if x == y)
    worst = [
        Difference(
            where=f"line {i + 1}",
            got=_short(a[i] if i < len(a) else "(missing)"),
            expected=_short(b[i] if i < len(b) else "(missing)"),
        )
        for i in range(max(len(a), len(b)))
        if i >= len(a) or i >= len(b) or a[i] != b[i]
    ][:WORST]
    if not worst:  # same lines, other line endings or final newline
        worst = [Difference(where="line endings", got=_short(repr(got[-20:])), expected=_short(repr(expected[-20:])))]
    closeness = min(equal / length, 0.999)
    return False, closeness, f"{equal} of {length} lines equal", worst


# -- JSON ------------------------------------------------------------------------------------------


def _leaves(value: Any, path: str = "$") -> dict[str, Any]:
    if isinstance(value, dict):
        if not value:
            return {path: {}}
        return {p: v for key, item in value.items() for p, v in _leaves(item, f"{path}.{key}").items()}
    if isinstance(value, list):
        if not value:
            return {path: []}
        return {p: v for i, item in enumerate(value) for p, v in _leaves(item, f"{path}[{i}]").items()}
    return {path: value}


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _json(got: Any, expected: Any, compare: Any) -> tuple[bool, float, str, list[Difference]]:
    if isinstance(compare, Tokens):
        if not isinstance(got, list) or not isinstance(expected, list):
            return False, 0.0, "tokens need a JSON list in both files", []
        return _tokens(got, expected, compare)
    a, b = _leaves(got), _leaves(expected)
    paths = list(b) + [p for p in a if p not in b]
    diffs: list[Difference] = []
    good = 0
    for path in paths:
        if path not in a or path not in b:
            diffs.append(
                Difference(where=path, got=_short(a.get(path, "(missing)")), expected=_short(b.get(path, "(missing)")))
            )
            continue
        x, y = a[path], b[path]
        if isinstance(compare, Tolerance) and _number(x) and _number(y):
            ok = math.isclose(x, y, rel_tol=0, abs_tol=compare.atol + compare.rtol * abs(y)) or (x != x and y != y)
        else:
            ok = x == y and type(x) is type(y) or (_number(x) and _number(y) and x == y)
        if ok:
            good += 1
        else:
            delta = abs(x - y) if _number(x) and _number(y) else None
            diffs.append(Difference(where=path, got=_short(x), expected=_short(y), abs_diff=delta))
    matched = not diffs
    closeness = 1.0 if matched else good / len(paths)
    return matched, closeness, f"{len(diffs)} of {len(paths)} JSON values differ", diffs[:WORST]


# -- entry point -----------------------------------------------------------------------------------


def compare_output(spec: Output, produced: Path, golden: Path) -> OutputComparison:
    """Compare the produced file with the golden file as the output's spec says."""
    method = describe(spec.compare)
    base = dict(file=spec.file, kind=spec.kind, method=method)
    if not produced.is_file():
        return OutputComparison(**base, produced=False, matched=False, closeness=0.0, summary="not written by the app")
    try:
        got = _load(produced, spec.kind)
    except Exception as exc:  # any unreadable file is a mismatch, with the reason
        return OutputComparison(
            **base,
            produced=True,
            matched=False,
            closeness=0.0,
            summary=f"cannot be read as {spec.kind}: {type(exc).__name__}: {exc}",
        )
    expected = _load(golden, spec.kind)
    if spec.kind == "tensor":
        matched, closeness, summary, worst = _tensor(got, expected, spec.compare)
    elif spec.kind == "json":
        matched, closeness, summary, worst = _json(got, expected, spec.compare)
    elif isinstance(spec.compare, Tokens):
        matched, closeness, summary, worst = _tokens(got.split(), expected.split(), spec.compare)
    else:
        matched, closeness, summary, worst = _text_exact(got, expected)
    closeness = 1.0 if matched else max(0.0, min(1.0, closeness))
    return OutputComparison(**base, produced=True, matched=matched, closeness=closeness, summary=summary, worst=worst)
