"""Writing the gpuarena problem folder of an imported GPU MODE task (see interop/gpumode.py): the
generated glue (reference.py, with check() where the task's checker is kept), problem.toml and
README.md, staged in a fresh folder beside the destination."""

from __future__ import annotations

import json
import re
import tempfile
from pathlib import Path
from typing import Any

from gpuarena.interop.gpumode_device import ON_DEVICE, SEEDED
from gpuarena.interop.gpumode_needs import required_packages
from gpuarena.interop.gpumode_probe import DYNAMIC_CONSTANT
from gpuarena.interop.gpumode_solution import FORMAT, META_INPUT, RUNTIME
from gpuarena.interop.gpumode_task import Case, Rule, Task

SEED_BOUND = 2**16
"""make_inputs() draws generate_input's seed below seed_bound(cases): 2**16, or the power of two
above the task's largest seed where that is larger. GPU MODE's task.yml seeds are small (42,
4242, 5236, ..., 93246 at most in pmpp_v2), and generate_input may use the seed as data: its
sort task adds seed + row to float32 normals, which a seed near 2**31 (a float32 spacing of 128
there) turns into constant rows. Below 2**16 (plus the row numbers it adds) the spacing is
1/128 at most, as for GPU MODE's own entries; still 65536 secret seeds a workload, drawn afresh
in every draw."""
SEED_CAP = 2**31 - 2**20
"""No seed bound above this (GPU MODE files do arithmetic on the seed: seed + i must stay an int32)."""


def seed_bound(cases: list[Case]) -> int:
    """The bound of the seeds make_inputs() draws for a task with these entries (see SEED_BOUND)."""
    largest = max((c.seed for c in cases), default=0)
    return min(max(SEED_BOUND, 1 << max(largest, 1).bit_length()), SEED_CAP)


_DEFAULT_L2 = {"float64": 1e-7, "float32": 1e-4, "float16": 5e-3, "bfloat16": 1e-2}


# -- writing the problem ------------------------------------------------------------------------


def problem_name(folder: Path) -> str:
    name = re.sub(r"[^a-z0-9_\-]+", "_", folder.resolve().name.lower()).strip("_-")
    return name or "gpumode_problem"


