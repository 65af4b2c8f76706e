"""Write docs/cli.md, the reference of every `gpuarena` command, from the CLI itself:

    .venv/bin/python scripts/cli_reference.py > docs/cli.md

tests/test_docs.py fails when the page differs from what this prints (a command or option
added, renamed or re-described without the page), so the reference cannot drift."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Any

import typer

from gpuarena.cli.app import app


def _commands(command: Any, path: list[str]) -> Iterator[tuple[list[str], Any]]:
    subcommands = getattr(command, "commands", None)
    if subcommands is None:
        yield path, command
        return
    if path:
        yield path, command
    for name in sorted(subcommands):
        if not subcommands[name].hidden:
            yield from _commands(subcommands[name], [*path, name])


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _summary(command: Any) -> str:
    return _cell((command.help or "").split("\n\n")[0])


def _default(param: Any) -> str:
    if param.required:
        return "required"
    value = param.default
    if value is None or value == () or callable(value):
        return ""
    if isinstance(value, bool):
        return "on" if value else "off"
    return _cell(f"`{value}`")


def reference() -> str:
    root = typer.main.get_command(app)
    lines = [
        "# The `gpuarena` commands",
        "",
        "Generated from the CLI by `scripts/cli_reference.py` (`tests/test_docs.py` checks it is",
        "current); `gpuarena COMMAND --help` says the same. Variables: [environment.md](environment.md).",
        "",
        "| command | what it does |",
        "| --- | --- |",
    ]
    leaves = []
    for path, command in _commands(root, []):
        lines.append(f"| `gpuarena {' '.join(path)}` | {_summary(command)} |")
        if not hasattr(command, "commands"):
            leaves.append((path, command))
    for path, command in leaves:
        arguments = [p for p in command.params if p.param_type_name == "argument"]
        options = [p for p in command.params if p.param_type_name == "option" and p.name != "help"]
        usage = " ".join(["gpuarena", *path, *(a.name.upper() for a in arguments), "[OPTIONS]" if options else ""])
        lines += ["", f"## gpuarena {' '.join(path)}", "", _cell(command.help or ""), "", f"`{usage.strip()}`"]
        if options:
            lines += ["", "| option | what it sets | default |", "| --- | --- | --- |"]
            for option in options:
                names = ", ".join(f"`{n}`" for n in [*option.opts, *option.secondary_opts])
                variable = f" (`{option.envvar}`)" if isinstance(option.envvar, str) else ""
                lines.append(f"| {names}{variable} | {_cell(option.help or '')} | {_default(option)} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.stdout.write(reference())
