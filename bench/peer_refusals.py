"""The outcome of one import in bench/peer_material.py read from the importer's output, and a
refusal's reason shortened to a category (issue 49): parse_output() and classify(), with
CATEGORIES, the patterns they are read by (first match wins). peer_material.py runs the imports
and writes the report; `python bench/peer_material.py --reclassify REPORT` applies today's
CATEGORIES to a report's recorded messages.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable

IMPORTED = "imported"
REFUSED = "refused"
TIMEOUT = "timeout"
BUDGET_SPENT = "not run: the run's --budget spent"


TRACEBACK = "Traceback (most recent call last):"


def parse_output(peer: str, rc: int, output: str) -> tuple[str, list[str]]:
    """The outcome (imported or refused) and the importer's messages, from its exit status and
    what it printed (stdout and stderr together)."""
    lines = output.splitlines()
    if TRACEBACK in output:  # the importer itself broke: a bug to report, never a refusal of the source
        last = next((line for line in reversed(lines) if line.strip() and not line.startswith(" ")), "")
        return (IMPORTED if rc == 0 else REFUSED), [f"importer crashed: {last.strip()}"]
    if peer in ("kernelbench", "gpumode"):
        messages: list[str] = []
        status = ""
        for line in lines:
            if line.startswith("imported "):
                status = IMPORTED
            elif line.startswith(("FAILED CHECK ", "ERROR ")):
                status = REFUSED
            elif line.startswith("error: "):
                status = REFUSED
                messages.append(line.removeprefix("error: ").strip())
            elif line.startswith("  ") and status:
                messages.append(line.strip())
        if not status:
            status = IMPORTED if rc == 0 else REFUSED
        return status, messages
    # flashinfer and flashinfer-solution: `note:` lines on success, `error:` and its lines on failure
    if rc == 0:
        return IMPORTED, [line.removeprefix("note: ").strip() for line in lines if line.startswith("note: ")]
    at = next((n for n, line in enumerate(lines) if line.startswith("error: ")), None)
    if at is None:
        return REFUSED, [line.strip() for line in lines if line.strip()][-5:]
    return REFUSED, [lines[at].removeprefix("error: ").strip()] + [
        line.strip() for line in lines[at + 1 :] if line.strip()
    ]


# The reason categories, first match wins (searched in the importer's messages, joined).
CATEGORIES: list[tuple[re.Pattern[str], str | Callable[[re.Match[str]], str]]] = [
    # before a crash: an import that ran out of memory crashed for the cap (--max-memory-gb)
    (re.compile(r"^importer crashed: .*(allocate memory|MemoryError|out of memory)", re.M | re.I), "out of memory"),
    (re.compile(r"^importer crashed: (\w+)", re.M), lambda m: f"importer crashed ({m.group(1)})"),
    (re.compile(r"No module named '([\w]+)"), lambda m: f"needs package {m.group(1)}"),
    (re.compile(r"imports `([\w]+)`[^:]*, not installed here"), lambda m: f"needs package {m.group(1)}"),
    (
        re.compile(r"\brank\b|world_size|torch\.distributed|init_process_group|\bnccl\b|\brccl\b|multi_gpu", re.I),
        "multi-GPU (rank)",
    ),
    (re.compile(r"data holds a|holds a \w+: gpuarena carries"), "data holds a non-tensor object"),
    (re.compile(r"get_inputs\(\)\[\d+\] is an? (\w+)"), lambda m: f"input is a {m.group(1)}, not a tensor or number"),
    (re.compile(r"get_init_inputs\(\)\[\d+\] is an? (\w+)"), lambda m: f"init input is a {m.group(1)}"),
    (re.compile(r"forward\(\) returns an? (\w+)"), lambda m: f"output is a {m.group(1)}, not a tensor"),
    (re.compile(r"cannot carry (.+?) yet"), lambda m: f"cannot carry {m.group(1)}"),
    # a constant output first: the others follow from it (since 2026-11-30 every trivial finding is listed)
    (re.compile(r"is constant, so a constant answer"), "degenerate (constant output)"),
    (re.compile(r"output does not depend on input"), "degenerate (output independent of an input)"),
    (re.compile(r"returning input \S+ unchanged passes"), "degenerate (an input returned unchanged passes)"),
    (re.compile(r"smaller than atol=|returning zeros passes"), "degenerate (near-zero output)"),
    (re.compile(r"returning the mean everywhere passes"), "degenerate (output close to its mean)"),
    (re.compile(r"not deterministic"), "degenerate (nondeterministic reference)"),
    (re.compile(r"has NaN or Inf values"), "degenerate (NaN or Inf output)"),
    (re.compile(r"input \S+ is constant|is the same for two seeds"), "degenerate (constant input)"),
    (re.compile(r"rounding alone fails honest kernels"), "low-precision reference fails rounding"),
    (
        re.compile(r"checker rejects the reference's own|check_implementation rejects ref_kernel's own"),
        "reference fails its own check",
    ),
    (re.compile(r"float8|float4|fp8|fp4|e4m3|e5m2|e2m1", re.I), "fp8/fp4 dtype"),
    (
        re.compile(
            r"no CPU-sized workload|no workload runs on cpu|could be run here|Torch not compiled with CUDA|"
            r"No CUDA GPUs|CUDA driver|cuda.*not available|Found no NVIDIA driver|only fit a GPU",
            re.I,
        ),
        "CUDA only on this machine",
    ),
    (re.compile(r"safetensors", re.I), "inputs from safetensors files"),
    (re.compile(r"holds no workloads|no workloads"), "no workloads"),
    (re.compile(r"defines no (\w+)"), lambda m: f"not a problem (defines no {m.group(1)})"),
    (
        re.compile(r"([\w.]+): not found \(fix: a GPU MODE problem folder"),
        lambda m: f"not a task folder (no {m.group(1)})",
    ),
    (re.compile(r"is not valid (Python|YAML)"), lambda m: f"not valid {m.group(1)}"),
    (re.compile(r"exists and is not empty"), "output folder exists"),
    (re.compile(r"can't allocate memory|Cannot allocate memory|MemoryError|out of memory", re.I), "out of memory"),
    (re.compile(r"raised (\w+)"), lambda m: f"the peer's code raised {m.group(1)}"),
]


def _strip_paths(text: str) -> str:
    """The text with each path's folders elided (/tmp/x/nvfp4_gemm/reference.py: …/reference.py)."""
    return re.sub(r"(?:/[^\s:/]+)+/(?=[^\s/])", "…/", text)


def classify(messages: Iterable[str]) -> str:
    """A refusal's reason, shortened to a category (the first CATEGORIES pattern found in the
    messages), else the first message, its paths elided, cut to 80 characters."""
    listed = [m for m in messages if m and not m.startswith("named ")]  # GPU MODE's renaming note
    text = "\n".join(_strip_paths(m) for m in listed)  # a path (nvfp4_gemm/) is no reason
    for pattern, category in CATEGORIES:
        found = pattern.search(text)
        if found:
            return category(found) if callable(category) else category
    first = _strip_paths(listed[0]) if listed else "no reason given"
    return "other: " + (first if len(first) <= 80 else first[:79] + "…")
