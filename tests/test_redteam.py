"""The red-team corpus (redteam/, beside problems/): every exploit must get a verdict it expects, every
honest solution must pass, through the real harness (a real worker process per case).

Cases are hostile code: they are never imported here, only read with `ast` (load_cases)
and handed to the harness. Some of them try to outlive the run (leaked processes, whose
pids they record in $TMPDIR/gpuarena-redteam-leaks/) or to lower the supervisor's CPU
share (affinity, nice, autogroup nice); `run_case` kills the former by pid and restores
the latter, so one case cannot poison the next.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpuarena.contracts.records import Status
from gpuarena.harness.evaluator import Evaluator
from gpuarena.redteam import Case, load_cases, run_case

CORPUS = Path(__file__).resolve().parents[1] / "redteam"

FAMILIES = {
    "cached outputs",
    "phase detection",  # behaving differently in warm-up, correctness checks and timed calls
    "mutating inputs",
    "outputs aliasing inputs",
    "reading secrets",  # reference results or seeds: gc, /proc, /dev/shm, environment, fds
    "predicting inputs",  # replaying the seed derivation
    "lazy outputs and deferred work",
    "background threads",
    "idle work",  # work while the worker waits between requests: signal handlers, a runtime's threads
    "side streams",
    "persisting L2",
    "warm caches",  # the worker's cache sweeps turned off (CUDA: the device audit sees them missing)
    "stale memory",
    "monkeypatching timers",
    "monkeypatching synchronisation",
    "monkeypatching statistics",
    "monkeypatching the checker",
    "monkeypatching torch functions",
    "fake results",  # stdout, stderr, the log, the harness socket, the reply function
    "exiting early",
    "constants",
    "precision",
    "nan or inf",
    "processes",
    "timeouts",
    "memory exhaustion",
    "network",
    "tampering with the supervisor",
    "crashing the supervisor",  # replies too deep or too large to parse, forged statuses, a huge log
    "moving work between calls",  # one call doing another's: what ranks is the block's total (may pass, gaining nothing)
}

SCORE_CAP = 5.0
"""A case that must pass (honest, or an exploit the harness neutralises) must also be timed
honestly: on the CPU no plain-PyTorch softmax is 5x faster than torch.softmax, so a higher
score means a neutralised exploit won after all."""

CASES = load_cases(CORPUS)
CPU_CASES = [c for c in CASES if "cpu" in c.devices]


def _case_id(case: Case) -> str:
    kind = "honest" if case.path.parent.name == "honest" else case.path.parent.name
    return f"{kind}/{case.name}"


@pytest.fixture
def isolated_case(monkeypatch, tmp_path):
    """Run from an unrelated folder (cases name fixture problems by paths relative to the
    repository, which must not depend on the current directory). run_case itself kills what
    a hostile case leaves behind and restores this process's scheduling."""
    monkeypatch.chdir(tmp_path)
    yield


KNOWN_GAPS: dict[str, str] = {}
"""Cases the harness does not yet answer as a sound harness must (issue 6's next steps).
Strict: a fix makes the case pass, and then the entry must be removed."""


RACY: set[str] = set()
"""Known gaps whose outcome depends on a race: an unexpected pass there is not a fix."""


def _param(case: Case):
    reason = KNOWN_GAPS.get(_case_id(case))
    strict = _case_id(case) not in RACY
    marks = [pytest.mark.xfail(strict=strict, reason=f"known gap: {reason}")] if reason else []
    return pytest.param(case, id=_case_id(case), marks=marks)


@pytest.fixture(scope="module")
def evaluator() -> Iterator[Evaluator]:
    """The product's warm path (harness/evaluator.py): the next case's worker is started while
    this one is judged (as `gpuarena redteam` does); each case still has a fresh worker."""
    with Evaluator("cpu") as warm:
        yield warm


@pytest.mark.harness
@pytest.mark.parametrize("case", [_param(c) for c in CPU_CASES])
def test_case(case: Case, isolated_case, evaluator: Evaluator) -> None:
    outcome = run_case(case, "cpu", evaluator=evaluator)
    assert outcome.ok, (
        f"{_case_id(case)} [{case.family}]: expected {' | '.join(case.expect)}, "
        f"got {outcome.got}: {outcome.reason or '(no reason given)'}"
    )
    score = outcome.details.get("score")
    if outcome.got == "PASSED" and score is not None:
        assert score < SCORE_CAP, (
            f"{_case_id(case)} [{case.family}] passed with a score of {score:.3g}: "
            "a solution that must be timed honestly was not"
        )


def test_corpus_size_and_coverage() -> None:
    exploits = [c for c in CASES if not c.honest]
    honest = [c for c in CASES if c.honest]
    assert len(exploits) >= 25, f"only {len(exploits)} exploit cases"
    assert len([c for c in honest if c.family == "honest"]) >= 30, "fewer than 30 honest solutions"
    covered = {c.family for c in CASES}
    assert FAMILIES <= covered, f"families without a case: {sorted(FAMILIES - covered)}"
    assert covered <= FAMILIES | {"honest"}, f"families not listed here: {sorted(covered - FAMILIES - {'honest'})}"
    assert {c.family for c in CPU_CASES if not c.honest} >= FAMILIES - {
        "side streams",
        "persisting L2",
        "warm caches",
        "monkeypatching synchronisation",
        "monkeypatching statistics",
    }


