"""GPU MODE's data made on the CPU: every task's `generate_input` names `device="cuda"` (and a
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

    def generator(device="cpu"):
        return real(device=_moved(device, target))

    _torch.Generator = generator
    try:
        with _OnDevice(target):
            yield
    finally:
        _torch.Generator = real
'''
