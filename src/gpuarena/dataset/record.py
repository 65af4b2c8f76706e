"""Record every aten call a model's forward makes: the op, its arguments' shapes and dtypes, and
its time. This is the raw profile a harvest groups into problem candidates (docs/dataset.md).

A TorchDispatchMode sits below autograd and the composite decompositions, so what it sees is
what actually runs (linear as t + addmm, softmax as _softmax): the ops a kernel would replace.
"""

from __future__ import annotations

import contextlib
import inspect
import time
from collections.abc import Callable, Iterator
from typing import Any, Literal

import torch
from pydantic import BaseModel, ConfigDict
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.weak import WeakTensorKeyDictionary

from gpuarena.errors import GpuarenaError

# ops that only make a new view or touch metadata: recorded (they are part of the profile) but
# not worth a problem, since a kernel for them moves no data
METADATA_OPS = frozenset(
    {
        "view",
        "_unsafe_view",
        "t",
        "expand",
        "detach",
        "transpose",
        "permute",
        "reshape",
        "unsqueeze",
        "squeeze",
        "slice",
        "select",
        "alias",
        "as_strided",
        "split",
        "split_with_sizes",
        "chunk",
        "unbind",
        "narrow",
        "expand_as",
        "lift_fresh",
        "sym_size",
        "sym_stride",
        "sym_numel",
        "sym_storage_offset",
        "_reshape_alias",
        "view_as",
        "unfold",
        "diagonal",
        "movedim",
        "real",
        "imag",
        "view_as_real",
        "view_as_complex",
        "_local_scalar_dense",
    }
)

ArgKind = Literal["tensor", "tensors", "int", "float", "bool", "ints", "floats", "none", "torch", "str", "other"]


class Strict(BaseModel):
    # infinities and NaN written as JSON's Infinity and NaN (Python's json reads them), not as null:
    # a masked_fill with -inf, read back from profile.jsonl by `dataset add`, became masked_fill
    # with None, and DeepSeek-V3's router and decoder layers failed there though their harvest passed
    model_config = ConfigDict(extra="forbid", frozen=True, ser_json_inf_nan="constants")


class TensorInfo(Strict):
    """What a problem needs to redraw a tensor like this one."""

    shape: list[int]
    dtype: str
    stride: list[int]
    contiguous: bool
    low: float | None = None
    """Smallest value seen (None for empty or boolean tensors): inputs are redrawn in range,
    so that rsqrt gets positive numbers and embedding indices stay in bounds."""
    high: float | None = None
    ascending: bool = False
    """A 1-D integer tensor of non-decreasing values (offsets such as _grouped_mm's offs): redrawn
    sorted, its last value the recorded maximum, or the op's kernel asserts."""


class ArgRecord(Strict):
    """One argument of a call, named as in the op's schema."""

    name: str
    kind: ArgKind
    keyword: bool = False
    """Passed by keyword (kwarg-only in the schema, or given so)."""
    tensor: TensorInfo | None = None
    tensors: list[TensorInfo] | None = None
    value: Any = None
    """ints, floats, bools and lists of them as they are; torch constants (dtypes, memory formats)
    as their repr, e.g. "torch.float32"; anything else as its repr, under kind "other"."""
    origins: list[list[int]] | None = None
    """Where each of its tensors came from: [call index, result index] for a result of a recorded
    call, [-1, k] for external tensor k (a weight, a model input: Recorder.externals). The
    dataflow that makes a module's calls a graph (dataset/graph.py)."""

    def signature(self) -> Any:
        """The part that makes calls the same problem: shapes, dtypes, strides, values (not ranges)."""

        def plain(t: TensorInfo) -> list[Any]:
            return [t.shape, t.dtype, t.stride]

        if self.tensor is not None:
            return [self.name, plain(self.tensor)]
        if self.tensors is not None:
            return [self.name, [plain(t) for t in self.tensors]]
        return [self.name, self.kind, self.value]


class ModuleCall(Strict):
    """One call of a submodule during a recorded forward: a line of modules.jsonl. Its aten calls
    are those with start <= index < end; with their origins they make the module's graph."""

    path: str
    """Its name in the model (model.layers.0.mlp)."""
    cls: str
    """Its class's name (LlamaMLP)."""
    start: int
    end: int
    inputs: dict[str, list[int]]
    """The tensors it was called with, by parameter name (a tuple argument's k-th as name_k), and their origins."""
    outputs: list[list[int]]
    """The origins of the tensors it returned, in order."""


class CallRecord(Strict):
    """One aten call during the recorded forward(s): a line of profile.jsonl."""

    index: int
    op: str
    """The overload's name, e.g. aten.mm.default."""
    args: list[ArgRecord]
    outputs: list[TensorInfo]
    seconds: float
    metadata_only: bool
    """A view or metadata op: part of the profile, never a problem."""
    mutates: bool
    """Writes into an argument (add_, copy_): not a problem yet (its reference would not be pure)."""