def test_case_metadata_is_sound() -> None:
    statuses = {s.value for s in Status} - {"SKIPPED"}
    for case in CASES:
        where = case.path.relative_to(CORPUS)
        assert set(case.expect) <= statuses, f"{where}: unknown verdicts in EXPECT {case.expect}"
        in_honest = case.path.parent == CORPUS / "honest"
        assert case.honest == in_honest, f"{where}: EXPECT ['PASSED'] belongs in honest/, anything else in exploits/"
        if not case.honest:
            assert "PASSED" not in case.expect or case.max_score is not None, (
                f"{where}: an exploit may expect PASSED only at a score it cannot gain on (MAX_SCORE)"
            )
        assert case.mode in ("test", "benchmark", "ranked"), f"{where}: MODE {case.mode!r}"
        assert set(case.devices) <= {"cpu", "cuda"} and case.devices, f"{where}: DEVICES {case.devices}"
        docstring = ast.get_docstring(ast.parse(case.path.read_text()))
        assert docstring and len(docstring) > 40, f"{where}: say in a docstring what the case does and what beats it"
        assert "def solve(" in case.path.read_text(), f"{where}: no solve()"


def _harness_aliases(tree: ast.Module) -> dict[str, str]:
    """Names an exploit binds to gpuarena modules: alias -> module."""
    aliases = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            aliases.update({a.asname: a.name for a in node.names if a.asname and a.name.startswith("gpuarena")})
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("gpuarena"):
            aliases.update({a.asname or a.name: f"{node.module}.{a.name}" for a in node.names})
    return aliases


def _resolve(dotted: str):
    """A module or an attribute of one, from a dotted path (None where it does not exist)."""
    import importlib

    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            found = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for name in parts[cut:]:
            if not hasattr(found, name):
                return None
            found = getattr(found, name)
        return found
    return None


def test_exploits_still_reach_the_harness_code_they_attack() -> None:
    """An exploit that reads the harness's stack frames by function name, or patches a harness
    attribute, turns honest when the harness renames that function: it then PASSES on the
    device and the corpus reports a hole that is not there (or hides one that is). Each names
    what it reaches for, and it must still exist."""
    for case in CASES:
        source = case.path.read_text()
        tree = ast.parse(source)
        where = case.path.relative_to(CORPUS)
        declared = next(
            (
                ast.literal_eval(n.value)
                for n in tree.body
                if isinstance(n, ast.Assign) and any(getattr(t, "id", "") == "HARNESS_FRAMES" for t in n.targets)
            ),
            None,
        )
        if "f_code" in source:
            assert declared, f"{where}: reads frames by name; list the functions in HARNESS_FRAMES"
        for target in declared or []:
            module, _, qualname = target.partition(":")
            function = _resolve(f"{module}.{qualname}")
            assert callable(function), f"{where}: {target} no longer exists in the harness"
            assert f'"{qualname.rpartition(".")[2]}"' in source, f"{where}: {target} is not the name it looks for"
        aliases = _harness_aliases(tree)
        for node in ast.walk(tree):
            if not isinstance(node, ast.Assign):
                continue
            for t in node.targets:
                chain = ast.unparse(t).split(".")
                if isinstance(t, ast.Attribute) and chain[0] in aliases and "(" not in ast.unparse(t):
                    owner = _resolve(".".join([aliases[chain[0]], *chain[1:-1]]))
                    assert owner is not None and hasattr(owner, chain[-1]), (
                        f"{where}: patches {ast.unparse(t)}, which the harness no longer has"
                    )


def test_the_corpus_ships_in_the_wheel_with_every_problem_its_cases_name(tmp_path):
    """`gpuarena redteam` runs the corpus wherever gpuarena is installed: the wheel carries it
    (pyproject's force-include) and every problem folder a case names outside the bundled
    problems, at the path the case's lookup finds it from inside the packaged corpus."""
    import shutil
    import tomllib

    from gpuarena.bundled import bundled_redteam
    from gpuarena.problems import resolve_problem
    from gpuarena.redteam import problem_location

    root = CORPUS.parent
    included = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["hatch"]["build"]["targets"]["wheel"][
        "force-include"
    ]
    assert included["redteam"] == "gpuarena/bundled_redteam" and bundled_redteam() == CORPUS
    packaged = tmp_path / "gpuarena" / "bundled_redteam"  # the wheel's layout, built from the map
    for source, target in included.items():
        if target.startswith("gpuarena/bundled_redteam"):
            shutil.copytree(root / source, tmp_path / target, dirs_exist_ok=True)
    cases = load_cases(packaged)
    assert len(cases) == len(load_cases(CORPUS))
    for case in cases:
        where = problem_location(case)
        if Path(where).is_absolute():
            assert where.startswith(str(packaged)) and (Path(where) / "problem.toml").is_file(), case.name
        else:
            resolve_problem(where)  # a bundled problem's id
