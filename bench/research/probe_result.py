"""A probe's result: printed, and written as JSON where --out names a file (kept in results/)."""

from __future__ import annotations

import argparse
import json
from typing import Any


def out_path(doc: str) -> str | None:
    """The probe's one option, --out FILE (its docstring's first line is its help)."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--out", default=None, help="write the result as JSON here too")
    return parser.parse_args().out


def emit(result: Any, out: str | None) -> None:
    print(json.dumps(result, indent=1))
    if out:
        with open(out, "w") as handle:
            json.dump(result, handle, indent=1)