def op_name(func: Any) -> str:
    return f"{func.namespace}.{func._schema.name.split('::')[-1]}.{func._overloadname}"


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def tensor_info(t: torch.Tensor, ranges: bool = True) -> TensorInfo:
    low = high = None
    if ranges and t.numel() and t.dtype != torch.bool and not t.is_complex():
        lo, hi = torch.aminmax(t.detach().reshape(-1))
        low, high = float(lo), float(hi)
    ascending = bool(
        ranges
        and t.dim() == 1
        and t.numel() > 1
        and not t.dtype.is_floating_point
        and t.dtype != torch.bool
        and not t.is_complex()
        and bool((t[1:] >= t[:-1]).all())
    )
    return TensorInfo(
        shape=list(t.shape),
        dtype=_dtype_name(t.dtype),
        stride=list(t.stride()),
        contiguous=t.is_contiguous(),
        low=low,
        high=high,
        ascending=ascending,
    )


def arg_record(name: str, value: Any, keyword: bool) -> ArgRecord:
    base: dict[str, Any] = {"name": name, "keyword": keyword}
    if isinstance(value, torch.Tensor):
        return ArgRecord(**base, kind="tensor", tensor=tensor_info(value))
    if isinstance(value, (list, tuple)) and value and all(isinstance(v, torch.Tensor) for v in value):
        return ArgRecord(**base, kind="tensors", tensors=[tensor_info(v) for v in value])
    if value is None:
        return ArgRecord(**base, kind="none")
    if isinstance(value, bool):
        return ArgRecord(**base, kind="bool", value=value)
    if isinstance(value, int):
        return ArgRecord(**base, kind="int", value=value)
    if isinstance(value, float):
        return ArgRecord(**base, kind="float", value=value)
    if isinstance(value, str):
        return ArgRecord(**base, kind="str", value=value)
    if isinstance(value, (list, tuple)) and all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        return ArgRecord(**base, kind="ints", value=list(value))
    if isinstance(value, (list, tuple)) and all(isinstance(v, (int, float)) for v in value):
        return ArgRecord(**base, kind="floats", value=[float(v) for v in value])
    if isinstance(value, (torch.dtype, torch.memory_format, torch.layout)):
        return ArgRecord(**base, kind="torch", value=repr(value))
    return ArgRecord(**base, kind="other", value=repr(value))


def _outputs(result: Any) -> list[TensorInfo]:
    items = result if isinstance(result, (list, tuple)) else [result]
    return [tensor_info(t, ranges=False) for t in items if isinstance(t, torch.Tensor)]


Timer = Callable[[Callable[[], Any]], "tuple[Any, float]"]


def cpu_timer(call: Callable[[], Any]) -> tuple[Any, float]:
    """Wall time of the real call: right on the CPU, where a call's work is done when it returns."""
    start = time.perf_counter()
    result = call()
    return result, time.perf_counter() - start


class KernelTimer:
    """Each call's kernels' own device time, from the profiler's CUPTI records: a call runs inside a
    `record_function` range named by its index, and after the forwards every range gets the device
    time of the kernels launched within it. Launch overhead, host syncs (the recorder reads input
    ranges) and idle gaps count for nothing, as they should in a weight. Calls return 0 seconds
    until `profiling` ends and fills them."""

    PREFIX = "gpuarena.call."

    def __init__(self) -> None:
        self.count = 0

    def __call__(self, call: Callable[[], Any]) -> tuple[Any, float]:
        with torch.profiler.record_function(f"{self.PREFIX}{self.count}"):
            result = call()
        self.count += 1
        return result, 0.0

    @contextlib.contextmanager
    def profiling(self, calls: list[CallRecord]) -> Iterator[None]:
        """Profile the block; on leaving it, set each of `calls` (in call order) to its kernels' seconds."""
        self.count = 0  # call i of this recording runs in range i
        activities = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
        with torch.profiler.profile(activities=activities) as prof:
            yield
        seconds: dict[int, float] = {}
        for event in prof.events():
            if event.name.startswith(self.PREFIX) and event.device_type == torch.autograd.DeviceType.CPU:
                index = int(event.name.removeprefix(self.PREFIX))
                seconds[index] = seconds.get(index, 0.0) + event.device_time_total / 1e6
        if calls and not any(seconds.values()):
            raise GpuarenaError("the profiler saw no kernel of any call: is the model on the GPU?")
        calls[:] = [call.model_copy(update={"seconds": seconds.get(call.index, 0.0)}) for call in calls]