def _glue(
    names: list[str],
    cases: list[Case],
    buffers: dict[int, str],
    spec: tuple[Any, ...],
    constants: dict[int, list[int]] | None = None,
    unread: dict[int, list[str]] | None = None,
) -> str:
    table = [dict(c.args) for c in cases]
    unread = unread or {}
    # an entry not probed (GPU-sized, or its data made on CUDA only): what no probed entry reads
    elsewhere = [n for n in names if unread and all(n in found for found in unread.values())]
    seeds = [c.seed for c in cases]
    params = ", ".join([*names, META_INPUT])
    constant_table = constants or {}
    return f'''# gpuarena glue, written by `gpuarena import gpumode` (gpuarena/interop/gpumode.py): the GPU MODE
# task's files are in gpumode/, verbatim. reference() rebuilds GPU MODE's data from the tensors
# and the last input (how data is laid out) and calls ref_kernel(data); make_inputs() calls
# generate_input(**the workload's arguments, seed=S) with S drawn from the harness's generator,
# never the task's fixed seed, so inputs are fresh and secret in every draw; the global generators
# are seeded around it as GPU MODE's eval.py seeds them, from a second seed drawn the same way.
import copy as _copy
import hashlib as _hashlib
from pathlib import Path as _Path

{RUNTIME}
{ON_DEVICE}
{SEEDED}
_FOLDER = _Path(__file__).resolve().parent / "gpumode"
_FORMAT = {FORMAT!r}
_INPUTS = {names!r}
_CASES = {table!r}
"""Each workload's generate_input arguments (axes["case"] indexes it; integer axes override)."""
_TASK_SEEDS = {seeds!r}
"""task.yml's own seeds: GPU MODE's fixed test inputs, kept for the record; never used here."""
_BUFFERS = {buffers!r}
"""Tensors of data that are output buffers: index -> how they are made on every call."""
_OUTPUT = {spec!r}
_CONSTANTS = {constant_table!r}
"""Workload (case) -> its inputs that are one value everywhere, found at import (CONSTANT in the
runtime): they travel as (CONSTANT, shape, dtype, value). A case the importer could not probe is
not here: there an input of at least _DYNAMIC_CONSTANT elements, one value everywhere, is one."""
_DYNAMIC_CONSTANT = {DYNAMIC_CONSTANT}
_UNREAD = {unread!r}
"""Workload (case) -> its inputs ref_kernel never reads, found at import (interop/gpumode_reads.py):
data a submission may read (nvfp4's scale factors in a second layout). A case the importer could
not probe gets _UNREAD_ELSEWHERE, the inputs no probed case reads."""
_UNREAD_ELSEWHERE = {elsewhere!r}
_SEED_BOUND = {seed_bound(cases)}
"""make_inputs() draws generate_input's seed below this: the range of task.yml's own seeds, where
data made from the seed stays as varied as GPU MODE's own (interop/gpumode_write.py SEED_BOUND)."""
_task = None


def _gpumode():
    global _task
    if _task is None:
        sources = {{name: (_FOLDER / name).read_text(encoding="utf-8")
                   for name in ("reference.py", "task.py", "utils.py")}}
        _task = _load(sources, _FOLDER, "gpumode_reference_" + str(abs(hash(str(_FOLDER)))))
        OWN_CLASSES.update({{name: value for name, value in _task.items() if isinstance(value, type)
                            and (_dataclasses.is_dataclass(value) or hasattr(value, "_fields"))}})
    return _task


def _load(sources, folder, name):
    import sys
    import types

    saved = {{key: sys.modules.get(key) for key in ("utils", "task")}}
    try:
        for key in ("utils", "task"):
            module = types.ModuleType(key)
            module.__file__ = str(folder / (key + ".py"))
            sys.modules[key] = module
            exec(compile(sources[key + ".py"], module.__file__, "exec"), module.__dict__)
        # reference.py as the module `name`, in sys.modules before it runs and after, as an
        # import would (a @dataclass with string annotations looks its module up there)
        reference = types.ModuleType(name)
        reference.__file__ = str(folder / "reference.py")
        sys.modules[name] = reference
        try:
            exec(compile(sources["reference.py"], reference.__file__, "exec"), reference.__dict__)
        except BaseException:
            sys.modules.pop(name, None)
            raise
    finally:
        for key, module in saved.items():
            if module is None:
                sys.modules.pop(key, None)
            else:
                sys.modules[key] = module
    return reference.__dict__


def reference({params}):
    tensors = [{", ".join(names)}]
    _, layout, spec = {META_INPUT}
    device = device_of(tensors)
    ref_kernel = _gpumode()["ref_kernel"]  # loaded before rebuild: its classes rebuild data
    with _torch.no_grad():
        return outputs(ref_kernel(rebuild(layout, tensors, device)), spec, device)


def unread_inputs(axes):
    """The inputs no output depends on by design (the task's own data for submissions): `gpuarena
    check` does not call the problem degenerate for them."""
    return list(_UNREAD.get(axes["case"], _UNREAD_ELSEWHERE))


def _seeds(generator, device):
    """generate_input's seed (below _SEED_BOUND) and the global generators' (below 2**32), fresh and
    secret in every draw: a hash of the harness generator's state, read on the host, which a draw of
    its own then moves on. Two draws read back (`.item()`) waited for the device twice a draw, a
    good part of a round's refresh of 42 small sets on an H200."""
    digest = _hashlib.sha256(generator.get_state().numpy().tobytes()).digest()
    _torch.randint(0, 2, (1,), generator=generator, device=device)  # the next draw's state: no wait
    return int.from_bytes(digest[:8], "little") % _SEED_BOUND, int.from_bytes(digest[8:16], "little") % 2**32


def make_inputs(axes, dtype, device, generator):
    args = _copy.deepcopy(_CASES[axes["case"]])  # lists in it: generate_input's own copy
    args.update({{k: v for k, v in axes.items() if k != "case"}})
    seed, global_seed = _seeds(generator, device)
    device = _torch.device(device)
    generate_input = _gpumode()["generate_input"]
    data = drawn_input(generate_input, args, seed, global_seed, device)
    tensors, layout = flatten(data, _BUFFERS)
    if len(tensors) != len(_INPUTS):
        raise ValueError(f"generate_input made {{len(tensors)}} input tensors; the problem was imported with "
                         f"{{len(_INPUTS)}} ({{', '.join(_INPUTS)}})")
    fixed = _CONSTANTS.get(axes["case"])
    inputs = {{}}
    for index, (name, t) in enumerate(zip(_INPUTS, tensors)):
        constant = constant_of(t) if fixed is None or index in fixed else None
        if fixed is not None and index in fixed and constant is None:
            raise ValueError(f"input {{name}} was one value everywhere when the problem was imported, "
                             "but generate_input now varies it: import the task again")
        if fixed is None and constant is not None and t.numel() < _DYNAMIC_CONSTANT:
            constant = None
        inputs[name] = (*constant, str(device)) if constant is not None else t.to(device)
    inputs[{META_INPUT!r}] = (_FORMAT, layout, _OUTPUT)
    return inputs
'''


