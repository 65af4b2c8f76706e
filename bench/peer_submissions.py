"""GPU MODE's own submissions judged through gpuarena, beside what GPU MODE says of them (issue 49).

A task folder of gpu-mode/reference-kernels holds submissions: `submission.py` (the task's
example), `submissions/*.py` (more examples), `solutions/correct/*` and `solutions/wrong/*`.
GPU MODE's evaluation passes the first three kinds and fails the last. For every task that
`bench/peer_material.py` imported, each submission is run unmodified through `gpuarena run
PROBLEM SUBMISSION --mode test --json`, in a process of its own, and its verdict set against
GPU MODE's expectation. Called by `peer_material.py --submissions`; writes
OUT/peer-submissions-MACHINE-DATE.{json,md}.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from peer_gpumode import gpumode_folder, run_gpumode

PASS, FAIL = "passes", "fails"
PROBLEMS_APART = "; "


@dataclass
class Judged:
    """One submission of a task, what GPU MODE expects of it and gpuarena's verdict."""

    task: str
    submission: str
    expected: str
    """passes (an example or a correct solution) or fails (solutions/wrong)."""
    problem: str = ""
    """The imported problem's folder; a task of several layouts: one a layout, PROBLEMS_APART between."""
    status: str = ""
    reason: str = ""
    seconds: float = 0.0
    command: list[str] = field(default_factory=list)
    own: str = ""
    """GPU MODE's own eval.py in test mode on the same submission (passes or fails; empty where
    not run): where given, what gpuarena's verdict is held against."""
    own_log: str = ""

    @property
    def agrees(self) -> bool:
        return (self.status == "PASSED") == ((self.own or self.expected) == PASS)

    @property
    def runs_here(self) -> bool:
        """False where this machine lacks what the submission needs (a package, a GPU, a newer GPU):
        no verdict of GPU MODE's to compare with."""
        return not NOT_HERE.search(self.reason) and self.status != NOT_RUN


NOT_HERE = re.compile(
    r"No module named|CUDA_HOME|active drivers|has no workloads for device kind|CUBLAS_STATUS_NOT_SUPPORTED"
    r"|no kernel image is available|is not installed where the harness runs"
)
"""A verdict that says the machine lacks what the submission needs (the `helion` package, CUDA,
Triton's GPU driver, a B200's nvfp4 matmul)."""
NOT_RUN = "NOT RUN"
"""A submission not started before the run's --budget was spent."""
BESIDE_OTHERS = ("ERROR", "RUNTIME_ERROR", "TIMEOUT")
"""Verdicts that a submission judged beside others may owe to them (the GPU's memory, its time):
such a submission is judged once more alone at the end, and that verdict stands."""
OUT_OF_MEMORY = re.compile(r"OutOfMemoryError|CUDA out of memory|too large for cuda")
"""A reason that names the GPU's memory running out: beside others' imports and submissions, any
verdict with it may be theirs (on the H200, bioml/trimul's was REJECTED so, beside three others,
where it PASSED alone at stop 64)."""


def owed_to_others(one: Judged) -> bool:
    """Whether a verdict reached beside other judgings may be their doing (BESIDE_OTHERS, or
    any reason that names the GPU's memory running out), GPU MODE's own eval.py's included."""
    return (
        one.status in BESIDE_OTHERS
        or bool(OUT_OF_MEMORY.search(one.reason))
        or (one.own == FAIL and bool(OUT_OF_MEMORY.search(one.own_log)))
    )


def submissions(task: Path) -> list[tuple[Path, str]]:
    """The task's submissions with what GPU MODE expects of each (sorted, so runs compare)."""
    found: list[tuple[Path, str]] = []
    if (task / "submission.py").is_file():
        found.append((task / "submission.py", PASS))
    found += [(p, PASS) for p in sorted((task / "submissions").glob("*.py"))]
    found += [(p, PASS) for p in sorted((task / "solutions" / "correct").glob("*")) if p.is_file()]
    found += [(p, FAIL) for p in sorted((task / "solutions" / "wrong").glob("*")) if p.is_file()]
    return [(p, e) for p, e in found if p.suffix in (".py", ".cu", ".cpp")]


