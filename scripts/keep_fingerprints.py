"""Write src/gpuarena/dataset/bundled_fingerprints.json: the bundled problems' canonical
fingerprints under this code's key (dataset/kept_fingerprints.py). Run it after changing a
bundled problem or the fingerprint code; tests/dataset/test_kept_fingerprints.py says when.

    .venv/bin/python scripts/keep_fingerprints.py
"""

from __future__ import annotations

from gpuarena.bundled import bundled_root
from gpuarena.dataset import kept_fingerprints
from gpuarena.dataset.fingerprint import fingerprints
from gpuarena.problems.loader import discover
from gpuarena.problems.pack import pack_problem


def main() -> None:
    taken = {
        pack_problem(p).hash: fingerprints(p, canonical=True)
        for p in discover(bundled_root())
        if p.spec.provenance.framework != "jax"  # JAX's fingerprints: not kept
    }
    kept_fingerprints.write(taken)
    print(f"kept the fingerprints of {len(taken)} problems in {kept_fingerprints.KEPT}")


if __name__ == "__main__":
    main()
