"""The problems of bench/peer_flashinfer.py: a few FlashInfer-Trace definitions written for that
bench (never FlashInfer's files), each with its PyTorch reference, workloads at a model's sizes and
one solution, as documents; the trace-set folder they are written to, and read back from by the
bench's ncu child (the documents, the arguments drawn for a workload, the solution's entry)."""

from __future__ import annotations

import importlib.util
import json
import sys
import uuid
from pathlib import Path
from typing import Any

AUTHOR = "gpuarena-bench"
DTYPES = {"float32": "float32", "float16": "float16", "bfloat16": "bfloat16", "int32": "int32", "int64": "int64"}


# -- the problems: FlashInfer-Trace documents written for this bench ---------------------------
RMSNORM_REFERENCE = """import torch


def run(hidden_states, weight, eps):
    # each row divided by its root mean square (taken in float32), times the weight
    x = hidden_states.float()
    scale = torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + eps)
    return (x * scale * weight.float()).to(hidden_states.dtype)
"""

RMSNORM_TRITON = '''import triton
import triton.language as tl


@triton.jit
def _rms_rows(src, gain, dst, width, eps, src_row, dst_row, WIDTH: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, WIDTH)
    inside = cols < width
    x = tl.load(src + row * src_row + cols, mask=inside, other=0.0).to(tl.float32)
    g = tl.load(gain + cols, mask=inside, other=0.0).to(tl.float32)
    scale = tl.rsqrt(tl.sum(x * x, axis=0) / width + eps)
    tl.store(dst + row * dst_row + cols, (x * scale * g).to(dst.dtype.element_ty), mask=inside)


def run(hidden_states, weight, eps, output):
    """One program a row, the whole row in registers; output given (destination passing)."""
    rows, width = hidden_states.shape
    x = hidden_states.contiguous()
    block = triton.next_power_of_2(width)
    _rms_rows[(rows,)](x, weight, output, width, eps, x.stride(0), output.stride(0), WIDTH=block,
                       num_warps=8 if block >= 4096 else 4)
'''

SILU_MUL_REFERENCE = """import torch
import torch.nn.functional as F


def run(gate, up):
    # the gated MLP's activation: silu(gate) * up, computed in float32
    return (F.silu(gate.float()) * up.float()).to(gate.dtype)
"""

SILU_MUL_TRITON = '''import triton
import triton.language as tl


@triton.jit
def _gated(gate, up, dst, count, BLOCK: tl.constexpr):
    index = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    inside = index < count
    g = tl.load(gate + index, mask=inside, other=0.0).to(tl.float32)
    u = tl.load(up + index, mask=inside, other=0.0).to(tl.float32)
    tl.store(dst + index, (g * tl.sigmoid(g) * u).to(dst.dtype.element_ty), mask=inside)


def run(gate, up, output):
    """Elementwise over the flattened tensors; output given (destination passing)."""
    gate, up = gate.contiguous(), up.contiguous()
    count = gate.numel()
    block = 2048
    _gated[(triton.cdiv(count, block),)](gate, up, output, count, BLOCK=block)
'''

GEMM_REFERENCE = """import torch


def run(activations, weight):
    # a linear layer without bias: activations times the transposed weight
    return torch.matmul(activations, weight.t())
"""

GEMM_TORCH = '''import torch


def run(activations, weight, output):
    """cuBLAS through torch.matmul, written into the given output (destination passing)."""
    torch.matmul(activations, weight.t(), out=output)
'''


def _workload(definition: str, axes: dict[str, int], inputs: dict[str, Any]) -> dict[str, Any]:
    """A workload trace (no solution, no evaluation); its uuid fixed by its content."""
    key = json.dumps([definition, axes, inputs], sort_keys=True)
    return {
        "definition": definition,
        "workload": {
            "uuid": str(uuid.uuid5(uuid.NAMESPACE_URL, "gpuarena-peer-fi:" + key)),
            "axes": axes,
            "inputs": inputs,
        },
        "solution": None,
        "evaluation": None,
    }


