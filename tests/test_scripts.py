"""scripts/setup.sh and scripts/test.sh's package steps, run by bash against stand-ins for pip,
apt-get, sudo and id that write down how they were called (nothing is installed)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import ROOT

pytestmark = pytest.mark.e2e

LOGGER = '#!/usr/bin/env bash\necho "{name} $*" >> "$CALLS"\n'


def _tool(folder: Path, name: str, body: str = "") -> None:
    path = folder / name
    path.write_text(LOGGER.format(name=name) + body)
    path.chmod(0o755)


@pytest.fixture
def checkout(tmp_path) -> Path:
    """A clone's pyproject.toml and setup.sh, with a .venv whose python only writes down its calls."""
    (tmp_path / "scripts").mkdir()
    shutil.copy(ROOT / "scripts" / "setup.sh", tmp_path / "scripts" / "setup.sh")
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    bin_ = tmp_path / ".venv" / "bin"
    bin_.mkdir(parents=True)
    (bin_ / "activate").write_text('PATH="$(pwd)/.venv/bin:$PATH"\n')
    _tool(bin_, "python", 'case "$*" in *print*) echo "torch 0 cpu" ;; esac\n')
    _tool(bin_, "bwrap")  # present: setup.sh installs no sandbox
    return tmp_path


def _setup(checkout: Path, *args: str) -> list[str]:
    calls = checkout / "calls"
    calls.unlink(missing_ok=True)
    done = subprocess.run(
        ["bash", "scripts/setup.sh", *args],
        cwd=checkout,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "CALLS": str(calls)},
    )
    assert done.returncode == 0, done.stderr
    return [line for line in calls.read_text().splitlines() if " install " in line and "--upgrade pip" not in line]


def test_setup_installs_the_server_for_serve_and_the_test_extras_by_default_each_once(checkout):
    assert _setup(checkout, "serve") == ["python -m pip install -q -e .[server]"]
    assert _setup(checkout, "serve") == []  # nothing changed: pip is not asked again
    installed = _setup(checkout)
    assert installed[0] == "python -m pip install -q -e .[test]" and "flashinfer-bench" in installed[1]
    assert len(installed) == 2
    assert _setup(checkout) == [] and _setup(checkout, "serve") == []  # the test extras hold the server's
    stamps = sorted(p.name.rsplit("-", 1)[0] for p in (checkout / ".venv").glob(".gpuarena-installed-*"))
    assert stamps == [".gpuarena-installed-serve", ".gpuarena-installed-test"]
    with (checkout / "pyproject.toml").open("a") as handle:
        handle.write("\n# changed\n")
    assert _setup(checkout, "serve") == ["python -m pip install -q -e .[server]"]
    assert _setup(checkout, "serve") == []
    assert [c.split()[-1] for c in _setup(checkout)][0] == ".[test]"


def test_setup_refuses_an_unknown_target(checkout):
    done = subprocess.run(["bash", "scripts/setup.sh", "everything"], cwd=checkout, capture_output=True, text=True)
    assert done.returncode == 2 and "usage" in done.stderr


def _apt_install(tmp_path: Path, uid: int, sudo: str | None) -> tuple[subprocess.CompletedProcess, list[str]]:
    """test.sh's own apt_install (its lines, as they are), with `id -u` giving uid and a sudo that
    asks no password (sudo="nopasswd"), one that would ask (sudo="password"), or none."""
    text = (ROOT / "scripts" / "test.sh").read_text()
    helpers = text[text.index("say() {") : text.index("bash scripts/setup.sh")]
    tools = tmp_path / "tools"
    tools.mkdir(exist_ok=True)
    _tool(tools, "id", f"echo {uid}\n")
    _tool(tools, "apt-get")
    (tools / "sudo").unlink(missing_ok=True)
    if sudo == "nopasswd":
        _tool(tools, "sudo", 'shift; [ "$1" = true ] || "$@"\n')
    elif sudo == "password":
        _tool(tools, "sudo", "echo 'sudo: a password is required' >&2; exit 1\n")
    for name in ("env", "bash"):
        if not (tools / name).exists():
            (tools / name).symlink_to(shutil.which(name) or f"/usr/bin/{name}")
    calls = tmp_path / "calls"
    calls.unlink(missing_ok=True)
    calls.touch()
    script = f"set -euo pipefail\n{helpers}\napt_install 'the browser tests' chromium || echo 'went on'\n"
    done = subprocess.run(  # PATH: the stand-ins, env and bash (not this machine's sudo or apt-get)
        [shutil.which("bash") or "/bin/bash", "-c", script],
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": str(tools), "CALLS": str(calls)},
    )
    return done, calls.read_text().splitlines()


