"""`pip install gpuarena` is the judge and the CLI; `gpuarena[server]` adds the service. The CLI
runs where the service's packages cannot be imported at all, and the service's commands say
which extra to install instead of failing with a traceback."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path

import pytest

from conftest import EXAMPLES, ROOT
from gpuarena.cli.console import SERVER_INSTALL, SERVER_MODULES

PACKAGE = ROOT / "src" / "gpuarena"
BLOCKED = (*SERVER_MODULES, "multipart", "starlette")
"""The service's modules, and starlette, which comes only with fastapi."""

BLOCKER = f"""
import sys

BLOCKED = {BLOCKED!r}


class NoService:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named {{name!r}} (not installed here)", name=name)
        return None


sys.meta_path.insert(0, NoService())
"""


def _requirement_name(requirement: str) -> str:
    return re.split(r"[<>=!~\[; ]", requirement, maxsplit=1)[0].lower().replace("_", "-")


def _project() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def test_the_base_install_leaves_the_service_out_and_the_server_extra_has_it():
    project = _project()
    base = {_requirement_name(r) for r in project["dependencies"]}
    extras = project["optional-dependencies"]
    server = {_requirement_name(r) for r in extras["server"]}
    assert {"torch", "numpy", "pydantic", "typer", "rich", "httpx", "pyyaml"} <= base
    assert {"fastapi", "uvicorn", "sqlalchemy", "alembic", "python-multipart", "itsdangerous"} <= server
    assert not base & server
    assert "gpuarena[server]" in extras["test"]
    # every package of the extra is one the CLI checks for, by the module it installs
    modules = packages_distributions()
    checked = {dist.lower().replace("_", "-") for m in SERVER_MODULES for dist in modules.get(m, [])}
    assert server <= checked, server - checked


def test_only_the_service_and_its_commands_import_the_service_s_packages():
    """Outside gpuarena.service, only the commands that run it (cli/service_cli.py, and
    cli/serve.py, which composes it with a runner) import what the server extra installs, at
    any depth (a lazy import too)."""
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE).as_posix()
        if relative.startswith("service/") or relative in ("cli/service_cli.py", "cli/serve.py"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom) and not node.level
                else []
            )
            offenders += [f"{relative}:{node.lineno} {n}" for n in names if n.split(".")[0] in BLOCKED]
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("gpuarena.service"):
                service_module = PACKAGE / Path(*node.module.split(".")[1:])
                for file in (service_module.with_suffix(".py"), service_module / "__init__.py"):
                    if file.is_file() and _imports_server_packages(file):
                        offenders.append(f"{relative}:{node.lineno} {node.module}")
    assert not offenders, offenders


def _imports_server_packages(path: Path) -> bool:
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import) and any(a.name.split(".")[0] in BLOCKED for a in node.names):
            return True
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in BLOCKED:
            return True
    return False


@pytest.fixture
def without_service(tmp_path) -> dict[str, str]:
    """An environment whose Python processes (the CLI and the workers it starts) cannot import
    any of the service's packages, as after `pip install gpuarena` without the extra."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(BLOCKER)
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(site), env.get("PYTHONPATH")]))
    env["GPUARENA_HOME"] = str(tmp_path / "home")
    env["HOME"] = str(tmp_path)
    return env


def gpuarena(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "gpuarena", *args], cwd=ROOT, capture_output=True, text=True, timeout=300, env=env
    )


@pytest.mark.e2e
def test_the_cli_judges_without_the_service_s_packages(without_service):
    for module in BLOCKED:
        probe = subprocess.run([sys.executable, "-c", f"import {module}"], capture_output=True, env=without_service)
        assert probe.returncode == 1, f"{module} imports: the environment does not stand for a base install"
    listed = gpuarena(without_service, "list")
    assert listed.returncode == 0, listed.stderr
    assert "level1/softmax" in listed.stdout
    run = gpuarena(
        without_service, "run", "level1/softmax", str(EXAMPLES / "softmax" / "pytorch.py"), "--device", "cpu",
        "--mode", "test",
    )  # fmt: skip
    assert run.returncode == 0, run.stdout + run.stderr
    assert "verdict: PASSED" in run.stdout
    checked = gpuarena(without_service, "check", "level1/softmax")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    for client in ("submit", "runner", "leaderboard"):  # the client commands talk HTTP (httpx) only
        helped = gpuarena(without_service, client, "--help")
        assert helped.returncode == 0 and "Usage" in helped.stdout, helped.stderr


@pytest.mark.e2e
@pytest.mark.parametrize("command", [["serve"], ["db", "upgrade"], ["users", "list"], ["tokens", "list", "admin"]])
def test_the_service_s_commands_name_the_extra_to_install(without_service, command):
    done = gpuarena(without_service, *command)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    assert f"`gpuarena {' '.join(command[:2])}` runs the service" in done.stderr
    assert SERVER_INSTALL in done.stderr and SERVER_INSTALL == "pip install 'gpuarena[server]'"
    assert not (Path(without_service["GPUARENA_HOME"]) / "gpuarena.db").exists()
