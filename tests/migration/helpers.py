"""Small apps written on the fly: an app.toml and one Python file."""

from __future__ import annotations

import textwrap
from pathlib import Path

TENSOR_OUT = """
[[outputs]]
file = "y.npy"
kind = "tensor"
compare = { kind = "tolerance", atol = 1e-6, rtol = 0.0 }
"""


def make_app(
    folder: Path,
    code: str,
    toml_extra: str = "",
    outputs: str = TENSOR_OUT,
    name: str = "t",
    run: str = 'entry = "app.py:main"',
    top: str = "repeats = 1\ntime_limit_s = 30",
) -> Path:
    """Write folder/app.py (code, dedented) and folder/app.toml; returns folder."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "app.py").write_text(textwrap.dedent(code))
    (folder / "app.toml").write_text(f'name = "{name}"\n{top}\n{toml_extra}\n[run]\n{run}\n{outputs}')
    return folder


def tensor_app(
    folder: Path, values: str = "[1.0, 2.0, 3.0]", figure: str | None = None, name: str = "t", extra_code: str = ""
) -> Path:
    """An app writing y.npy = values and, with figure, perf.json {"tokens_per_s": figure}."""
    perf = f"(out / 'perf.json').write_text(json.dumps({{'tokens_per_s': {figure}}}))" if figure else ""
    toml = (
        '[performance]\nname = "tokens_per_s"\njson_file = "perf.json"\njson_key = "tokens_per_s"\n' if figure else ""
    )
    code = f"""
        import json, os
        from pathlib import Path
        import numpy as np

        def main():
            out = Path(os.environ["GPUARENA_APP_OUTPUT"])
            np.save(out / "y.npy", np.array({values}, dtype=np.float32))
            {perf}
            {extra_code}
        """
    return make_app(folder, code, toml, name=name)
