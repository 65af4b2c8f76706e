"""The options that pick a subset of problems (problems/select.py), the same on every command
that takes many: --match, --level, --tag, --model, --source."""

from __future__ import annotations

from typing import Annotated

import typer

Match = Annotated[
    list[str] | None,
    typer.Option(
        "--match", "--problems", help="Only problems whose id matches this shell pattern, e.g. 'level1/*' (repeatable)"
    ),
]
Level = Annotated[list[int] | None, typer.Option("--level", help="Only this level (repeatable)")]
Tag = Annotated[list[str] | None, typer.Option("--tag", help="Only problems with this tag (repeatable)")]
Model = Annotated[
    list[str] | None,
    typer.Option("--model", help="Only problems whose provenance names a model containing this, any case (repeatable)"),
]
Source = Annotated[
    list[str] | None,
    typer.Option(
        "--source", help="Only problems whose reference is written in this framework: pytorch, jax, ... (repeatable)"
    ),
]