class Recorder(TorchDispatchMode):
    """`with Recorder() as rec: model(x)` then rec.calls: every aten call, in order, timed, with
    where each tensor argument came from; and, where a model is given, rec.modules: each call of
    one of its submodules, with its span of aten calls.

    Inside __torch_dispatch__ the mode is off, so the real call and the range reads are not
    themselves recorded; ranges are read before the timed call, outside its time."""

    def __init__(self, timer: Timer = cpu_timer, model: torch.nn.Module | None = None):
        super().__init__()
        self.timer = timer
        self.calls: list[CallRecord] = []
        self.modules: list[ModuleCall] = []
        self.externals: list[str] = []
        """Per external tensor: the model's name for it (a parameter's or buffer's), or ''."""
        self._origin: Any = WeakTensorKeyDictionary()  # tensor -> (call, result) or (-1, external)
        self._names = {id(t): n for n, t in [*model.named_parameters(), *model.named_buffers()]} if model else {}
        self._model = model
        self._open: list[tuple[str, str, int, dict[str, list[int]]]] = []
        self._hooks: list[Any] = []

    def origin(self, t: torch.Tensor) -> list[int]:
        found = self._origin.get(t)
        if found is None:
            found = self._origin[t] = (-1, len(self.externals))
            self.externals.append(self._names.get(id(t), ""))
        return list(found)

    def _origins(self, value: Any) -> list[list[int]] | None:
        if isinstance(value, torch.Tensor):
            return [self.origin(value)]
        if isinstance(value, (list, tuple)) and value and all(isinstance(v, torch.Tensor) for v in value):
            return [self.origin(v) for v in value]
        return None

    def __torch_dispatch__(
        self,
        func: torch._ops.OpOverload,
        types: tuple[type, ...],
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        kwargs = kwargs or {}
        schema = func._schema.arguments
        records = [arg_record(schema[i].name if i < len(schema) else f"arg{i}", a, False) for i, a in enumerate(args)]
        records += [arg_record(k, v, True) for k, v in kwargs.items()]
        values = [*args, *kwargs.values()]
        records = [r.model_copy(update={"origins": self._origins(v)}) for r, v in zip(records, values)]
        result, seconds = self.timer(lambda: func(*args, **kwargs))
        name = op_name(func)
        index = len(self.calls)
        items = result if isinstance(result, (list, tuple)) else [result]
        for k, t in enumerate(t for t in items if isinstance(t, torch.Tensor)):
            self._origin[t] = (index, k)  # an in-place op's result is its input: later uses see the new value
        self.calls.append(
            CallRecord(
                index=index,
                op=name,
                args=records,
                outputs=_outputs(result),
                seconds=seconds,
                metadata_only=name.split(".")[1] in METADATA_OPS or bool(getattr(func, "is_view", False)),
                mutates=bool(func._schema.is_mutable),
            )
        )
        return result

    # -- module spans ----------------------------------------------------------------------
    def __enter__(self) -> Recorder:
        if self._model is not None:
            for path, module in self._model.named_modules():
                if path:  # the whole model is every call: not a fusion
                    self._hooks.append(module.register_forward_pre_hook(self._entered(path), with_kwargs=True))
                    self._hooks.append(module.register_forward_hook(self._left, with_kwargs=True))
        return super().__enter__()

    def __exit__(self, *exc: Any) -> None:
        for hook in self._hooks:
            hook.remove()
        self._hooks.clear()
        return super().__exit__(*exc)

    def _entered(self, path: str) -> Callable[..., None]:
        def hook(module: torch.nn.Module, args: tuple, kwargs: dict) -> None:
            try:
                bound = inspect.signature(module.forward).bind(*args, **kwargs).arguments
            except (TypeError, ValueError):
                bound = {f"arg{i}": a for i, a in enumerate(args)} | kwargs
            inputs: dict[str, list[int]] = {}
            for name, value in bound.items():
                if isinstance(value, torch.Tensor):
                    inputs[name] = self.origin(value)
                elif isinstance(value, (list, tuple)):
                    inputs.update(
                        {f"{name}_{k}": self.origin(v) for k, v in enumerate(value) if isinstance(v, torch.Tensor)}
                    )
            self._open.append((path, type(module).__name__, len(self.calls), inputs))

        return hook

    def _left(self, module: torch.nn.Module, args: tuple, kwargs: dict, result: Any) -> None:
        path, cls, start, inputs = self._open.pop()
        items = result if isinstance(result, (list, tuple)) else [result]
        outputs = [self.origin(t) for t in items if isinstance(t, torch.Tensor)]
        self.modules.append(
            ModuleCall(path=path, cls=cls, start=start, end=len(self.calls), inputs=inputs, outputs=outputs)
        )


def record(
    forward: Callable[[], Any],
    repeats: int = 1,
    warmup: int = 1,
    timer: Timer = cpu_timer,
    model: torch.nn.Module | None = None,
) -> Recorder:
    """The calls (and with a model, its submodules' calls) of `repeats` runs of forward() (after
    `warmup` unrecorded ones), without autograd."""
    with torch.no_grad():
        for _ in range(warmup):
            forward()
        recorder = Recorder(timer, model)
        profiling = timer.profiling(recorder.calls) if isinstance(timer, KernelTimer) else contextlib.nullcontext()
        with profiling, recorder:
            for _ in range(repeats):
                forward()
    return recorder
