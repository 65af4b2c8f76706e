"""KernelBench into gpuarena, writing: an imported problem's problem.toml and README.md, for
interop/kernelbench.py."""

from __future__ import annotations

import json

from gpuarena.interop.gpumode_needs import required_packages  # a package the file imports: `requires`
from gpuarena.interop.kernelbench_read import SEED, _File, uses_transformers

TOLERANCE = {"float32": (1e-4, 1e-4), "float16": (1e-2, 5e-3), "bfloat16": (1e-2, 1e-2)}
"""dtype -> (KernelBench's atol = rtol for it, gpuarena's default L2 bound for it)."""

Workloads = list[tuple[str, dict[str, int], str, list[str]]]
"""(name, sizes, dtype, devices) of each workload written."""


def _toml_str(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)


def problem_toml(file: _File, name: str, level: int, outputs: list[str], workloads: Workloads) -> str:
    lines = [
        f"# Imported from the KernelBench problem {_toml_str(file.path.name)} by `gpuarena import kernelbench`.",
        f"name = {_toml_str(name)}",
        f"level = {level}",
        f"summary = {_toml_str(file.summary)}",
        'tags = ["kernelbench"]',
        'convention = "return"',
        f"outputs = [{', '.join(_toml_str(o) for o in outputs)}]",
        *(
            [f"requires = [{', '.join(_toml_str(r) for r in required)}]"]
            if (required := required_packages(file.source))
            else []
        ),
        *(
            ["seeded_calls = true  # its forward draws from torch's generator: seeded before every call"]
            if file.seeded_calls
            else []
        ),
        "",
        "[provenance]",
        'framework = "kernelbench"',
        f"operator = {_toml_str(file.path.name)}",
        "",
        "# KernelBench's tolerance for the dtype (atol = rtol); l2 is gpuarena's default bound",
    ]
    for dtype in sorted({w[2] for w in workloads}):
        tol, l2 = TOLERANCE[dtype]
        lines += [f"[tolerance.{dtype}]", f"atol = {tol!r}", f"rtol = {tol!r}", f"l2 = {l2!r}", ""]
    for workload_name, sizes, dtype, devices in workloads:
        axes = ", ".join(f"{k} = {v}" for k, v in sizes.items())
        lines += [
            "[[workloads]]",
            f"name = {_toml_str(workload_name)}",
            f"axes = {{ {axes} }}",
            f"dtype = {_toml_str(dtype)}",
            f"devices = [{', '.join(_toml_str(d) for d in devices)}]",
            "",
        ]
    return "\n".join(lines)


def readme(file: _File, name: str, workloads: Workloads) -> str:
    rows = "\n".join(
        f"| {w} | {', '.join(f'{k}={v}' for k, v in s.items()) or '-'} | {d} | {', '.join(dv)} |"
        for w, s, d, dv in workloads
    )
    return f"""# {name}

{file.summary}

Imported from the KernelBench problem file `{file.path.name}` by `gpuarena import kernelbench`;
`reference.py` holds it verbatim. A KernelBench solution file (`class ModelNew`) runs as it is:

```bash
gpuarena run PROBLEM model_new.py --device cuda
```

Both modules are built as KernelBench builds them: `torch.manual_seed({SEED})`, then
`Model(*get_init_inputs())`, once per workload; a ModelNew that makes its parameters in the
same order as Model gets the same ones. Forward's inputs are drawn fresh for every call set.
{_hub_note(file)}
| workload | sizes | dtype | devices |
| --- | --- | --- | --- |
{rows}
"""


def _hub_note(file: _File) -> str:
    """What the README says of a file's Hugging Face models (level 4): how they are built."""
    if not uses_transformers(file.source):
        return ""
    names = ", ".join(f"`{n}`" for n in file.hub) or "Its Hugging Face models"
    return (
        f"\n{names}: built offline, from gpuarena's table of the published config, with random weights "
        "from the seed (the hub is never asked; the forward's cost does not depend on the weights). The "
        "`hf_*` axes are config sizes: published in `kernelbench`, the same architecture smaller in "
        "`cpu-small`.\n"
    )
