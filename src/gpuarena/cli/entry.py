"""The `gpuarena` console script: a judging run starts its worker first (cli/early.py), then the
CLI runs as usual."""

from __future__ import annotations

import sys

from gpuarena.cli import early


def _option(args: list[str], name: str) -> str | None:
    for i, arg in enumerate(args):
        if arg == name and i + 1 < len(args):
            return args[i + 1]
        if arg.startswith(name + "="):
            return arg.split("=", 1)[1]
    return None


def main() -> None:
    """`gpuarena`: a judging run starts its worker first, then the CLI runs as usual."""
    args = sys.argv[1:]
    if args[:1] == ["run"] and _option(args, "--mode") != "profile" and not {"--help", "-h"} & set(args):
        early.start(_option(args, "--device"))
    from gpuarena.cli.app import main as app_main

    app_main()