def imported_problems(work: Path, group_slug: str, task: Path, name: str = "") -> list[Path]:
    """The problem folders the import of `task` wrote under work/gpumode/GROUP (LEVEL/NAME), or,
    for a task whose entries make data of several layouts, one a layout (LEVEL/NAME_layoutK, in
    order): GPU MODE judges a submission on every entry, so gpuarena judges it on every layout."""
    for candidate in (name, task.name):
        if candidate:
            group = work / "gpumode" / group_slug
            hits = sorted(group.glob(f"*/{candidate}/problem.toml"))
            if hits:
                return [hits[0].parent]
            layouts = [p.parent for p in group.glob(f"*/{candidate}_layout*/problem.toml")]
            layouts = [p for p in layouts if p.name.removeprefix(f"{candidate}_layout").isdigit()]
            if layouts:
                return sorted(layouts, key=lambda p: int(p.name.removeprefix(f"{candidate}_layout")))
    return []


def judge(one: Judged, device: str, timeout: float, env: dict[str, str]) -> Judged:
    """`gpuarena run` in test mode on each of the submission's problems (a task of several
    layouts has one a layout), its verdict read from its JSON record: the first that is not
    PASSED, named by its problem, stands."""
    started = time.perf_counter()
    for problem in one.problem.split(PROBLEMS_APART):
        one.command = [sys.executable, "-m", "gpuarena", "run", problem, one.submission, "--mode", "test"]
        one.command += ["--device", device, "--json"]
        try:
            done = subprocess.run(one.command, capture_output=True, text=True, timeout=timeout, env=env)
        except subprocess.TimeoutExpired:
            one.status, one.reason = "TIMEOUT", f"not done in {timeout:g} s"
        else:
            try:
                record = json.loads(done.stdout[done.stdout.index("{") :])
                one.status, one.reason = str(record.get("status", "")), str(record.get("reason") or "")[:400]
            except ValueError:
                one.status, one.reason = "NO RECORD", (done.stderr or done.stdout)[-400:]
        if one.status != "PASSED":
            if PROBLEMS_APART in one.problem:
                one.reason = f"{Path(problem).name}: {one.reason}"
            break
    one.seconds = round(time.perf_counter() - started, 1)
    return one


def own_verdict(one: Judged, task: Path, env: dict[str, str], timeout: float) -> None:
    """GPU MODE's own eval.py on the submission, in a scratch folder laid out as its runner lays
    it out (peer_gpumode.py): `test` on the tests, then `leaderboard` on the benchmarks (where its
    recheck catches what only large inputs show: vectorsum's `wrong/cheat.py` passes `test`);
    passes where both do. A Python submission only (the task names it submission.py)."""
    if Path(one.submission).suffix != ".py":
        return
    with tempfile.TemporaryDirectory(prefix="gpumode-eval-") as scratch:
        try:
            gpumode_folder(task, Path(one.submission), Path(scratch))
            ran = run_gpumode(Path(scratch), "test", "tests.txt", env, timeout)
            if ran["passed"]:
                ran = run_gpumode(Path(scratch), "leaderboard", "benchmarks.txt", env, timeout)
        except Exception as exc:  # eval.py that could not run: no verdict of GPU MODE's
            one.own_log = f"{type(exc).__name__}: {exc}"[:300]
            return
    one.own = PASS if ran["passed"] else FAIL
    one.own_log = f"{ran['mode']}: " + " / ".join(ran["log"])[-300:]


