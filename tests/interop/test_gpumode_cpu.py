"""GPU MODE's tasks on a machine without a GPU, and the adapter's own cost (issue 49).

Every GPU MODE task's generate_input names CUDA outright (a CUDA generator, `device="cuda"`), so
on the CPU none could be imported; its data is now made on the CPU instead (gpumode_device.py).
And the adapter that runs a submission unmodified must cost the solution nothing the
reference's glue does not pay too: a closure that called itself kept every call's outputs
alive until the collector ran, which it never does inside a timed block, and GPU MODE's own
`A + B` scored 0.14-0.48x against the identical reference on the CPU.
"""

from __future__ import annotations

import gc
import shutil
import sys
import weakref

import pytest
import torch

import gpuarena.solution_readers  # noqa: F401  (registers every format's reader)
from gpuarena.interop.gpumode import import_folder
from gpuarena.interop.gpumode_device import ON_DEVICE
from gpuarena.interop.gpumode_solution import RUNTIME, adapter_source
from gpuarena.problems import load_problem

from .conftest import FIXTURES

GM = FIXTURES / "gpumode"
CUDA_NAMED = GM / "more" / "cudanamed_py"


def _runtime() -> dict:
    namespace: dict = {}
    exec(compile(RUNTIME + ON_DEVICE, "gpumode_runtime", "exec"), namespace)
    return namespace


def test_a_task_that_names_cuda_is_imported_with_cpu_workloads(tmp_path):
    outcome = import_folder(CUDA_NAMED, tmp_path)
    assert outcome.status == "imported", outcome.messages
    problem = load_problem(outcome.folder)
    assert all("cpu" in w.devices for w in problem.spec.workloads)
    workload = problem.spec.workloads[0]
    inputs = problem.make_inputs(
        dict(workload.axes), workload.torch_dtype, torch.device("cpu"), torch.Generator().manual_seed(3)
    )
    a, b = inputs["a"], inputs["b"]
    assert a.device.type == b.device.type == "cpu" and a.shape == (32, 32)
    assert 0 <= float(b.min()) and float(b.max()) <= 1.5  # the task's own rand() * 1.5, made here
    (expected,) = problem.reference(**inputs)
    assert torch.allclose(expected, 2 * a + b)


def test_on_device_moves_only_what_names_cuda_and_puts_everything_back():
    rt = _runtime()
    real = torch.Generator
    with rt["on_device"]("cpu"):
        gen = torch.Generator(device="cuda")
        made = [
            torch.randn(3, device="cuda", generator=gen.manual_seed(1)),
            torch.zeros(2, device=torch.device("cuda:0")),
            torch.ones(2).cuda(),
            torch.ones(2).to("cuda"),
            torch.ones(2).to("cuda", torch.float16),
            torch.ones(2, dtype=torch.int32).to(torch.float64),
        ]
    assert torch.Generator is real and isinstance(gen, torch.Generator)
    assert all(t.device.type == "cpu" for t in made)
    assert made[4].dtype == torch.float16 and made[5].dtype == torch.float64
    if not torch.cuda.is_available():
        with pytest.raises((RuntimeError, AssertionError)):
            torch.ones(1, device="cuda")  # outside the context, CUDA is CUDA again


def test_an_error_that_stops_every_entry_is_said_once(tmp_path):
    task = tmp_path / "needs_cuda_py"
    shutil.copytree(CUDA_NAMED, task)
    reference = task / "reference.py"
    text = reference.read_text().replace(
        "    gen = torch.Generator", "    torch.cuda.synchronize()\n    gen = torch.Generator"
    )
    reference.write_text(text)
    if torch.cuda.is_available():
        pytest.skip("the error is the CPU's")
    outcome = import_folder(task, tmp_path / "out")
    assert outcome.status == "error"
    (message,) = outcome.messages
    assert "test0-size32, test1-size48, bench0-size256: generate_input raised" in message
    assert message.count("generate_input raised") == 1


