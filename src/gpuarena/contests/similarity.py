"""Plagiarism screening: fingerprints of solutions that survive renaming and reformatting, as
MOSS makes them (Schleimer, Wilkerson, Aiken, "Winnowing", SIGMOD 2003). Sources become token
streams with identifiers and literals replaced by placeholders and comments and layout
dropped; hashes of every k consecutive tokens are winnowed (the smallest in each window of
w); two solutions' similarity is the Jaccard index of their fingerprint sets. A similar
pair is a flag for an organizer to look at, never a verdict: short kernels for the same
problem can be alike honestly.

Python files go through the tokenize module (a multi-line string, e.g. CUDA source handed to
load_inline, is tokenized as C++); anything else (CUDA, C++) through a regular-expression
tokenizer doing the same normalisation. Names after "." / "->" / "::", keywords, builtins
and the CUDA built-in names stay as they are: a copy cannot rename the API it calls, and
keeping them tells different kernels apart."""

from __future__ import annotations

import ast
import builtins
import hashlib
import io
import keyword
import re
import tokenize
from collections.abc import Iterable, Sequence
from itertools import combinations

from pydantic import Field

from gpuarena.contests.model import Strict

K = 12
"""Tokens in a k-gram: matches shorter than this are noise (every kernel has `V = V . V ( V`)."""
W = 6
"""Winnowing window: any match of at least K + W - 1 tokens shares a fingerprint."""

IDENTIFIER, NUMBER, STRING = "V", "N", "S"
_CLOSING = {")", "]", "}"}
_PY_KEEP = frozenset(keyword.kwlist) | frozenset(dir(builtins))
_C_KEEP = frozenset(
    """
    alignas alignof asm auto bool break case catch char char16_t char32_t class const constexpr const_cast
    continue decltype default delete do double dynamic_cast else enum explicit extern false float for friend
    goto if inline int long mutable namespace new noexcept nullptr operator private protected public register
    reinterpret_cast return short signed sizeof static static_assert static_cast struct switch template this
    throw true try typedef typeid typename union unsigned using virtual void volatile while
    include define ifdef ifndef endif pragma unroll
    threadIdx blockIdx blockDim gridDim warpSize dim3 half half2 nv_bfloat16 nv_bfloat162
    float2 float4 int2 int4 uint4 size_t int8_t int16_t int32_t int64_t uint8_t uint16_t uint32_t uint64_t
    uintptr_t std min max fmaxf fminf expf exp2f logf sqrtf rsqrtf fabsf tanhf powf INFINITY NAN
    """.split()
)
_C_TOKEN = re.compile(
    r"""
      (?P<comment>//[^\n]*|/\*.*?\*/)
    | (?P<string>"(?:\\.|[^"\\\n])*"|'(?:\\.|[^'\\\n])*')
    | (?P<number>(?:0[xX][0-9a-fA-F']+|\d[\d']*\.?[\d']*(?:[eEpP][+-]?\d+)?|\.\d[\d']*(?:[eE][+-]?\d+)?)[uUlLfF]*)
    | (?P<name>[A-Za-z_]\w*)
    | (?P<op><<<|>>>|<<=|>>=|->|\+\+|--|<<|>>|<=|>=|==|!=|&&|\|\||::|[-+*/%&|^]=|[^\s\w])
    """,
    re.S | re.X,
)
_C_INCLUDE = re.compile(r"^[ \t]*#[ \t]*include[^\n]*", re.M)
_MEMBER = frozenset({".", "->", "::"})


class Solution(Strict):
    """One submission's sources, as similarity reads them."""

    submission_id: int
    contestant: str
    problem: str
    files: dict[str, str] = Field(min_length=1)
    """File name to text; the name's suffix picks the tokenizer (.py: Python)."""


class SimilarPair(Strict):
    """Two contestants' solutions to one problem that look alike: a flag for review."""

    problem: str
    first: int
    """Submission id (the smaller of the two)."""
    first_contestant: str
    second: int
    second_contestant: str
    similarity: float = Field(ge=0, le=1)
    """Jaccard index of the two fingerprint sets."""


def _append(out: list[str], token: str) -> None:
    """A trailing comma before a closing bracket is layout (formatters add and drop it)."""
    if token in _CLOSING and out and out[-1] == ",":
        out.pop()
    out.append(token)


def c_tokens(text: str) -> list[str]:
    """Normalised tokens of C, C++ or CUDA source (also the fallback for any other text)."""
    out: list[str] = []
    for match in _C_TOKEN.finditer(_C_INCLUDE.sub("", text)):
        kind, value = match.lastgroup, match.group()
        if kind == "comment":
            continue
        if kind == "string":
            token = STRING
        elif kind == "number":
            token = NUMBER
        elif kind == "name":
            kept = value in _C_KEEP or value.startswith("__") or (out and out[-1] in _MEMBER)
            token = value if kept else IDENTIFIER
        else:
            token = value
        _append(out, token)
    return out


