"""Level-2 fusions from published model configs (issue 48): the computations between a model's
matrix multiplies, none of them a normalisation.

The harvests' level 2 is mostly RMSNorms and LayerNorms (17 of its 22 distinct computations):
the modules a harvest can isolate without a matrix multiply are norms. These problems are
written instead, as the whole layers are (dataset/layers.py): each reference plain PyTorch from
the pieces in dataset/fusion_ops*.py (copied by source, so it stands alone), with one published
model's numbers (dataset/fusion_models.py) and every tensor an input, drawn so that it matters
(dataset/fusion_list.py says which). Activations with their gates, rotary embeddings, the
attention's softmax steps, MoE routing and its glue, the LM head's side, embeddings, data
movement, quantization and two recurrences.

`write(root)` writes them as ROOT/level2/fusion-*/ (the same files every time) and, where ROOT is
a dataset (dataset.json), lists them there as kept, their harvest "published config <model>".
`python scripts/make_fusions.py -o dataset/layers` runs it.
"""

from __future__ import annotations

import ast
import inspect
import json
from collections import Counter
from pathlib import Path
from types import ModuleType
from typing import Any

from gpuarena.dataset import fusion_ops, fusion_ops_pick, fusion_ops_seq, layer_ops, written
from gpuarena.dataset.fusion_list import FUSIONS, Fusion
from gpuarena.dataset.fusion_models import MODELS
from gpuarena.problems.model import DEFAULT_TOLERANCES

PREFIX = "fusion-"
LEVEL = 2
OPS: list[ModuleType] = [fusion_ops, fusion_ops_seq, fusion_ops_pick, layer_ops]
"""Where the references' pieces come from, in the order they are copied (layer_ops lends the
sizes of shapes and DeepSeek's YaRN rotary)."""


def _functions() -> dict[str, tuple[str, str]]:
    """Every function the pieces' modules define: name -> (module, source), in OPS's order."""
    found: dict[str, tuple[str, str]] = {}
    for module in OPS:
        for name, obj in vars(module).items():
            if inspect.isfunction(obj) and obj.__module__ == module.__name__ and name not in found:
                found[name] = (module.__name__, inspect.getsource(obj))
    return found


def helpers(roots: list[str]) -> list[str]:
    """The sources of `roots` and of every piece they call (names in their code, not in their
    docstrings), in OPS's order."""
    functions = _functions()
    needed, todo = set(roots), list(roots)
    while todo:
        tree = ast.parse(functions[todo.pop()][1])
        for node in ast.walk(tree):
            if isinstance(node, ast.Name) and node.id in functions and node.id not in needed:
                needed.add(node.id)
                todo.append(node.id)
    return [source for name, (_m, source) in functions.items() if name in needed]


def reference_source(fusion: Fusion) -> str:
    """reference.py: the config, the inputs' specs, the pieces it uses, reference and make_inputs."""
    model = MODELS[fusion.model]
    names = ", ".join(fusion.inputs)
    parts = [
        f'"""{fusion.summary}.\n\n{model.title}, with the numbers of its published config ({model.source}).\n'
        "Written by gpuarena.dataset.fusions (scripts/make_fusions.py) in plain PyTorch from the published\n"
        'architecture, not harvested; every tensor is an input."""\n',
        "from __future__ import annotations\n\nimport math\nfrom typing import Any\n\nimport torch\n"
        "import torch.nn.functional as F\n\nParams = dict[str, Any]\nConfig = dict[str, Any]\n",
        f"CONFIG: Config = {json.dumps(fusion.cfg, indent=4)}\n".replace("true", "True").replace("false", "False"),
        "INPUTS: dict[str, dict[str, Any]] = {\n"
        + "".join(f"    {json.dumps(name)}: {json.dumps(spec)},\n" for name, spec in fusion.inputs.items())
        + "}\n",
        *helpers([fusion.entry, "draw"]),
        f"def reference({names}):\n    return {fusion.entry}(dict(locals()), CONFIG)\n",
        "def make_inputs(axes, dtype, device, generator):\n    return draw(INPUTS, axes, dtype, device, generator)\n",
    ]
    return "\n\n".join(part.rstrip("\n") + "\n" for part in parts)


def operator(fusion: Fusion) -> str:
    """The provenance's operator: the piece's name, which distinct.kind reads its op family from."""
    module = _functions()[fusion.entry][0]
    return f"{fusion.entry} (plain PyTorch from the published architecture; {module})"


def problem_spec(fusion: Fusion) -> dict[str, Any]:
    """problem.toml as a dict: workloads at the real size (GPU) and small (CPU), formulas,
    provenance naming the published config, the layers' flat weight."""
    model = MODELS[fusion.model]
    config = ", ".join(f"{k} {v}" for k, v in model.published.items())
    workloads = [
        {"name": "small", "axes": fusion.small, "dtype": fusion.dtype, "weight": 1.0, "devices": ["cpu"]},
        {"name": f"{fusion.model}-{fusion.label}", "axes": fusion.full, "dtype": fusion.dtype, "weight": 1.0,
         "devices": ["cuda"]},
    ]  # fmt: skip
    spec: dict[str, Any] = {
        "name": fusion.name,
        "level": LEVEL,
        "summary": f"{model.title}: {fusion.summary}.",
        "tags": ["fusion", "published-config", fusion.model.split("-")[0], fusion.model, fusion.family],
        "weight": written.WEIGHT,
        "convention": "return",
        "outputs": fusion.outputs,
        "bytes": fusion.moved,
        "flops": fusion.flops,
        "provenance": {
            "framework": "pytorch",
            "operator": operator(fusion),
            "models": [f"{model.title} ({model.source}: {config}); published config, not a harvest measurement"],
        },
    }
    if fusion.tolerance:
        base = DEFAULT_TOLERANCES[fusion.dtype].model_dump(exclude={"outside"})
        spec["tolerance"] = {fusion.dtype: {**base, **fusion.tolerance}}
    spec["workloads"] = workloads
    return spec


def write_fusion(fusion: Fusion, root: Path) -> Path:
    """Write one problem folder (replacing an earlier one)."""
    return written.write_folder(
        Path(root) / f"level{LEVEL}" / fusion.name, problem_spec(fusion), reference_source(fusion)
    )


def write(root: Path, fusions: list[Fusion] | None = None) -> list[Path]:
    """Write every fusion problem under root (fusion-* folders of earlier runs that are no longer
    made are removed), and list them in root/dataset.json where root is a dataset."""
    if fusions is None:
        written.clear(root, PREFIX)
    chosen = FUSIONS if fusions is None else fusions
    folders = [write_fusion(fusion, root) for fusion in chosen]
    written.register(root, {f"level{LEVEL}/{fusion.name}": MODELS[fusion.model].title for fusion in chosen})
    return folders


def families(fusions: list[Fusion] | None = None) -> Counter[str]:
    """How many fusions each coarse op family holds."""
    return Counter(f.family for f in (FUSIONS if fusions is None else fusions))