@pytest.mark.parametrize("sudo", [None, "password"])
def test_without_root_test_sh_says_what_to_install_and_goes_on(tmp_path, sudo):
    done, calls = _apt_install(tmp_path, 1000, sudo)
    assert done.returncode == 0, done.stderr
    assert "went on" in done.stdout
    assert "sudo apt-get install chromium" in done.stderr
    assert not [c for c in calls if c.startswith("apt-get")]


def test_test_sh_installs_as_root_and_through_sudo_without_a_password(tmp_path):
    done, calls = _apt_install(tmp_path, 0, None)  # root, as CI runs it
    assert done.returncode == 0 and "went on" not in done.stdout, done.stderr
    assert [c for c in calls if c.startswith("apt-get")] == ["apt-get update -qq", "apt-get install -y -qq chromium"]
    done, calls = _apt_install(tmp_path, 1000, "nopasswd")
    assert done.returncode == 0 and "went on" not in done.stdout, done.stderr
    assert (
        "sudo -n true" in calls
        and "sudo -n env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium" in calls
    )
    assert "apt-get install -y -qq chromium" in calls


def _background_packages(tmp_path: Path, apt_body: str) -> subprocess.CompletedProcess:
    """test.sh's background install of Debian's packages and the wait before the service lane
    (its lines, as they are), as root, with an apt-get stand-in whose body is apt_body."""
    text = (ROOT / "scripts" / "test.sh").read_text()
    helpers = text[text.index("say() {") : text.index("bash scripts/setup.sh")]
    block = text[text.index('packages=""') : text.index('if [ "$lint" = 1 ]')]
    tools = tmp_path / "tools"
    tools.mkdir(parents=True)
    _tool(tools, "id", "echo 0\n")
    _tool(tools, "apt-get", apt_body)
    for name in ("env", "bash", "sleep"):
        (tools / name).symlink_to(shutil.which(name) or f"/usr/bin/{name}")
    calls = tmp_path / "calls"
    calls.touch()
    script = (
        f'set -euo pipefail\nlanes="quick service"\n{helpers}\n{block}\n'
        'echo lint ran\n: > "$CALLS.lint"\nwith_packages\necho service ran\n'
    )
    return subprocess.run(
        [shutil.which("bash") or "/bin/bash", "-c", script],
        capture_output=True,
        text=True,
        timeout=30,
        env={"PATH": str(tools), "CALLS": str(calls)},
    )


def test_debian_s_packages_install_beside_the_first_lanes_and_a_failure_stops_the_service_lane(tmp_path):
    # apt-get waits until lint has run: were the install not in the background, the script would hang
    after_lint = 'while [ ! -e "$CALLS.lint" ]; do sleep 0.05; done\n'
    slow = _background_packages(tmp_path / "slow", after_lint)
    assert slow.returncode == 0, slow.stderr
    assert slow.stdout.splitlines() == ["lint ran", "service ran"]
    assert "installing postgresql" in slow.stderr and "no PostgreSQL" in slow.stderr  # the stand-in installs nothing
    failing = _background_packages(tmp_path / "failing", 'case "$*" in *install*) exit 100 ;; esac\n')
    assert failing.returncode == 1 and "lint ran" in failing.stdout and "service ran" not in failing.stdout
    assert "apt-get could not install postgresql" in failing.stderr
    assert "installing Debian's packages failed" in failing.stderr
