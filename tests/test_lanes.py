"""The test lanes (tests/lanes.py) hold: a test's marker or fixtures put it in one lane, a quick
test that starts what the quick lane excludes fails and names the lane to mark, and every lane
prints its slowest tests. Run on a small suite of its own through pytester (in process)."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest_plugins = ["pytester"]
ROOT = Path(__file__).resolve().parents[1]

SUITE = """
import subprocess
import sys

import pytest


@pytest.fixture
def db():
    return "a database"


def test_plain():
    assert True


def test_with_a_database(db):
    assert db


@pytest.mark.harness
def test_marked_harness():
    subprocess.run([sys.executable, "-c", "pass", "gpuarena.harness.inside.sandbox"], check=True)


@pytest.mark.gpu
def test_on_a_gpu():
    assert True


def test_a_helper_program_is_fine():
    subprocess.run([sys.executable, "-c", "pass"], check=True)


def test_starts_a_worker_unmarked():
    subprocess.run([sys.executable, "-c", "pass", "gpuarena.harness.inside.sandbox"], check=True)
"""


def _run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    """The suite in a pytest process of its own: what its tests start is that process's, not
    this quick test's (whose own guard would count it)."""
    pytester.makepyfile(test_suite=SUITE)
    return pytester.runpytest_subprocess("-p", "tests.lanes", "-p", "no:cacheprovider", *args)


@pytest.fixture(autouse=True)
def _lanes_importable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTHONPATH", str(ROOT))


def test_each_test_gets_one_lane_by_marker_fixture_or_default(pytester: pytest.Pytester) -> None:
    picked = {
        lane: _run(pytester, "-m", lane, "--co", "-q").stdout.str() for lane in ("quick", "harness", "service", "e2e")
    }
    assert "test_plain" in picked["quick"] and "test_with_a_database" not in picked["quick"]
    assert "test_with_a_database" in picked["service"]  # a database fixture makes a service test
    assert "test_marked_harness" in picked["harness"] and "test_on_a_gpu" in picked["harness"]
    assert "no tests collected" in picked["e2e"] or "test_" not in picked["e2e"]


def test_a_quick_test_that_starts_a_worker_fails_and_names_the_lane(pytester: pytest.Pytester) -> None:
    result = _run(pytester, "-m", "quick")
    result.assert_outcomes(passed=3, errors=1)  # the plain, helper-program and worker-starting quick tests
    result.stdout.fnmatch_lines(["*test_starts_a_worker_unmarked is in the quick lane but started a worker*"])
    assert "test_a_helper_program_is_fine is in the quick lane" not in result.stdout.str()
    marked = _run(pytester, "-m", "harness")  # the same start in a marked test is the lane's business
    marked.assert_outcomes(passed=2)


def test_two_lanes_for_one_test_are_refused(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_two="import pytest\n\n\n@pytest.mark.quick\n@pytest.mark.e2e\ndef test_both():\n    pass\n"
    )
    result = pytester.runpytest_subprocess("-p", "tests.lanes", "-p", "no:cacheprovider", "--co")
    assert "marked for lanes ['quick', 'e2e']" in result.stdout.str() + result.stderr.str()


def test_every_lane_prints_its_slowest_tests(pytester: pytest.Pytester) -> None:
    result = _run(pytester, "-m", "service or harness")
    result.stdout.fnmatch_lines(["*= lanes =*", "harness: 2 tests*", "service: 1 tests*", "*harness: the 2 slowest*"])
