"""The device kind's one parser (contracts/device.py), and contracts/ staying the ground floor."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import gpuarena.contracts
from gpuarena.contracts.device import DeviceKind, device_type, is_gpu, pinning
from gpuarena.contracts.wire import DeviceSlot


@pytest.mark.parametrize(
    ("kind", "model", "stack", "device"),
    [
        ("H100", "H100", "", "cuda"),  # a GPU model, as the runner names it
        ("RTX-4090", "RTX-4090", "", "cuda"),
        ("cpu", "cpu", "", "cpu"),
        ("cpu@numpy-port", "cpu", "numpy-port", "cpu"),  # a model on a named stack
        ("MXC500@maca", "MXC500", "maca", "cuda"),
        ("H100@torch-2.13", "H100", "torch-2.13", "cuda"),
        ("cuda:1", "cuda:1", "", "cuda"),  # a slot's name given as a kind (--devices cuda:1=cuda:1)
        ("cuda", "cuda", "", "cuda"),  # a harness device as a kind
        ("nvidia", "nvidia", "", "cuda"),  # a backend's name as a kind
    ],
)
def test_a_kind_parses_and_writes_back(kind: str, model: str, stack: str, device: str) -> None:
    parsed = DeviceKind.parse(kind)
    assert (parsed.model, parsed.stack) == (model, stack)
    assert str(parsed) == kind
    assert DeviceKind.parse(str(parsed)) == parsed
    assert parsed.device_type == device_type(kind) == device


def test_a_kind_moves_to_another_stack() -> None:
    assert str(DeviceKind.parse("H100").on_stack("vllm")) == "H100@vllm"
    assert str(DeviceKind.parse("cpu@numpy-port").on_stack("maca")) == "cpu@maca"
    assert str(DeviceKind("cpu").on_stack("")) == "cpu"


def test_a_slot_is_pinned_by_its_name() -> None:
    gpu = DeviceSlot(device="cuda:3", kind="H100")
    cpu = DeviceSlot(device="cpu:1", kind="cpu")
    assert is_gpu(gpu) and not is_gpu(cpu)
    assert pinning(gpu) == ("cuda", {"CUDA_VISIBLE_DEVICES": "3", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"})
    assert pinning(cpu) == ("cpu", {})


FORBIDDEN = {"torch", "fastapi", "sqlalchemy", "starlette", "numpy"}


def test_contracts_import_no_framework_and_nothing_above_them() -> None:
    """contracts/ is the ground floor: pydantic and the standard library, and its own modules
    (read from the source, imports inside functions included)."""
    folder = Path(gpuarena.contracts.__file__).parent
    found = []
    for path in sorted(folder.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = (
                [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else []
            )
            for name in names:
                top = name.split(".")[0]
                if top in FORBIDDEN or (top == "gpuarena" and not name.startswith("gpuarena.contracts")):
                    found.append(f"{path.name} imports {name}")
    assert found == []