def _solution(name: str, definition: str, language: str, source: str, description: str) -> dict[str, Any]:
    return {
        "name": name,
        "definition": definition,
        "author": AUTHOR,
        "description": description,
        "spec": {
            "language": language,
            "target_hardware": ["NVIDIA_H200"],
            "entry_point": "main.py::run",
            "dependencies": ["triton >= 3.0"] if language == "triton" else [],
            "destination_passing_style": True,
        },
        # one file: FlashInfer-Bench imports the sources as a package, gpuarena from their folder
        "sources": [{"path": "main.py", "content": source}],
    }


def problems() -> dict[str, dict[str, Any]]:
    """Definition name -> {definition, workloads, solution}, FlashInfer-Trace documents as dicts."""
    random = {"type": "random"}
    rms = "rms_norm_bf16_h4096"
    silu = "silu_and_mul_bf16_i14336"
    gemm = "gemm_bf16_n1024_k4096"
    tokens = {"type": "var", "description": "Tokens in the batch."}
    return {
        rms: {
            "definition": {
                "name": rms,
                "op_type": "rmsnorm",
                "description": "Root-mean-square normalisation of each token's 4096 bf16 activations, times a gain.",
                "tags": ["model:llama-3-8b", "bench:gpuarena-peer"],
                "axes": {
                    "num_tokens": tokens,
                    "hidden": {"type": "const", "value": 4096, "description": "Model width."},
                },
                "inputs": {
                    "hidden_states": {"shape": ["num_tokens", "hidden"], "dtype": "bfloat16"},
                    "weight": {"shape": ["hidden"], "dtype": "bfloat16", "description": "Per-channel gain."},
                    "eps": {"shape": None, "dtype": "float32", "description": "Added under the root."},
                },
                "outputs": {"output": {"shape": ["num_tokens", "hidden"], "dtype": "bfloat16"}},
                "reference": RMSNORM_REFERENCE,
            },
            "workloads": [
                _workload(
                    rms,
                    {"num_tokens": n},
                    {"hidden_states": random, "weight": random, "eps": {"type": "scalar", "value": 1e-5}},
                )
                for n in (4096, 128)
            ],
            "solution": _solution(rms + "_triton", rms, "triton", RMSNORM_TRITON, "One Triton program a row."),
        },
        silu: {
            "definition": {
                "name": silu,
                "op_type": "activation",
                "description": "The gated MLP's activation, silu(gate) * up, at an intermediate size of 14336 in bf16.",
                "tags": ["model:llama-3-8b", "bench:gpuarena-peer"],
                "axes": {
                    "num_tokens": tokens,
                    "intermediate": {"type": "const", "value": 14336, "description": "MLP width."},
                },
                "inputs": {
                    "gate": {"shape": ["num_tokens", "intermediate"], "dtype": "bfloat16"},
                    "up": {"shape": ["num_tokens", "intermediate"], "dtype": "bfloat16"},
                },
                "outputs": {"output": {"shape": ["num_tokens", "intermediate"], "dtype": "bfloat16"}},
                "reference": SILU_MUL_REFERENCE,
            },
            "workloads": [_workload(silu, {"num_tokens": 4096}, {"gate": random, "up": random})],
            "solution": _solution(silu + "_triton", silu, "triton", SILU_MUL_TRITON, "Elementwise Triton kernel."),
        },
        gemm: {
            "definition": {
                "name": gemm,
                "op_type": "gemm",
                "description": "A bias-free linear layer in bf16, a K/V projection's shape: (M x 4096) times the transpose of a 1024 x 4096 weight.",
                "tags": ["model:llama-3-8b", "bench:gpuarena-peer"],
                "axes": {
                    "M": tokens,
                    "N": {"type": "const", "value": 1024, "description": "Output features."},
                    "K": {"type": "const", "value": 4096, "description": "Input features."},
                },
                "inputs": {
                    "activations": {"shape": ["M", "K"], "dtype": "bfloat16"},
                    "weight": {"shape": ["N", "K"], "dtype": "bfloat16"},
                },
                "outputs": {"output": {"shape": ["M", "N"], "dtype": "bfloat16"}},
                "reference": GEMM_REFERENCE,
            },
            "workloads": [_workload(gemm, {"M": 4096}, {"activations": random, "weight": random})],
            "solution": _solution(gemm + "_torch", gemm, "python", GEMM_TORCH, "Plain PyTorch: torch.matmul."),
        },
    }


