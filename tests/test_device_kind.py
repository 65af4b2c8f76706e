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
    """contracts/ is the ground floor: pydantic and the standard library, its own modules and
    the package's version (gpuarena/__init__.py: constants only), read from the source, imports
    inside functions included."""
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
                if top in FORBIDDEN or (
                    top == "gpuarena" and name != "gpuarena" and not name.startswith("gpuarena.contracts")
                ):
                    found.append(f"{path.name} imports {name}")
    assert found == []


ROOT = Path(__file__).resolve().parents[1]
SCANNED = ("src", "tests", "bench", "scripts", "redteam", "examples")
"""The repository's Python folders (those that exist) read for a second parser of the kind."""
PARSER = Path("src/gpuarena/contracts/device.py")
NOT_A_KIND = {Path("src/gpuarena/service/webhooks.py")}
"""Files that split something else at "@": a URL's user-information (netloc) in webhooks."""
SPLITTING = {"split", "rsplit", "partition", "rpartition", "index", "rindex", "find", "rfind"}


def _mark_uses(tree: ast.AST) -> list[int]:
    """The lines that split at "@" or look for it: `x.partition("@")`, `"@" in x` and the like."""

    def is_mark(node: ast.AST) -> bool:
        return (isinstance(node, ast.Constant) and node.value == "@") or (
            isinstance(node, ast.Name | ast.Attribute)
            and getattr(node, "id", getattr(node, "attr", "")) == "STACK_MARK"
        )

    lines = []
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in SPLITTING
            and node.args
            and is_mark(node.args[0])
        ):
            lines.append(node.lineno)
        elif (
            isinstance(node, ast.Compare)
            and is_mark(node.left)
            and any(isinstance(op, ast.In | ast.NotIn) for op in node.ops)
        ):
            lines.append(node.lineno)
    return lines


def test_no_second_parser_of_the_kind() -> None:
    """MODEL[@STACK] is split in contracts/device.py only (DeviceKind.parse, device_type): a second
    parser elsewhere (in the service, the runner, a test or a script) could drift from it, so
    every other split at "@" must go through DeviceKind instead."""
    found = []
    for folder in SCANNED:
        for path in sorted((ROOT / folder).rglob("*.py")):
            relative = path.relative_to(ROOT)
            if relative == PARSER or relative in NOT_A_KIND or ".venv" in relative.parts:
                continue
            try:
                tree = ast.parse(path.read_bytes(), str(path))
            except (SyntaxError, ValueError):
                continue  # a deliberately broken fixture (a solution that does not compile)
            found += [f"{relative}:{line}" for line in _mark_uses(tree)]
    assert found == [], "split the device kind with gpuarena.contracts.device.DeviceKind.parse"
    assert _mark_uses(ast.parse((ROOT / PARSER).read_text()))  # the scan does find the one parser


def test_the_stack_a_runner_announces_is_its_kinds() -> None:
    """A slot's stack, as the runner announces it, is the stack its kind names (one grammar)."""
    from gpuarena.runner.devices import advertise

    slots = [DeviceSlot(device="cpu", kind="cpu"), DeviceSlot(device="cuda:0", kind="H100@torch-2.13")]
    for stack in ("", "maca"):
        for slot in advertise(slots, stack):
            assert slot.stack == DeviceKind.parse(slot.kind).stack
