"""The test lanes (a pytest plugin, loaded by tests/conftest.py).

Every test runs in exactly one lane, named by its marker:
- quick: no worker process, no server, no browser, no PostgreSQL (the default);
- harness: a real supervisor and sandboxed worker (`judge`, `evaluate`, the red-team corpus;
  the GPU tests, `pytest -m gpu` on a GPU machine, unless marked otherwise);
- service: the database on SQLite and PostgreSQL, the API in process;
- e2e: real servers, runners, Chromium, the CLI as a subprocess.

A test without a marker is put in its lane by the fixtures it asks for (a database makes it a
service test, a served site an e2e test), else it is quick. A quick test that starts a Python
interpreter, a sandbox, a browser or a server anyway fails and says which lane to mark it with:
the quick lane stays quick by construction, not by review. `scripts/test.sh` runs the lanes
and prints each lane's slowest tests."""

from __future__ import annotations

import os
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

LANES = ("quick", "harness", "service", "e2e")
DESCRIPTIONS = {
    "quick": "no worker process, no server, no browser, no PostgreSQL (the default lane)",
    "harness": "a real supervisor and sandboxed worker process",
    "service": "the database on SQLite and PostgreSQL, the API in process",
    "e2e": "real servers, runners, Chromium, CLIs as subprocesses",
}
E2E_FIXTURES = {"server", "served", "env", "deployed", "browser", "page"}
"""Fixtures that start real servers or a browser (tests/web, tests/service's end-to-end)."""
SERVICE_FIXTURES = {"database_url", "db", "api", "settings", "site", "database_templates"}
"""Fixtures that give a test a database (SQLite and PostgreSQL)."""
SLOWEST = 25
_LANE = pytest.StashKey[str]()


def lane_of(item: pytest.Item) -> str:
    """The item's lane: its marker, else what its fixtures imply, else quick."""
    marked = [lane for lane in LANES if item.get_closest_marker(lane)]
    if len(marked) > 1:
        raise pytest.UsageError(f"{item.nodeid} is marked for lanes {marked}: one lane a test")
    if marked:
        return marked[0]
    if item.get_closest_marker("gpu"):
        return "harness"  # GPU tests judge on the GPU (run there with `pytest -m gpu`)
    fixtures = set(getattr(item, "fixturenames", ()))
    if fixtures & E2E_FIXTURES:
        return "e2e"
    if fixtures & SERVICE_FIXTURES:
        return "service"
    return "quick"


def pytest_configure(config: pytest.Config) -> None:
    for lane, description in DESCRIPTIONS.items():
        config.addinivalue_line("markers", f"{lane}: test lane: {description}")
    if os.environ.get("PYTEST_XDIST_WORKER"):
        # a temporary folder of each test process's own: the red-team's leak records live there,
        # and one process's cleanup must never kill what another process's case is judged on
        os.environ["TMPDIR"] = tempfile.mkdtemp(prefix=f"tests-{os.environ['PYTEST_XDIST_WORKER']}-")
        tempfile.tempdir = None
        # no terminal here: the 80x24 a test process inherits would cut the CLI's tables short
        # (a test that wants a width sets COLUMNS itself, as a user would)
        for name in ("COLUMNS", "LINES"):
            os.environ.pop(name, None)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        lane = lane_of(item)
        item.stash[_LANE] = lane
        if not item.get_closest_marker(lane):
            item.add_marker(lane)  # so that `-m quick` selects it


def _forbidden_in_quick(args: object) -> str | None:
    """What a quick test may not start, named, or None: a worker (the sandbox's entry, or
    bubblewrap), the gpuarena CLI, a server or a runner, a browser, PostgreSQL. Short helper
    programs (a compiler, `python -c`, a fake sampler) are allowed."""
    argv = [args] if isinstance(args, (str, bytes, os.PathLike)) else list(args)
    if not argv:
        return None
    words = [os.fsdecode(a) for a in argv]
    program = Path(words[0]).name
    line = " ".join(words)
    for needle, what in (
        ("gpuarena.harness.inside.sandbox", "a worker"),
        ("gpuarena.harness.inside.worker", "a worker"),
        ("gpuarena.runner", "a runner's job process"),
        ("gpuarena.cli", "the gpuarena CLI"),
    ):
        if needle in line:
            return what
    for name, what in (
        ("bwrap", "a worker's sandbox"),
        ("chrom", "a browser"),
        ("postgres", "PostgreSQL"),
        ("pg_ctl", "PostgreSQL"),
        ("gpuarena", "the gpuarena CLI"),
    ):
        if name in program:
            return what
    return None


@pytest.fixture(autouse=True)
def _lane_guard(request: pytest.FixtureRequest) -> Iterator[None]:
    """In the quick lane, starting what the lane excludes fails the test with the lane to mark."""
    if request.node.stash.get(_LANE, "quick") != "quick":
        yield
        return
    started: list[str] = []
    original = subprocess.Popen.__init__

    def guarded(self, args, *rest, **options):
        what = _forbidden_in_quick(args)
        if what:
            started.append(what)
        return original(self, args, *rest, **options)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(subprocess.Popen, "__init__", guarded)
        yield
    if started:
        pytest.fail(
            f"{request.node.nodeid} is in the quick lane but started {started[0]}: mark it "
            "`@pytest.mark.harness` (a worker) or `@pytest.mark.e2e` (servers, CLIs, browsers)",
            pytrace=False,
        )


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    """Each lane's slowest tests (setup, call and teardown together), and its count and time."""
    durations: dict[str, dict[str, float]] = {lane: {} for lane in LANES}
    for reports in terminalreporter.stats.values():
        for report in reports:
            lane = _report_lane(report)
            if lane is None:
                continue
            durations[lane][report.nodeid] = durations[lane].get(report.nodeid, 0.0) + report.duration
    if not any(durations.values()):
        return
    terminalreporter.write_sep("=", "lanes")
    for lane in LANES:
        tests = durations[lane]
        if not tests:
            continue
        total = sum(tests.values())
        terminalreporter.write_line(f"{lane}: {len(tests)} tests, {total:.0f} s of test time")
    for lane in LANES:
        tests = durations[lane]
        if not tests:
            continue
        terminalreporter.write_sep("-", f"{lane}: the {min(SLOWEST, len(tests))} slowest")
        for nodeid, seconds in sorted(tests.items(), key=lambda kv: -kv[1])[:SLOWEST]:
            terminalreporter.write_line(f"{seconds:8.2f}s  {nodeid}")


def _report_lane(report: object) -> str | None:
    """The lane a test report belongs to (kept in its user properties, which cross xdist)."""
    if getattr(report, "when", None) not in ("setup", "call", "teardown"):
        return None
    for key, value in getattr(report, "user_properties", ()):
        if key == "lane":
            return str(value)
    return None


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    item.user_properties.append(("lane", item.stash.get(_LANE, "quick")))
