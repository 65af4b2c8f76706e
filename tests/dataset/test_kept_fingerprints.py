"""The bundled problems' kept fingerprints (dataset/kept_fingerprints.py): what a fresh trace
gives, used only for the same files under the same code, and never read from a problem root."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from gpuarena.bundled import bundled_root
from gpuarena.dataset import kept_fingerprints
from gpuarena.dataset.fingerprint import fingerprints, index
from gpuarena.problems.loader import discover, load_problem
from gpuarena.problems.pack import pack_problem

ROOT = Path(__file__).resolve().parents[2]


def _pinned_torch() -> str:
    """The torch release scripts/setup.sh installs (what CI runs)."""
    found = re.findall(r"torch==([0-9][0-9.]*)", (ROOT / "scripts" / "setup.sh").read_text())
    assert found and len(set(found)) == 1, found
    return found[0]


@pytest.mark.harness
def test_the_kept_fingerprints_are_what_a_fresh_trace_gives():
    kept_under = json.loads(kept_fingerprints.KEPT.read_text())["torch"]
    assert kept_under == _pinned_torch(), "setup.sh pins another torch: run scripts/keep_fingerprints.py under it"
    if kept_fingerprints.torch_version() != kept_under:
        pytest.skip(f"this torch ({kept_fingerprints.torch_version()}) is not the one they were kept under")
    stale = []
    for problem in discover(bundled_root()):
        if kept_fingerprints.kept(pack_problem(problem).hash) != fingerprints(problem, canonical=True):
            stale.append(problem.id)
    assert not stale, f"kept fingerprints missing or stale for {stale}: run scripts/keep_fingerprints.py"


@pytest.fixture
def kept_file(tmp_path, monkeypatch):
    path = tmp_path / "kept.json"
    monkeypatch.setattr(kept_fingerprints, "KEPT", path)
    kept_fingerprints._kept.cache_clear()
    yield path
    kept_fingerprints._kept.cache_clear()


FORGED = (("a call no reference makes", ()), 1)


@pytest.mark.quick
def test_a_kept_fingerprint_stands_only_for_the_same_files_under_the_same_code(tmp_path, kept_file):
    root = tmp_path / "problems"
    folder = Path(shutil.copytree(bundled_root() / "level1" / "add", root / "level1" / "add"))
    problem = load_problem(folder)
    workload = problem.spec.workloads[0].name
    kept_fingerprints.write({pack_problem(problem).hash: {workload: [list(FORGED)]}}, kept_file)

    # the kept figure is read (a copy of the folder anywhere has the same files)
    assert index([root], canonical=True) == {(FORGED,): [("level1/add", workload)]}
    assert index([root], canonical=False) != {(FORGED,): [("level1/add", workload)]}  # kept: canonical only

    # another file: taken afresh
    (folder / "reference.py").write_text((folder / "reference.py").read_text() + "\n# changed\n")
    fresh = index([root], canonical=True)
    assert (FORGED,) not in fresh and fresh == {
        fp: [("level1/add", name)] for name, fp in fingerprints(load_problem(folder), canonical=True).items()
    }

    # the same files under another code or torch version: the whole file is ignored
    (folder / "reference.py").write_text((bundled_root() / "level1" / "add" / "reference.py").read_text())
    data = json.loads(kept_file.read_text())
    for other in ({"code": "taken by other code"}, {"torch": "1.0.0"}, {}):
        kept_file.write_text(json.dumps({**data, **other}))
        kept_fingerprints._kept.cache_clear()
        assert ((FORGED,) in index([root], canonical=True)) is (other == {})


@pytest.mark.quick
def test_a_fingerprints_file_in_a_problem_root_is_not_read(tmp_path, kept_file):
    """Only the package's file is kept: a root of problems (the accepted samples' one) cannot bring one."""
    root = tmp_path / "problems"
    folder = Path(shutil.copytree(bundled_root() / "level1" / "add", root / "level1" / "add"))
    problem = load_problem(folder)
    forged = {
        "code": kept_fingerprints.code_key(),
        "torch": kept_fingerprints.torch_version(),
        "problems": {pack_problem(problem).hash: {"x": [list(FORGED)]}},
    }
    (root / "bundled_fingerprints.json").write_text(json.dumps(forged))
    assert (FORGED,) not in index([root], canonical=True)
