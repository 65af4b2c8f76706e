"""Every comparison kind, matched and not, with its closeness and worst differences."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from gpuarena.migration.compare import compare_output
from gpuarena.migration.model import Output


def out(file: str, output_kind: str, **compare) -> Output:
    return Output.model_validate({"file": file, "kind": output_kind, "compare": compare})


def pair(tmp_path: Path, name: str, got, expected) -> tuple[Path, Path]:
    paths = []
    for side, value in (("got", got), ("expected", expected)):
        path = tmp_path / side / name
        path.parent.mkdir(exist_ok=True)
        if name.endswith(".npy"):
            np.save(path, np.asarray(value))
        elif name.endswith(".npz"):
            np.savez(path, **value)
        elif name.endswith(".pt"):
            torch.save(value, path)
        elif name.endswith(".json"):
            path.write_text(json.dumps(value))
        else:
            path.write_text(value)
        paths.append(path)
    return paths[0], paths[1]


def test_tensor_tolerance_matched_and_not(tmp_path):
    b = np.arange(12, dtype=np.float32).reshape(3, 4)
    a = b + 1e-7
    assert compare_output(
        out("y.npy", "tensor", kind="tolerance", atol=1e-5, rtol=0), *pair(tmp_path, "y.npy", a, b)
    ).matched
    a = b.copy()
    a[1, 2] += 0.5
    a[2, 3] -= 2.0
    result = compare_output(out("y.npy", "tensor", kind="tolerance", atol=1e-3, rtol=0), *pair(tmp_path, "y.npy", a, b))
    assert not result.matched
    assert result.closeness == pytest.approx(10 / 12)
    assert [d.where for d in result.worst] == ["(2, 3)", "(1, 2)"]
    assert result.worst[0].abs_diff == pytest.approx(2.0)
    assert "2 of 12 elements outside" in result.summary


def test_tensor_shape_mismatch_is_zero(tmp_path):
    result = compare_output(out("y.npy", "tensor", kind="exact"), *pair(tmp_path, "y.npy", np.zeros(3), np.zeros(4)))
    assert (result.matched, result.closeness) == (False, 0.0)
    assert "shape (3,) instead of (4,)" in result.summary


def test_tensor_exact_nan_and_pt_dict(tmp_path):
    b = {"w": torch.tensor([1.0, float("nan"), 3.0]), "i": torch.tensor([1, 2], dtype=torch.int64)}
    spec = out("y.pt", "tensor", kind="exact")
    assert compare_output(spec, *pair(tmp_path, "y.pt", {k: v.clone() for k, v in b.items()}, b)).matched
    a = {"w": torch.tensor([1.0, float("nan"), 4.0]), "i": torch.tensor([1, 2])}
    result = compare_output(spec, *pair(tmp_path, "y.pt", a, b))
    assert not result.matched and result.closeness == pytest.approx(4 / 5)
    assert result.worst[0].where == "w(2,)"


def test_tensor_npz(tmp_path):
    b = {"x": np.ones(4), "y": np.zeros(2)}
    a = {"x": np.ones(4), "y": np.array([0.0, 1.0])}
    result = compare_output(out("y.npz", "tensor", kind="tolerance", atol=0.1, rtol=0), *pair(tmp_path, "y.npz", a, b))
    assert not result.matched and result.closeness == pytest.approx(5 / 6)


@pytest.mark.parametrize(
    "name, threshold, got, matched, closeness",
    [
        ("max_abs", 0.1, [1.05, 2.0], True, 1.0),
        ("max_abs", 0.1, [1.5, 2.0], False, 0.2),
        ("rel_l2", 0.01, [3.0, 4.0], True, 1.0),
        ("rel_l2", 0.1, [3.0, 4.0 + 2.5], False, 0.2),
        ("cosine", 0.99, [3.0, 4.0], True, 1.0),
        ("cosine", 0.99, [-4.0, 3.0], False, 0.0),
    ],
)
def test_metrics(tmp_path, name, threshold, got, matched, closeness):
    expected = [3.0, 4.0] if name != "max_abs" else [1.0, 2.0]
    result = compare_output(
        out("y.npy", "tensor", kind="metric", name=name, threshold=threshold),
        *pair(tmp_path, "y.npy", np.array(got), np.array(expected)),
    )
    assert result.matched is matched
    assert result.closeness == pytest.approx(closeness)
    assert name in result.summary


def test_tokens_json_and_tensor(tmp_path):
    spec = out("t.json", "json", kind="tokens", threshold=0.75)
    result = compare_output(spec, *pair(tmp_path, "t.json", [1, 2, 3, 9], [1, 2, 3, 4]))
    assert (result.matched, result.closeness) == (True, 1.0)  # matched: 1, the share is in the summary
    assert "3 of 4 positions equal" in result.summary
    result = compare_output(spec, *pair(tmp_path, "t.json", [1, 9, 3], [1, 2, 3, 4]))
    assert not result.matched and result.closeness == pytest.approx(0.5)
    assert [d.where for d in result.worst] == ["position 1", "position 3"]
    assert result.worst[1].got == "(missing)"
    result = compare_output(
        out("t.npy", "tensor", kind="tokens"), *pair(tmp_path, "t.npy", np.array([5, 6]), np.array([5, 6]))
    )
    assert result.matched


def test_text_exact_and_tokens(tmp_path):
    spec = out("a.txt", "text", kind="exact")
    assert compare_output(spec, *pair(tmp_path, "a.txt", "one\ntwo\n", "one\ntwo\n")).matched
    result = compare_output(spec, *pair(tmp_path, "a.txt", "one\nTWO\nthree\n", "one\ntwo\nthree\nfour\n"))
    assert not result.matched and result.closeness == pytest.approx(2 / 4)
    assert [d.where for d in result.worst] == ["line 2", "line 4"]
    result = compare_output(
        out("a.txt", "text", kind="tokens", threshold=0.5),
        *pair(tmp_path, "a.txt", "the cat sat down", "the cat ran down"),
    )
    assert result.matched and result.closeness == 1.0 and "3 of 4 positions" in result.summary


def test_json_exact_and_tolerance(tmp_path):
    expected = {"a": 1, "b": {"c": [1.0, 2.0], "d": "x"}}
    got = {"a": 1, "b": {"c": [1.0, 2.001], "d": "y"}, "e": True}
    result = compare_output(out("r.json", "json", kind="exact"), *pair(tmp_path, "r.json", got, expected))
    assert not result.matched
    assert [d.where for d in result.worst] == ["$.b.c[1]", "$.b.d", "$.e"]
    assert result.closeness == pytest.approx(2 / 5)
    result = compare_output(
        out("r.json", "json", kind="tolerance", atol=0.01, rtol=0),
        *pair(tmp_path, "r.json", {"a": 1, "b": {"c": [1.0, 2.001], "d": "x"}}, expected),
    )
    assert result.matched


def test_missing_and_unreadable(tmp_path):
    got, expected = pair(tmp_path, "y.npy", np.ones(2), np.ones(2))
    spec = out("y.npy", "tensor", kind="exact")
    result = compare_output(spec, tmp_path / "nothing.npy", expected)
    assert (result.produced, result.matched, result.closeness) == (False, False, 0.0)
    got.write_text("not numpy")
    result = compare_output(spec, got, expected)
    assert result.produced and not result.matched and "cannot be read" in result.summary
