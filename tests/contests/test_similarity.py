"""Similarity fingerprints: renamed and reformatted copies score high, independent kernels low."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gpuarena.contests.similarity import (
    Solution,
    c_tokens,
    canonical_python,
    fingerprint,
    jaccard,
    python_tokens,
    similar_pairs,
    similarity,
)

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = Path(__file__).parent / "fixtures" / "similarity"
TRITON = ROOT / "examples" / "softmax" / "triton.py"
CUDA = ROOT / "examples" / "softmax" / "cuda" / "softmax.cu"
ADD = ROOT / "examples" / "add" / "triton.py"


def files(path: Path) -> dict[str, str]:
    return {path.name: path.read_text()}


def test_python_renamed_and_reformatted_copy_scores_high():
    # The copy renames every name it defines, drops annotations and docstrings, rewrites the
    # comments and reflows the code.
    assert similarity(files(TRITON), files(FIXTURES / "softmax_renamed.py")) > 0.9


def test_cuda_renamed_and_reformatted_copy_scores_high():
    assert similarity(files(CUDA), files(FIXTURES / "softmax_renamed.cu")) > 0.9


def test_independent_kernels_score_low():
    assert similarity(files(TRITON), files(FIXTURES / "softmax_independent.py")) < 0.3
    assert similarity(files(CUDA), files(FIXTURES / "softmax_independent.cu")) < 0.3
    assert similarity(files(TRITON), files(ADD)) < 0.3
    assert similarity(files(TRITON), files(ROOT / "examples" / "softmax" / "pytorch.py")) < 0.3


WRAPPER = '''
from torch.utils.cpp_extension import load_inline

{src} = r"""
{cuda}
"""

{module} = load_inline(name="{name}", cpp_sources="torch::Tensor solve(torch::Tensor x);", cuda_sources={src},
                       functions=["solve"])


def solve(x):
    return {module}.solve(x)
'''


def test_cuda_inside_a_python_string_is_compared_as_code():
    cuda = (FIXTURES / "softmax_independent.cu").read_text()
    renamed = cuda
    for old, new in {
        "warpMax": "wmax",
        "warpSum": "wsum",
        "warpSoftmax": "k",
        "val": "v",
        "delta": "o",
        "nRows": "R",
        "nCols": "C",
        "best": "mx",
        "acc": "z",
        "src": "p",
        "dst": "q",
    }.items():
        renamed = re.sub(rf"\b{old}\b", new, renamed)
    original = {"solution.py": WRAPPER.format(src="cuda_src", cuda=cuda, module="ext", name="softmax_ext")}
    copy = {"solution.py": WRAPPER.format(src="SOURCE", cuda=renamed.replace("\n", "\n\n"), module="m", name="x")}
    other = {"solution.py": WRAPPER.format(src="cuda_src", cuda=CUDA.read_text(), module="ext", name="softmax_ext")}
    assert similarity(original, copy) > 0.9
    assert similarity(original, other) < 0.3


def test_normalisation():
    assert python_tokens("total = a_b + 1  # comment\n") == python_tokens("s=x+2\n")
    assert python_tokens("f(a, b,)\n") == python_tokens("f(\n    a,\n    b\n)\n")
    assert python_tokens("import triton.language as tl\ntl.load(x)\n")[-7:] == ["V", ".", "load", "(", "V", ")", ";"]
    assert python_tokens("def f(x: int) -> int:\n    '''Doc.'''\n    return x\n") == python_tokens(
        "def g(y):\n    return y\n"
    )
    assert canonical_python("if x: y = 1\n") == "if x:\n    y = 1"
    assert c_tokens("int n = 4; // four\n/* block */ x->size = 2.5f;") == c_tokens("int m=7;\nyy->size=1e3;")
    assert c_tokens("__global__ void k() { threadIdx.x; }") == [
        "__global__",
        "void",
        "V",
        "(",
        ")",
        "{",
        "threadIdx",
        ".",
        "x",
        ";",
        "}",
    ]
    assert python_tokens("def f(:\n") == c_tokens("def f(:\n")  # not Python: the C-like tokenizer


def test_jaccard_and_fingerprint_edges():
    assert jaccard(frozenset(), frozenset()) == 0.0
    assert jaccard(frozenset({1, 2}), frozenset({2, 3})) == pytest.approx(1 / 3)
    assert fingerprint({"a.py": ""}) == frozenset()
    assert len(fingerprint({"a.py": "x = 1\n"})) == 1  # shorter than k tokens: one hash of it all


def test_similar_pairs_flags_different_contestants_on_the_same_problem():
    original, copy = TRITON.read_text(), (FIXTURES / "softmax_renamed.py").read_text()
    independent = (FIXTURES / "softmax_independent.py").read_text()
    solutions = [
        Solution(submission_id=1, contestant="alice", problem="softmax", files={"s.py": original}),
        Solution(submission_id=2, contestant="bob", problem="softmax", files={"s.py": copy}),
        Solution(submission_id=3, contestant="carol", problem="softmax", files={"s.py": independent}),
        Solution(submission_id=4, contestant="alice", problem="softmax", files={"t.py": copy}),  # her own
        Solution(submission_id=5, contestant="dan", problem="other", files={"s.py": original}),  # other problem
    ]
    pairs = similar_pairs(solutions, threshold=0.8)
    assert [(p.problem, p.first, p.first_contestant, p.second, p.second_contestant) for p in pairs] == [
        ("softmax", 2, "bob", 4, "alice"),
        ("softmax", 1, "alice", 2, "bob"),
    ]
    assert pairs[0].similarity == 1.0
    assert 0.9 < pairs[1].similarity < 1.0
    assert similar_pairs(solutions, threshold=1.01) == []