CHECK_GLUE = f'''

def check(inputs, outputs, expected):
    """The task's check_implementation(data, output) on GPU MODE's data rebuilt from the inputs
    and the outputs in ref_kernel's shape: '' when it accepts them, else its message."""
    tensors = [inputs[name] for name in _INPUTS]
    _, layout, spec = inputs[{META_INPUT!r}]
    check_implementation = _gpumode()["check_implementation"]  # loaded before rebuild: its classes
    result = check_implementation(rebuild(layout, tensors, device_of(tensors)), restructure(outputs, spec))
    if isinstance(result, tuple) and len(result) == 2 and isinstance(result[0], bool):
        return "" if result[0] else str(result[1]) or "check_implementation rejected the output"
    if isinstance(result, bool):
        return "" if result else "check_implementation rejected the output"
    return result if isinstance(result, str) else f"check_implementation returned {{result!r}}"
'''
"""The imported problem's checker (ProblemSpec.checker), where check_implementation is its own logic."""


def _toml(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)


def _problem_toml(
    task: Task,
    name: str,
    level: int,
    outputs: list[str],
    rule: Rule,
    workloads: list[tuple[Case, dict[str, int], str, list[str]]],
    how: str,
) -> str:
    summary = next(
        (line.strip() for line in str(task.yml.get("description") or "").splitlines() if line.strip()),
        f"GPU MODE problem {task.folder.name}",
    )
    lines = [
        f"# Imported from the GPU MODE problem folder {_toml(task.folder.name)} by `gpuarena import gpumode`.",
        f"name = {_toml(name)}",
        f"level = {level}",
        f"summary = {_toml(summary)}",
        'tags = ["gpumode"]',
        'convention = "return"',
        *(["checker = \"check\"  # the task's check_implementation (reference.py's check)"] if rule.checker else []),
        *(['tolerance_as_stated = "GPU MODE"  # the task\'s own check, kept exactly'] if rule.from_task else []),
        f"outputs = [{', '.join(_toml(o) for o in outputs)}]",
        *(
            [f"requires = [{', '.join(_toml(r) for r in required)}]  # imported by the task's files"]
            if (required := required_packages(*(task.sources[f] for f in ("reference.py", "task.py", "utils.py"))))
            else []
        ),
        "",
        "[provenance]",
        'framework = "gpumode"',
        f"operator = {_toml(task.folder.name)}",
        "",
    ]
    limits = {mode: task.yml.get(f"{mode}_timeout") for mode in ("test", "benchmark", "ranked")}
    limits = {k: min(float(v), 3600.0) for k, v in limits.items() if isinstance(v, (int, float)) and v > 0}
    if limits:
        lines += ["[time_limits]  # task.yml's time-outs"] + [f"{k} = {v!r}" for k, v in limits.items()] + [""]
    lines.append(f"# check_implementation: {how}")
    for dtype in sorted({w[2] for w in workloads}) if not rule.checker else []:
        if rule.exact:
            atol = rtol = l2 = 0.0
        else:
            atol, rtol = rule.atol, rule.rtol
            l2 = max(_DEFAULT_L2.get(dtype, rtol), rtol)
        lines += [f"[tolerance.{dtype}]", f"atol = {atol!r}", f"rtol = {rtol!r}", f"l2 = {l2!r}", ""]
    for case, axes, dtype, devices in workloads:
        axis_text = ", ".join(f"{k} = {v}" for k, v in axes.items())
        lines += ["[[workloads]]", f"name = {_toml(case.name)}", f"axes = {{ {axis_text} }}", f"dtype = {_toml(dtype)}"]
        if case.kind == "test":
            lines.append("timed = false  # GPU MODE checks its tests and times its benchmarks")
        lines += [f"devices = [{', '.join(_toml(d) for d in devices)}]", ""]
    return "\n".join(lines)


def _readme(
    task: Task, name: str, how: str, names: list[str], workloads: list[tuple[Case, dict[str, int], str, list[str]]]
) -> str:
    rows = "\n".join(
        f"| {c.name} | {', '.join(f'{k}={v}' for k, v in c.args.items()) or '-'} | {c.seed} | {d} | {', '.join(dv)} |"
        for c, _, d, dv in workloads
    )
    description = str(task.yml.get("description") or "").strip()
    return f"""# {name}

{description or f"GPU MODE problem {task.folder.name}."}

Imported from the GPU MODE problem folder `{task.folder.name}` by `gpuarena import gpumode`;
`gpumode/` holds its files verbatim. A GPU MODE submission (`custom_kernel(data)`) runs as it is:

```bash
gpuarena run PROBLEM submission.py --device cuda
```

`data` is made by the task's `generate_input` with a seed drawn by gpuarena's harness for every
draw (task.yml's seeds, in the table, are not used). It reaches `reference()` and `solve()` as
the tensors {", ".join(f"`{n}`" for n in names)} and `{META_INPUT}`, which says how to rebuild it.

Checking: {how}.

| workload | arguments | task.yml seed | dtype | devices |
| --- | --- | --- | --- | --- |
{rows}
"""


def _write_staging(files: dict[str, str], out_dir: Path) -> Path:
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.", dir=out_dir.parent))
    for name, text in files.items():
        (staging / name).parent.mkdir(parents=True, exist_ok=True)
        (staging / name).write_text(text, encoding="utf-8")
    return staging
