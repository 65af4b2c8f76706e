"""Print a harvest's top operator groups by time share (for notes and bench/results):
`python bench/harvest_top.py DIR [--n 12]`, DIR being a `gpuarena harvest -o` folder."""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("folder", type=Path)
    parser.add_argument("--n", type=int, default=12)
    args = parser.parse_args()
    report = json.loads((args.folder / "harvest.json").read_text())
    groups = sorted(report["groups"], key=lambda g: -g["share"])
    counts: dict[str, int] = {}
    for g in groups:
        counts[g["status"]] = counts.get(g["status"], 0) + 1
    print(
        f"{report['model']} {report['phase']} {report['sizes']} on {report['device']}: {len(groups)} groups "
        f"({', '.join(f'{n} {s}' for s, n in sorted(counts.items()))}); command: {report['command']}"
    )
    print(f"{'share':>7} {'ms/fwd':>8} {'calls':>5}  {'status':<11} op and shapes")
    for kind in ("op", "module"):
        if kind == "module":
            print("submodules (fusions: levels 2-4; a module's share holds its ops' shares):")
        for g in [g for g in groups if g.get("kind", "op") == kind][: args.n]:
            shapes = ""
            if kind == "op":
                shapes = _shapes(json.loads(g["signature"]))
            elif g["status"] == "written":
                shapes = f"level {g['level']}"
            elif g["reasons"]:
                shapes = g["reasons"][0][:90]
            per_forward_ms = 1e3 * g["seconds"] / report["repeats"]
            print(f"{g['share']:7.1%} {per_forward_ms:8.3f} {g['calls']:5d}  {g['status']:<11} {g['op']} {shapes}")


def _shapes(signature: list) -> str:
    """A PyTorch group's [op, [(name, [shape, dtype, ...]), ...]] or a JAX one's [kind, op, lines,
    [[shape, dtype] or a constant, ...]], as name=AxB:dtype (JAX's inputs unnamed)."""
    if len(signature) == 2:
        return " ".join(
            f"{name}={'x'.join(map(str, value[0]))}:{value[1]}"
            for name, value in ((a[0], a[1]) for a in signature[1])
            if isinstance(value, list) and len(value) == 3 and isinstance(value[0], list)
        )
    return " ".join(
        f"{'x'.join(map(str, a[0]))}:{a[1]}"
        for a in signature[-1]
        if isinstance(a, list) and len(a) == 2 and isinstance(a[0], list)
    )


if __name__ == "__main__":
    main()