def test_the_import_lets_each_entry_s_data_go_before_it_draws_the_next(tmp_path):
    """The import held every probed entry's tensors until its last step: GPU MODE's bioml/trimul,
    3.2 GB an entry, went past the 8 GB an import is given and was not imported on the CPU. Now
    it keeps an entry's size, dtype and one-value inputs only (gpumode_probe.probed): when an
    entry is drawn, no earlier entry's tensor is alive but the first's (the outputs' template)."""
    task = tmp_path / "many_entries_py"
    shutil.copytree(CUDA_NAMED, task)
    alive_log = tmp_path / "alive.txt"
    reference = task / "reference.py"
    text = reference.read_text()
    counted = text.replace(
        "def generate_input(size: int, seed: int) -> input_t:\n",
        "import weakref\nMADE = []\n\n\ndef generate_input(size: int, seed: int) -> input_t:\n"
        f"    with open({str(alive_log)!r}, 'a') as log:\n"
        "        log.write(f'{sum(r() is not None for r in MADE)}\\n')\n",
    ).replace(
        '    return a.contiguous(), (b * scale).to("cuda")\n',
        '    made = a.contiguous(), (b * scale).to("cuda")\n    MADE.extend(weakref.ref(t) for t in made)\n    return made\n',
    )
    assert counted.count("MADE") == 3, counted
    reference.write_text(counted)
    entries = "".join(f'  - {{"size": {40 + i}, "seed": {i}}}\n' for i in range(6))
    (task / "task.yml").write_text((task / "task.yml").read_text().split("tests:")[0] + "tests:\n" + entries)
    outcome = import_folder(task, tmp_path / "out")
    assert outcome.status == "imported", outcome.messages
    alive = [int(line) for line in alive_log.read_text().split()]
    assert len(alive) >= 6 and max(alive) <= 2, alive  # the first entry's two tensors at most


def test_the_runtime_frees_a_calls_outputs_without_the_collector():
    """What the adapter and the glue run on every call holds no reference cycle: with the
    collector off (as in a timed block), an output is freed as soon as its caller drops it."""
    rt = _runtime()
    gc.disable()
    try:
        spec = ("tuple", (("t",), ("n", "float64")))
        out = rt["outputs"]((torch.ones(8) * 2, 0.5), spec, torch.device("cpu"))
        freed = weakref.ref(out[0])
        back = rt["restructure"](out, spec)
        assert back[1] == 0.5
        del out, back
        assert freed() is None
        data = (torch.ones(2), [torch.zeros(3), 4], {"k": torch.ones(1)})
        tensors, layout = rt["flatten"](data, {1: "zeros"})
        rebuilt = rt["rebuild"](layout, tensors, torch.device("cpu"))
        made = weakref.ref(rebuilt[1][0])
        del rebuilt
        assert made() is None
    finally:
        gc.enable()


def test_the_adapter_frees_each_result_without_the_collector(tmp_path):
    (tmp_path / "submission.py").write_text((GM / "submissions" / "scaled_add_ok.py").read_text())
    namespace = {"__name__": "gpumode_adapter_cycles", "__file__": str(tmp_path / "gpumode_adapter.py")}
    saved = sys.modules.pop("task", None)
    try:
        exec(compile(adapter_source("submission.py"), namespace["__file__"], "exec"), namespace)
        meta = ("gpuarena.gpumode-data/1", ("tuple", (("t", 0), ("t", 1))), ("t",))
        gc.disable()
        try:
            (out,) = namespace["solve"](torch.ones(4), torch.ones(4), meta)
            assert torch.equal(out, torch.full((4,), 3.0))
            freed = weakref.ref(out)
            del out
            assert freed() is None
        finally:
            gc.enable()
    finally:  # the adapter's stand-in task module and the submission's, out again
        sys.modules.pop("task", None)
        sys.modules.pop("gpumode_submission_gpumode_adapter_cycles", None)
        if saved is not None:
            sys.modules["task"] = saved


@pytest.mark.harness
def test_a_submission_to_a_task_that_names_cuda_passes_on_the_cpu(tmp_path):
    from gpuarena.harness.judge import RunOptions, evaluate
    from gpuarena.solutions import load_solution

    outcome = import_folder(CUDA_NAMED, tmp_path)
    assert outcome.status == "imported", outcome.messages
    record = evaluate(
        load_problem(outcome.folder),
        load_solution(GM / "submissions" / "scaled_add_ok.py"),
        RunOptions(device="cpu", mode="test"),
    )
    assert record.status == "PASSED", (record.reason, record.log[-3000:])


def test_inside_on_device_torch_generator_is_still_a_type():
    """Code run inside the context that uses torch.Generator as a type (torch.distributed's
    lazy import evaluates `torch.Generator | None`; isinstance checks) works as outside it."""
    rt = _runtime()
    with rt["on_device"]("cpu"):
        assert isinstance(torch.Generator, type)
        hint = torch.Generator | None
        made = torch.Generator(device="cuda")
        positional = torch.Generator("cuda")
        assert isinstance(made, torch.Generator) and isinstance(positional, torch.Generator)
        assert made.device.type == positional.device.type == "cpu"
        assert not isinstance(3, torch.Generator)
        assert isinstance(None, hint) and isinstance(made, hint)
    assert isinstance(made, torch.Generator)
