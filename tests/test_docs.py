"""The docs against the code (as Datasette tests its docs): every relative link in the README,
docs/ and bench/'s pages reaches a file, every `gpuarena ...` line of their shell blocks names a command
that exists, with options that command has, and every GPUARENA_* variable that the code, its
scripts and its deployment files read is on docs/environment.md (and nothing else is), and
bench/results/README.md indexes every result file. A renamed command or option, or a new
variable, fails here, not in a reader's terminal."""

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
# bench/'s pages too: its README, the measured figures, its folders' READMEs (the results index
# among them), not the result files themselves
BENCH_PAGES = [*(ROOT / "bench").glob("*.md"), *(ROOT / "bench").glob("*/README.md")]
PAGES = sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md"), *BENCH_PAGES])
LINK = re.compile(r"\]\(([^)\s]+)\)")
BLOCK = re.compile(r"```(?:bash|sh|console)\n(.*?)```", re.S)


def _links(page: Path) -> list[str]:
    return [target for target in LINK.findall(page.read_text()) if not re.match(r"[a-z]+:", target)]


def _missing(page: Path) -> list[str]:
    """The page's relative links whose file does not exist (anchors within the page left out)."""
    return [t for t in _links(page) if not t.startswith("#") and not (page.parent / t.split("#", 1)[0]).exists()]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_reaches_a_file(page: Path) -> None:
    assert not _missing(page), f"{page.name} links to files that do not exist: {_missing(page)}"


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


VARIABLE = re.compile(r"(?<![A-Za-z0-9_])GPUARENA_[A-Z0-9_]*[A-Z0-9]")
READERS = ("src", "scripts", "deploy", ".ci")
ALSO_READ = ("bench", "tests")  # a documented variable may be read only there (development's)


def _variables(*folders: str) -> set[str]:
    found: set[str] = set()
    for folder in folders:
        for path in (ROOT / folder).rglob("*"):
            if (
                path.is_file()
                and path.suffix in {".py", ".sh", ".yaml", ".yml", ".toml", ".sbatch", ".conf", ""}
                and "__pycache__" not in path.parts
            ):
                found |= set(VARIABLE.findall(path.read_text(errors="replace")))
    return found


def test_every_variable_the_code_reads_is_documented_and_every_documented_one_is_read() -> None:
    documented = set(VARIABLE.findall((ROOT / "docs" / "environment.md").read_text()))
    read = _variables(*READERS)
    assert not read - documented, f"read but not on docs/environment.md: {sorted(read - documented)}"
    unread = documented - read - _variables(*ALSO_READ)
    assert not unread, f"on docs/environment.md but read nowhere: {sorted(unread)}"


def test_the_variable_check_finds_one_in_code() -> None:
    assert VARIABLE.findall('os.environ.get("GPUARENA_NEW_KNOB", "1") and _GPUARENA_DEFINITION') == [
        "GPUARENA_NEW_KNOB"
    ]


def test_the_link_check_finds_a_dead_path(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    (tmp_path / "here.md").write_text("")
    page.write_text("[ok](here.md#part) [gone](bench/gpu_run.sh) [web](https://example.org) [anchor](#top)")
    assert _missing(page) == ["bench/gpu_run.sh"]


def test_the_cli_reference_is_current() -> None:
    """docs/cli.md is what scripts/cli_reference.py prints: regenerate it after changing a command."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("cli_reference", ROOT / "scripts" / "cli_reference.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert (ROOT / "docs" / "cli.md").read_text() == module.reference(), (
        "docs/cli.md is stale: .venv/bin/python scripts/cli_reference.py > docs/cli.md"
    )


def _bench_index():
    import importlib.util

    spec = importlib.util.spec_from_file_location("bench_index", ROOT / "scripts" / "bench_index.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_results_index_is_current() -> None:
    """bench/results/README.md is what scripts/bench_index.py writes: one row per result file."""
    assert _bench_index().is_current(ROOT / "bench" / "results"), (
        "bench/results/README.md is stale: .venv/bin/python scripts/bench_index.py"
    )


def test_the_index_check_finds_a_new_result_file(tmp_path: Path) -> None:
    module = _bench_index()
    (tmp_path / "warm-path-NVIDIA-H200-2026-11-30.json").write_text('{"command": "python3 bench/warm_path.py --n 3"}')
    (tmp_path / "service-4xH200.md").write_text("# Service\n\nCommand: `python3 bench/service.py --note x|y`\n")
    module.write(tmp_path)
    assert module.is_current(tmp_path)
    service, warm = module.rows(tmp_path)  # by name
    assert (warm.made_by, warm.machine, warm.date, warm.command) == (
        "bench/warm_path.py",
        "NVIDIA-H200",
        "2026-11-30",
        "python3 bench/warm_path.py --n 3",
    )
    assert (service.machine, service.command) == ("4xH200", "python3 bench/service.py --note x|y")
    assert "`python3 bench/service.py --note x\\|y`" in (tmp_path / "README.md").read_text()  # the table holds
    (tmp_path / "eval-latency-cpu-vm.json").write_text("{}")  # a new result, not in the index
    assert not module.is_current(tmp_path)