class _Strip(ast.NodeTransformer):
    """Drops annotations and docstrings: a copy can drop or change them without changing the code."""

    def visit_arg(self, node: ast.arg) -> ast.arg:
        node.annotation = None
        return node

    def _body(self, node: ast.Module | ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> ast.AST:
        self.generic_visit(node)
        if hasattr(node, "returns"):
            node.returns = None
        body = getattr(node, "body", None)
        if (
            isinstance(body, list)
            and body
            and isinstance(body[0], ast.Expr)
            and isinstance(body[0].value, ast.Constant)
            and isinstance(body[0].value.value, str)
        ):
            node.body = body[1:] or [ast.Pass()]
        return node

    visit_Module = visit_FunctionDef = visit_AsyncFunctionDef = visit_ClassDef = _body

    def visit_AnnAssign(self, node: ast.AnnAssign) -> ast.AST | None:
        if node.value is None:
            return None
        return ast.Assign(targets=[node.target], value=node.value, lineno=node.lineno)


def canonical_python(text: str) -> str:
    """The source as ast.unparse writes it, without annotations and docstrings: one layout
    for every formatting of the same code. Unparsable text is returned as it is."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return text
    return ast.unparse(ast.fix_missing_locations(_Strip().visit(tree)))


def _string_value(token: str) -> str | None:
    try:
        value = ast.literal_eval(token)
    except (SyntaxError, ValueError):
        return None  # an f-string
    return value if isinstance(value, str) else None


def python_tokens(text: str) -> list[str]:
    """Normalised tokens of Python source (canonical_python first); C-like tokenizing where
    it does not even tokenize as Python."""
    try:
        raw = list(tokenize.generate_tokens(io.StringIO(canonical_python(text)).readline))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return c_tokens(text)
    out: list[str] = []
    line: list[tokenize.TokenInfo] = []
    skip = {tokenize.COMMENT, tokenize.NL, tokenize.INDENT, tokenize.DEDENT, tokenize.ENCODING, tokenize.ENDMARKER}
    for tok in raw:
        if tok.type in skip:
            continue
        if tok.type != tokenize.NEWLINE:
            line.append(tok)
            continue
        if line and all(t.type == tokenize.STRING for t in line):
            line = []  # a docstring (or a bare string statement): documentation, not code
            continue
        for i, t in enumerate(line):
            if t.type == tokenize.NAME:
                kept = t.string in _PY_KEEP or (i > 0 and line[i - 1].string == ".")
                _append(out, t.string if kept else IDENTIFIER)
            elif t.type == tokenize.NUMBER:
                _append(out, NUMBER)
            elif t.type == tokenize.STRING:
                value = _string_value(t.string)
                if value is not None and "\n" in value.strip():
                    out.extend(c_tokens(value))  # embedded source (load_inline's CUDA, a Triton string)
                else:
                    _append(out, STRING)
            elif t.type == tokenize.OP:
                _append(out, t.string)
            elif tokenize.tok_name.get(t.type) == "FSTRING_START":  # Python 3.12+: f-strings split up
                _append(out, STRING)
        if out and out[-1] != ":":
            _append(out, ";")  # the end of a statement, however it is written
        line = []
    return out


def tokens(name: str, text: str) -> list[str]:
    """Normalised tokens of one file, by its name's suffix."""
    return python_tokens(text) if name.endswith(".py") else c_tokens(text)


def _hash(gram: Sequence[str]) -> int:
    return int.from_bytes(hashlib.blake2b("\x1f".join(gram).encode(), digest_size=8).digest(), "big")


def winnow(hashes: Sequence[int], w: int = W) -> set[int]:
    """The smallest hash of each window of w hashes, as MOSS selects (the set of their values)."""
    if len(hashes) <= w:
        return {min(hashes)} if hashes else set()
    return {min(hashes[i : i + w]) for i in range(len(hashes) - w + 1)}


def fingerprint(files: dict[str, str], k: int = K, w: int = W) -> frozenset[int]:
    """The winnowed k-gram hashes of all files of a solution."""
    found: set[int] = set()
    for name in sorted(files):
        stream = tokens(name, files[name])
        grams = [stream[i : i + k] for i in range(len(stream) - k + 1)] or ([stream] if stream else [])
        found |= winnow([_hash(g) for g in grams], w)
    return frozenset(found)


def jaccard(a: frozenset[int], b: frozenset[int]) -> float:
    """|a & b| / |a | b|; 0 for two empty fingerprints (nothing to compare)."""
    union = len(a | b)
    return len(a & b) / union if union else 0.0


def similarity(a: dict[str, str], b: dict[str, str], k: int = K, w: int = W) -> float:
    """How alike two solutions' sources are, 0 to 1."""
    return jaccard(fingerprint(a, k, w), fingerprint(b, k, w))


def similar_pairs(solutions: Iterable[Solution], threshold: float, k: int = K, w: int = W) -> list[SimilarPair]:
    """Pairs of solutions to the same problem by different contestants whose similarity is
    at least threshold, most similar first. Flags for review, never disqualifications."""
    by_problem: dict[str, list[tuple[Solution, frozenset[int]]]] = {}
    for s in solutions:
        by_problem.setdefault(s.problem, []).append((s, fingerprint(s.files, k, w)))
    pairs = []
    for problem, group in by_problem.items():
        group.sort(key=lambda item: item[0].submission_id)
        for (a, fa), (b, fb) in combinations(group, 2):
            if a.contestant == b.contestant:
                continue
            figure = jaccard(fa, fb)
            if figure >= threshold:
                pairs.append(
                    SimilarPair(
                        problem=problem,
                        first=a.submission_id,
                        first_contestant=a.contestant,
                        second=b.submission_id,
                        second_contestant=b.contestant,
                        similarity=figure,
                    )
                )
    pairs.sort(key=lambda p: (-p.similarity, p.problem, p.first, p.second))
    return pairs
