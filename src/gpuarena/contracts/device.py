"""The device kind, what jobs are routed by, and the one parser of its grammar.

A device kind is MODEL[@STACK]: the device model ("H100", "RTX-4090", "cpu"), then, where a
runner names the software stack it offers (`gpuarena runner --stack`), "@" and that stack
("cpu@numpy-port", "MXC500@maca"). A job for a kind runs only on a slot of exactly that kind.

Other names of devices are other vocabularies, not kinds:

- a device slot, one device of a runner's host: "cpu", "cpu:N" (one more worker on the CPU),
  "cuda:N" (GPU N as nvidia-smi numbers them): `is_gpu` and `pinning` read it;
- a harness device, what the judge runs on: "cpu" or "cuda" (`DeviceKind.device_type`);
- a backend, the harness's code for a device: "cpu", "nvidia" (harness/device/).
"""

from __future__ import annotations

from dataclasses import dataclass

from gpuarena.contracts.wire import DeviceSlot

STACK_MARK = "@"
"""Between a kind's model and its stack."""


@dataclass(frozen=True)
class DeviceKind:
    """A device kind, parsed: `DeviceKind.parse("cpu@numpy-port")` is model "cpu", stack
    "numpy-port"; `str()` writes it back."""

    model: str
    stack: str = ""
    """"" where the runner names no stack (the host's default one)."""

    @classmethod
    def parse(cls, kind: str) -> DeviceKind:
        model, _, stack = kind.partition(STACK_MARK)
        return cls(model, stack)

    def __str__(self) -> str:
        return f"{self.model}{STACK_MARK}{self.stack}" if self.stack else self.model

    def on_stack(self, stack: str) -> DeviceKind:
        """The same model on another stack ("H100" on "vllm": "H100@vllm")."""
        return DeviceKind(self.model, stack)

    @property
    def device_type(self) -> str:
        """The harness device this kind runs on: the CPU for "cpu" (on any stack), CUDA for
        every GPU kind."""
        return "cpu" if self.model == "cpu" else "cuda"


def device_type(kind: str) -> str:
    """The harness device a device kind runs on ("cpu@numpy-port" -> "cpu", "H100" -> "cuda")."""
    return DeviceKind.parse(kind).device_type


def is_gpu(slot: DeviceSlot) -> bool:
    return slot.device.startswith("cuda")


def pinning(slot: DeviceSlot) -> tuple[str, dict[str, str]]:
    """The harness device and the environment that pin a job (or a health check) to slot:
    CUDA_VISIBLE_DEVICES=N for cuda:N, so the child process sees exactly that GPU as cuda, with
    CUDA numbering the GPUs in PCI bus order as nvidia-smi does (the slots' numbers are
    nvidia-smi's; CUDA's own order, fastest first, can differ on a host of mixed models)."""
    if is_gpu(slot):
        return "cuda", {"CUDA_VISIBLE_DEVICES": slot.device.partition(":")[2], "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
    return "cpu", {}
