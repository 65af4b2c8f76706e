"""The docs against the code (as Datasette tests its docs): every relative link in the README
and docs/ reaches a file, and every `gpuarena ...` line of their shell blocks names a command
that exists, with options that command has. A renamed command or option fails here, not in a
reader's terminal."""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

import pytest
import typer

from gpuarena.cli.app import app

pytestmark = pytest.mark.quick

ROOT = Path(__file__).resolve().parents[1]
PAGES = sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md")])
LINK = re.compile(r"\]\(([^)\s]+)\)")
BLOCK = re.compile(r"```(?:bash|sh|console)\n(.*?)```", re.S)


def _links(page: Path) -> list[str]:
    return [target for target in LINK.findall(page.read_text()) if not re.match(r"[a-z]+:", target)]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_relative_link_reaches_a_file(page: Path) -> None:
    missing = [t for t in _links(page) if not (page.parent / t.split("#", 1)[0]).exists() and not t.startswith("#")]
    assert not missing, f"{page.name} links to files that do not exist: {missing}"


def _command_lines(page: Path) -> list[str]:
    """Lines of the page's shell blocks that run gpuarena (after an env prefix or `&&`)."""
    found = []
    for block in BLOCK.findall(page.read_text()):
        for line in block.replace("\\\n", " ").splitlines():
            for part in re.split(r"&&|;|\|", line.split("  #", 1)[0]):
                words = part.strip().split()
                while words and re.match(r"^[A-Z_][A-Z0-9_]*=", words[0]):
                    words = words[1:]
                if words[:1] == ["gpuarena"]:
                    found.append(" ".join(words))
    return found


def _check(line: str, root: Any) -> str | None:
    """Why a documented command line does not fit the CLI, or None."""
    try:
        words = shlex.split(line.replace("[", "").replace("]", "").replace("|", " "))[1:]
    except ValueError:
        return None  # a placeholder the shell could not read either; the prose explains it
    command = root  # typer's own click: walked by what it has, not by class
    while hasattr(command, "commands") and words and not words[0].startswith("-"):
        sub = command.commands.get(words[0])
        if sub is None:
            return f"no command {words[0]!r}"
        command, words = sub, words[1:]
    known = {opt for param in command.params for opt in (*param.opts, *param.secondary_opts)}
    known |= {"--help"}
    unknown = [w.split("=", 1)[0] for w in words if w.startswith("--") and w.split("=", 1)[0] not in known]
    return f"no option {unknown} for {command.name!r}" if unknown else None


CLI = typer.main.get_command(app)
CASES = [(page, line) for page in PAGES for line in _command_lines(page)]


def test_the_pages_show_commands() -> None:
    """The walk below has something to check (the pages hold about a hundred commands)."""
    assert len(CASES) > 80


@pytest.mark.parametrize(("page", "line"), CASES, ids=[f"{p.name}:{i}" for i, (p, _) in enumerate(CASES)])
def test_every_documented_command_exists(page: Path, line: str) -> None:
    assert _check(line, CLI) is None, f"{page.name}: `{line}`: {_check(line, CLI)}"


def test_the_check_finds_a_wrong_command_and_a_wrong_option() -> None:
    assert _check("gpuarena contest standings SLUG --live", CLI) is None
    assert "no command 'standing'" in (_check("gpuarena contest standing SLUG", CLI) or "")
    assert "--alive" in (_check("gpuarena contest standings SLUG --alive", CLI) or "")