def write_trace_set(root: Path, chosen: dict[str, dict[str, Any]]) -> Path:
    """ROOT as a FlashInfer-Trace trace-set: definitions/OP/NAME.json, solutions/AUTHOR/OP/NAME/SOL.json,
    workloads/OP/NAME.jsonl (the layout TraceSet.from_path reads and its CLI's export writes)."""
    for name, p in chosen.items():
        op = p["definition"]["op_type"]
        files = {
            root / "definitions" / op / f"{name}.json": json.dumps(p["definition"], indent=2) + "\n",
            root / "solutions" / AUTHOR / op / name / f"{p['solution']['name']}.json": json.dumps(
                p["solution"], indent=2
            )
            + "\n",
            root / "workloads" / op / f"{name}.jsonl": "".join(json.dumps(w) + "\n" for w in p["workloads"]),
        }
        for path, text in files.items():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
    return root


def paths_of(root: Path, p: dict[str, Any]) -> dict[str, Path]:
    name, op = p["definition"]["name"], p["definition"]["op_type"]
    return {
        "definition": root / "definitions" / op / f"{name}.json",
        "workloads": root / "workloads" / op / f"{name}.jsonl",
        "solution": root / "solutions" / AUTHOR / op / name / f"{p['solution']['name']}.json",
    }


def definition_names(text: str | None) -> list[str]:
    known = list(problems())
    if not text:
        return known
    names = list(dict.fromkeys(n.strip() for n in text.split(",") if n.strip()))
    unknown = [n for n in names if n not in known]
    if unknown:
        raise SystemExit(f"unknown definitions {unknown}; known: {known}")
    return names


def load_documents(trace_set: Path, name: str) -> tuple[dict[str, Any], list[dict[str, Any]], dict[str, Any]]:
    """The definition, its workload traces and its (first) solution, as JSON, from the folder."""
    definition = json.loads(next((trace_set / "definitions").rglob(f"{name}.json")).read_text())
    lines = next((trace_set / "workloads").rglob(f"{name}.jsonl")).read_text().splitlines()
    workloads = [json.loads(line) for line in lines if line.strip()]
    solution = json.loads(next((trace_set / "solutions").rglob(f"*/{name}/*.json")).read_text())
    return definition, workloads, solution


def draw_arguments(definition: dict[str, Any], workload: dict[str, Any], device: str) -> list[Any]:
    """Inputs (as FlashInfer-Bench draws random ones: randn for floats) then empty outputs, in the
    definition's order: a destination-passing solution's arguments."""
    import torch

    sizes = {a: spec["value"] for a, spec in definition["axes"].items() if spec["type"] == "const"}
    sizes |= workload["axes"]
    args: list[Any] = []
    for name, spec in definition["inputs"].items():
        given = workload["inputs"].get(name, {})
        dtype = getattr(torch, DTYPES[spec["dtype"]])
        if given.get("type") == "scalar":
            args.append(given["value"])
        elif dtype.is_floating_point:
            args.append(torch.randn([sizes[a] for a in spec["shape"] or []], dtype=dtype, device=device))
        else:
            args.append(torch.randint(-1024, 1024, [sizes[a] for a in spec["shape"] or []], dtype=dtype, device=device))
    for spec in definition["outputs"].values():
        args.append(
            torch.empty([sizes[a] for a in spec["shape"]], dtype=getattr(torch, DTYPES[spec["dtype"]]), device=device)
        )
    return args


def load_entry(solution: dict[str, Any], into: Path) -> Any:
    """The solution's entry function, its sources written into INTO and imported from there."""
    for source in solution["sources"]:
        path = into / source["path"]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(source["content"])
    file, symbol = solution["spec"]["entry_point"].split("::")
    sys.path.insert(0, str(into))  # its other files, imported by their names
    spec = importlib.util.spec_from_file_location(f"peer_fi_solution_{abs(hash(str(into)))}", into / file)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return getattr(module, symbol)
