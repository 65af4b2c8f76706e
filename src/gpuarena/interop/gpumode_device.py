"""GPU MODE's data made on the CPU (ON_DEVICE), and its global generators seeded (SEEDED).

Every task's `generate_input` names `device="cuda"` (and a
`torch.Generator(device="cuda")`), so without a GPU no task could be imported or run. Inside
`on_device(device)`, the device a factory call, a `.to()`/`.cuda()` or a generator names is
`device` wherever it names CUDA, and nothing else changes: the task's own code runs unmodified
and makes the same structure of data, drawn from the CPU's generator (other values than on a
GPU, as any other seed would give: make_inputs() draws the seed afresh anyway).

The text is exec'd, like RUNTIME (interop/gpumode_solution.py), by the importer's probe and
written into an imported problem's glue (its make_inputs() runs the task's generate_input
inside it wherever the harness's device is not CUDA). A task that does more on CUDA than make
tensors (a `torch.cuda` call, a Triton kernel) still fails on the CPU, and its entries stay
CUDA only, as before."""

ON_DEVICE = '''\
# -- GPU MODE's generate_input on a device other than CUDA (interop/gpumode_device.py) --
import contextlib as _contextlib
from torch.overrides import TorchFunctionMode as _TorchFunctionMode


def _moved(value, device):
    """device where value names a CUDA device, else value."""
    if isinstance(value, (str, _torch.device)):
        try:
            named = _torch.device(value)
        except (RuntimeError, TypeError):
            return value
        return device if named.type == "cuda" else value
    return value


class _OnDevice(_TorchFunctionMode):
    def __init__(self, device):
        super().__init__()
        self.device = device

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = dict(kwargs or {})
        if "device" in kwargs:
            kwargs["device"] = _moved(kwargs["device"], self.device)
        if func is _torch.Tensor.cuda:
            return args[0].to(self.device)
        if func is _torch.Tensor.to:
            args = tuple(_moved(a, self.device) for a in args)
        return func(*args, **kwargs)


@_contextlib.contextmanager
def on_device(device):
    """Tensors and generators that name CUDA are made on `device` instead (see the module)."""
    target = _torch.device(device)
    real = _torch.Generator

    class _GeneratorType(type):
        """torch.Generator, still a type (`torch.Generator | None`, isinstance), whose call
        makes a real generator on `device` where it names CUDA."""

        def __call__(cls, device="cpu"):
            return real(device=_moved(device, target))

        def __instancecheck__(cls, value):
            return isinstance(value, real)

        def __subclasscheck__(cls, subclass):
            return issubclass(subclass, real)

    _torch.Generator = _GeneratorType("Generator", (), {"__module__": "torch"})
    try:
        with _OnDevice(target):
            yield
    finally:
        _torch.Generator = real
'''

GLOBAL_SEED = 42
"""The seed GPU MODE's eval.py gives its global generators where no secret seed is set
(`set_seed(seed or 42)`): the importer's probe runs the task's entries under it."""

SEEDED = '''\
# -- GPU MODE's set_seed around generate_input (interop/gpumode_device.py) --
import copy as _copy_module
import random as _random


@_contextlib.contextmanager
def seeded_globals(seed, device):
    """Python's, NumPy's and torch's global generators seeded with seed, as GPU MODE's eval.py
    seeds them (utils.set_seed), for the time of the block; Python's and torch's states are put
    back after. NumPy's is left as the draw left it: the harness draws nothing from it, and
    reading and setting back its 624 words took 0.15 ms a draw on an H200's host, a tenth of a
    second of a ranked verdict on GPU MODE's vectoradd (py-spy). CUDA's is seeded only where
    device is CUDA, that device's (elsewhere on_device makes CUDA tensors on device)."""
    try:
        import numpy as _numpy
    except ImportError:
        _numpy = None
    device = _torch.device(device)
    # the harness's device only (GPU MODE's `cuda` is the current one): no other GPU is touched
    cuda = [_torch.cuda.current_device() if device.index is None else device.index] if device.type == "cuda" else []
    python_state = _random.getstate()
    with _torch.random.fork_rng(devices=cuda):
        _random.seed(seed)
        if _numpy is not None:
            _numpy.random.seed(seed % 2**32)
        _torch.default_generator.manual_seed(seed)
        for index in cuda:
            with _torch.cuda.device(index):
                _torch.cuda.manual_seed(seed)
        try:
            yield
        finally:
            _random.setstate(python_state)


def drawn_input(generate_input, args, seed, global_seed, device):
    """generate_input(**args, seed=seed) made for device, the global generators seeded. On CUDA,
    CUDA is the default device too, so what the task draws without naming a device is drawn on
    the GPU instead of the CPU and copied (bioml/trimul's Cauchy inputs through
    torch.distributions: 805 million numbers, about 20 s a draw on the CPU's generator, more
    than an import's time on an H200); a task whose CPU-side code cannot run so (a CPU
    generator, NumPy) fails the same way on every draw and is drawn as written."""
    device = _torch.device(device)
    if device.type != "cuda":
        with on_device(device), seeded_globals(global_seed, device):
            return generate_input(**args, seed=seed)
    try:
        with _torch.device(device), seeded_globals(global_seed, device):
            return generate_input(**_copy_module.deepcopy(args), seed=seed)
    except Exception:
        with seeded_globals(global_seed, device):
            return generate_input(**args, seed=seed)
'''
"""GPU MODE's eval.py calls `set_seed(POPCORN_SEED or 42)` (random, numpy and torch, CUDA
included) once, before its tests; a task's generate_input may draw from those global generators
instead of the generator it seeds (bioml/trimul draws its weights with a bare torch.randn, and
its Cauchy inputs through torch.distributions). The eval's spawned worker, where generate_input
runs, does not inherit that seeding, so GPU MODE's own draws there come from an unseeded
generator; gpuarena does what set_seed intends instead, reproducibly: make_inputs() seeds the
global generators with a second seed drawn from the harness's generator (fresh and secret in
every draw, like POPCORN_SEED) around generate_input, and the probe with GLOBAL_SEED. The text
is exec'd after ON_DEVICE (it uses its _contextlib and _torch)."""