def judge_all(
    tasks: list[tuple[str, Path, list[Path]]],
    device: str,
    timeout: float,
    jobs: int,
    gpus: int,
    say: Callable[[str], None],
    deadline: float | None = None,
    own_eval: bool = False,
) -> list[Judged]:
    """tasks: (name, task folder, imported problem folders). Each submission on a GPU of its own
    turn (CUDA_VISIBLE_DEVICES), `jobs` at once; none started past `deadline` (time.monotonic());
    one whose verdict may be its neighbours' doing (BESIDE_OTHERS) is judged again alone.
    `own_eval`: GPU MODE's eval.py judges each too (own_verdict)."""
    folders = {name: folder for name, folder, _ in tasks}
    work = [
        Judged(task=name, submission=str(path), expected=expected, problem=PROBLEMS_APART.join(map(str, problems)))
        for name, folder, problems in tasks
        for path, expected in submissions(folder)
    ]

    def one(n_item: tuple[int, Judged]) -> Judged:
        n, item = n_item
        if deadline is not None and time.monotonic() > deadline:
            item.status, item.reason = NOT_RUN, "not started: the run's --budget was spent"
            return item
        env = {**os.environ, "COLUMNS": "400"}
        if gpus:
            env["CUDA_VISIBLE_DEVICES"] = str(n % gpus)
        judge(item, device, timeout, env)
        if own_eval:
            own_verdict(item, folders[item.task], env, timeout)
        said = f"[submission] {item.task} {Path(item.submission).name}: {item.status} (expected: {item.expected}"
        said += f"; GPU MODE's eval.py: {item.own or 'not run'})" if own_eval else ")"
        say(said + (f": {item.reason[:200]}" if item.status != "PASSED" else ""))
        return item

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        judged = list(pool.map(one, enumerate(work)))
    for item in judged if jobs > 1 else []:
        if owed_to_others(item) and deadline is not None and time.monotonic() >= deadline:
            # say so: a TIMEOUT beside others is not the submission's (linalg/eigh_py's three at
            # stop 78, three at once on one H200, PASSED alone in 130 s each on 2026-12-04)
            item.reason += " (judged beside others and not again alone: the run's --budget was spent)"
        elif owed_to_others(item) and (deadline is None or time.monotonic() < deadline):
            beside = f"{item.status}: {item.reason}"[:150]
            alone = {**os.environ, "COLUMNS": "400", **({"CUDA_VISIBLE_DEVICES": "0"} if gpus else {})}
            judge(item, device, timeout, alone)
            if own_eval:
                item.own, item.own_log = "", ""
                own_verdict(item, folders[item.task], alone, timeout)
            item.reason = f"{item.reason} (judged again alone; beside others: {beside})".lstrip()
            say(f"[submission, alone] {item.task} {Path(item.submission).name}: {item.status}: {item.reason[:300]}")
    return judged


def write(judged: list[Judged], out: Path, stem: str, header: dict[str, Any]) -> str:
    """OUT/STEM.json and .md; returns the summary line."""
    here = [j for j in judged if j.runs_here]
    agree = sum(j.agrees for j in here)
    line = (
        f"{agree} of {len(here)} submissions that run here judged as GPU MODE judges them; "
        f"{len(judged) - len(here)} of {len(judged)} cannot run on this machine"
    )
    owned = [j for j in here if j.own]
    if owned:
        line += (
            f"; GPU MODE's own eval.py judged {len(owned)} of them here and differs from its folders' word on "
            f"{sum(j.own != j.expected for j in owned)}"
        )
    out.mkdir(parents=True, exist_ok=True)
    rows = [{**asdict(j), "agrees": j.agrees, "runs_here": j.runs_here} for j in judged]
    (out / f"{stem}.json").write_text(json.dumps({**header, "summary": line, "submissions": rows}, indent=1))
    lines = [f"# GPU MODE's submissions through gpuarena ({header.get('machine', '')}, {header.get('date', '')})", ""]
    lines += [f"Command: `{header.get('command', '')}`", "", line, ""]
    lines += [
        "| task | submission | GPU MODE (folder) | GPU MODE's eval.py | gpuarena | agrees | reason |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for j in judged:
        shown = "/".join(Path(j.submission).parts[-3:]) if "solutions" in j.submission else Path(j.submission).name
        reason = j.reason.replace("|", "/").replace("\n", " ")[:160]
        said = "not here" if not j.runs_here else "yes" if j.agrees else "NO"
        lines.append(f"| {j.task} | `{shown}` | {j.expected} | {j.own or '-'} | {j.status} | {said} | {reason} |")
    (out / f"{stem}.md").write_text("\n".join(lines) + "\n")
    return line


def rewrite(report: Path) -> str:
    """A report written again from its JSON (today's NOT_HERE and summary): its .json and .md."""
    data = json.loads(report.read_text())
    fields = set(Judged.__dataclass_fields__)
    judged = [Judged(**{k: v for k, v in row.items() if k in fields}) for row in data.pop("submissions")]
    data.pop("summary", None)
    return write(judged, report.parent, report.stem, data)


if __name__ == "__main__":
    for path in sys.argv[1:]:
        print(rewrite(Path(path)))
