"""bench/peer_material.py, which imports each peer's whole published material and counts what
gpuarena takes: finding the material in its peers' layouts, reading the importers' output and
shortening refusals to categories (quick), and a whole run over the repository's own fixtures
in the peers' formats, with every outcome's count and category (e2e: the importers' CLI as
subprocesses), so the script cannot rot unnoticed."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import os
import shutil
import sys
import time
from collections import Counter
from dataclasses import asdict
from pathlib import Path
from unittest import mock

import pytest

from gpuarena.solutions import languages, runtimes

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "interop" / "fixtures"
_spec = importlib.util.spec_from_file_location("bench_peer_material", ROOT / "bench" / "peer_material.py")
assert _spec is not None and _spec.loader is not None
pm = importlib.util.module_from_spec(_spec)
sys.modules["bench_peer_material"] = pm
_spec.loader.exec_module(pm)


def _flashinfer_layout(root: Path) -> Path:
    """The FlashInfer-Trace fixtures laid out as the dataset lays them out, plus a definition
    without workloads and a solution of a definition that is not there."""
    for fixture, op_type in (("rmsnorm_h256", "rmsnorm"), ("softmax", "softmax")):
        name = json.loads((FIXTURES / fixture / "definition.json").read_text())["name"]
        for folder, source, target in (
            ("definitions", "definition.json", f"{name}.json"),
            ("workloads", "workloads.jsonl", f"{name}.jsonl"),
        ):
            (root / folder / op_type).mkdir(parents=True, exist_ok=True)
            shutil.copy(FIXTURES / fixture / source, root / folder / op_type / target)
    lonely = json.loads((FIXTURES / "rmsnorm_h256" / "definition.json").read_text())
    lonely["name"] = "rmsnorm_h256_no_workloads"
    (root / "definitions" / "rmsnorm" / "rmsnorm_h256_no_workloads.json").write_text(json.dumps(lonely))
    solutions = root / "solutions" / "tests" / "rmsnorm" / "rmsnorm_h256"
    solutions.mkdir(parents=True)
    for path in sorted((FIXTURES / "rmsnorm_h256" / "solutions").glob("*.json")):
        shutil.copy(path, solutions / path.name)
    stray = json.loads((FIXTURES / "rmsnorm_h256" / "solutions" / "python_returning.json").read_text())
    stray["definition"] = "gemm_nowhere"
    (root / "solutions" / "tests" / "stray.json").write_text(json.dumps(stray))
    return root


@pytest.mark.quick
def test_material_is_found_in_the_peers_layouts(tmp_path):
    kb = pm.kernelbench_items(FIXTURES / "kernelbench")
    assert [i.name for i in kb] == [
        "level1/1_Matmul_Rectangular.py",
        "level1/40_Add_IgnoresSecond.py",
        "level2/7_Conv2d_ReLU_BiasAdd.py",  # in its number's order, not the name's
        "level2/21_Gemm_Scale_Tanh.py",
        "level2/33_Gemm_Max_SubtractMean.py",
    ]
    gm = pm.gpumode_items(FIXTURES / "gpumode")
    assert len(gm) == 22  # every folder holding task.yml, invalid/no_generate_input included
    names = {i.name: i.extra["problem_name"] for i in gm}
    assert names["groups/pmpp/sort_py"] == "pmpp_sort_py" and names["groups/pmpp_v2/sort_py"] == "pmpp_v2_sort_py"
    # one output folder per group: two tasks of one name never meet
    commands = {i.name: pm.import_command(i, tmp_path, "cpu") for i in gm}
    assert commands["groups/pmpp/sort_py"][-3] != commands["groups/pmpp_v2/sort_py"][-3]

    definitions, solutions = pm.flashinfer_items(_flashinfer_layout(tmp_path / "fi"))
    assert {d.extra["definition"]: "workloads" in d.extra for d in definitions} == {
        "rmsnorm_h256": True,
        "rmsnorm_h256_no_workloads": False,
        "softmax_rows": True,
    }
    assert len(solutions) == 5 and {s.extra["definition"] for s in solutions} == {"rmsnorm_h256", "gemm_nowhere"}

    quick = pm.limited(kb, 2)  # evenly from the levels
    assert [i.group for i in quick] == ["level1", "level2"]


@pytest.mark.quick
def test_importer_output_is_read_and_refusals_categorised():
    failed = (
        "FAILED CHECK /k/level1/40_Add_IgnoresSecond.py: not imported; `gpuarena check` says:\n"
        "  workload kernelbench: the output does not depend on input b (a fresh b gives a passing output)\n"
        "0 of 1 file(s) imported under /w/kb/\n"
    )
    outcome, messages = pm.parse_output("kernelbench", 1, failed)
    assert outcome == pm.REFUSED and len(messages) == 1
    assert pm.classify(messages) == "degenerate (output independent of an input)"
    imported = "imported /k/level1/1_M.py -> /w/kb/level1/1_M/ (workloads: kernelbench, cpu-small)\n1 of 1 ...\n"
    assert pm.parse_output("kernelbench", 0, imported) == (pm.IMPORTED, [])
    error = (
        "ERROR /g/invalid/no_generate_input: not imported\n"
        "  /g/invalid/no_generate_input/reference.py: defines no generate_input (fix: a GPU MODE reference.py ...)\n"
        "0 of 1 folder(s) imported under /w/gm/\n"
    )
    assert pm.classify(pm.parse_output("gpumode", 1, error)[1]) == "not a problem (defines no generate_input)"
    fi = "error: /d/x.json: gpuarena's format cannot carry fp8 dtypes yet: input a is float8_e4m3fn\n"
    outcome, messages = pm.parse_output("flashinfer-definition", 2, fi)
    assert outcome == pm.REFUSED and pm.classify(messages) == "cannot carry fp8 dtypes"
    crash = "Traceback (most recent call last):\n  File ...\nKeyError: 'x'\n"
    assert pm.classify(pm.parse_output("gpumode", 1, crash)[1]) == "importer crashed (KeyError)"
    capped = "Traceback (most recent call last):\nRuntimeError: DefaultCPUAllocator: can't allocate memory: 805306368 bytes\n"
    assert pm.classify(pm.parse_output("gpumode", 1, capped)[1]) == "out of memory"  # the cap, not a crash
    for message, category in (
        (
            "no entry of tests or benchmarks could be run here: ModuleNotFoundError: No module named 'aiter.ops'",
            "needs package aiter",
        ),
        ("generate_input(**test0): RuntimeError: rank 1 of world_size 8", "multi-GPU (rank)"),
        (
            "no entry of tests or benchmarks could be run here: AssertionError: Torch not compiled with CUDA enabled",
            "CUDA only on this machine",
        ),
        (
            "TypeError: data holds a MoEConfig: gpuarena carries tensors, numbers, strings, None",
            "data holds a non-tensor object",
        ),
        (
            "workload kernelbench: output output is constant, so a constant answer would pass",
            "degenerate (constant output)",
        ),
    ):
        assert pm.classify([message]) == category, message
    assert pm.classify(["/a/b/c.py: something new entirely"]) == "other: …/c.py: something new entirely"


def test_the_categories_live_in_peer_refusals_and_know_the_importers_newer_words():
    """bench/peer_refusals.py holds the reading and the categories; peer_material.py runs them."""
    refusals = sys.modules["peer_refusals"]  # the sibling peer_material.py imported
    assert pm.classify is refusals.classify and pm.parse_output is refusals.parse_output
    assert (ROOT / "bench" / "peer_refusals.py").samefile(refusals.__file__)
    for message, category in (
        (
            "/t/ag-gemm: needs 8 GPUs / torch.distributed (task.yml says multi_gpu: true): gpuarena runs ...",
            "multi-GPU (rank)",
        ),
        (
            "/t/reference.py: generate_input(**test0): data holds a KVCache (a torch.nn.Module, with state and "
            "methods of its own ...): gpuarena carries tensors, numbers, strings, None, and tuples, ...",
            "data holds a non-tensor object",
        ),
    ):
        assert refusals.classify([message]) == category, message


# One fixture of each outcome and category, and both sort_py tasks (one name in two groups): each
# fixture's own import is tested in tests/interop, so the whole run need not import them all again
# (it took 93 s of CI's e2e lane with all 35).
WHOLE_RUN = (
    "level1/1_Matmul_Rectangular.py",
    "level1/40_Add_IgnoresSecond.py",
    "level2/33_Gemm_Max_SubtractMean.py",
    "groups/pmpp/sort_py",
    "groups/pmpp_v2/sort_py",
    "gpuonly/cudaref_py",  # imported unchecked: its reference runs on a GPU only
    "invalid/no_generate_input",
    "invalid/distributed_py",
    "gpuonly/needspkg_py",
    "gpuonly/kvcache_py",
)


@pytest.mark.e2e
def test_a_whole_run_over_the_fixtures(tmp_path):
    """A fixture of each kind through the real importers, on the CPU: the counts and the categories."""
    out = tmp_path / "out"
    fi = _flashinfer_layout(tmp_path / "fi")
    names = tmp_path / "names.txt"
    names.write_text("\n".join(WHOLE_RUN) + "\n")
    args = ["--kernelbench", str(FIXTURES / "kernelbench"), "--gpumode", str(FIXTURES / "gpumode")]
    args += ["--flashinfer-trace", str(fi), "--device", "cpu", "--jobs", "2", "--out", str(out), "--names", f"@{names}"]
    assert pm.main(args) == 0
    (json_file,) = out.glob("peer-material-cpu-vm-*.json")
    assert json_file.with_suffix(".md").is_file()
    report = json.loads(json_file.read_text())
    counts = Counter((i["peer"], i["outcome"], i["category"]) for i in report["items"])
    assert counts == {
        ("kernelbench", "imported", ""): 1,
        ("kernelbench", "refused", "degenerate (output independent of an input)"): 1,  # 40_Add_IgnoresSecond
        ("kernelbench", "refused", "degenerate (constant output)"): 1,  # 33_Gemm_Max_SubtractMean
        # both sort_py, each in its group's folder, and gpuonly/cudaref_py, unchecked
        ("gpumode", "imported", ""): 3,
        ("gpumode", "refused", "not a problem (defines no generate_input)"): 1,
        ("gpumode", "refused", "multi-GPU (rank)"): 1,  # invalid/distributed_py, refused up front
        ("gpumode", "refused", "needs package gpuarena_absent_vendor_kernels"): 1,  # gpuonly/needspkg_py
        ("gpumode", "refused", "data holds a non-tensor object"): 1,  # gpuonly/kvcache_py
        ("flashinfer-definition", "imported", ""): 2,
        ("flashinfer-definition", "refused", "no workloads in the material"): 1,
        ("flashinfer-solution", "imported", ""): 4,
        ("flashinfer-solution", "refused", "its definition is not in the material"): 1,
    }, counts
    assert report["table"] == {
        "KernelBench problems": "imported 1 of 3 (L1 1/2, L2 0/1); refused: degenerate (constant output) 1; "
        "degenerate (output independent of an input) 1",
        "GPU MODE tasks": "imported 3 of 7; refused: data holds a non-tensor object 1; multi-GPU (rank) 1; needs "
        "package gpuarena_absent_vendor_kernels 1; not a problem (defines no generate_input) 1",
        "FlashInfer-Trace definitions": "with workloads 2 of 3; imported 2; refused: no workloads in the material 1",
        "FlashInfer-Trace solutions": "loaded 4 of 5; refused: its definition is not in the material 1",
    }
    assert all(i["command"][1:4] == ["-m", "gpuarena", "import"] for i in report["items"] if i["rc"] is not None)


@pytest.mark.quick
def test_a_report_is_reclassified_from_its_recorded_messages(tmp_path):
    item = pm.Item("gpumode", "princeton/x_py", "princeton", "/g/princeton/x_py", rc=1, outcome=pm.REFUSED)
    item.messages = ["/g/princeton/x_py/task.py: not found (fix: a GPU MODE problem folder holds task.yml, ...)"]
    item.category = "other: an older category"
    timed_out = pm.Item("gpumode", "linalg/eigh_py", "linalg", "/g/linalg/eigh_py", outcome=pm.REFUSED)
    timed_out.category, timed_out.messages = pm.TIMEOUT, ["not done in 240 s"]
    report = {"command": "python bench/peer_material.py --gpumode /g", "machine": "cpu-vm", "device": "cpu"}
    report |= {"date": "2026-11-30", "timeout_s": 240.0, "elapsed_s": 1.0, "note": "", "items": []}
    report["material"] = {"gpumode": {"path": "/g", "revision": ""}}
    report["items"] = [asdict(item), asdict(timed_out)]
    path = tmp_path / "peer-material-cpu-vm-2026-11-30.json"
    path.write_text(json.dumps(report))
    assert pm.main(["--reclassify", str(path)]) == 0
    again = json.loads(path.read_text())
    assert [i["category"] for i in again["items"]] == ["not a task folder (no task.py)", pm.TIMEOUT]
    assert again["table"] == {"GPU MODE tasks": "imported 0 of 2; refused: not a task folder (no task.py) 1; timeout 1"}
    assert again["command"] == report["command"] and again["reclassified"].endswith(f"--reclassify {path}")
    assert "| GPU MODE tasks | 42 |" in path.with_suffix(".md").read_text()


@pytest.mark.quick
def test_items_are_chosen_by_group_or_name_and_shared_among_gpus(tmp_path):
    kb = pm.kernelbench_items(FIXTURES / "kernelbench")
    assert [i.name for i in pm.chosen(kb, "level2", None)][:1] == ["level2/7_Conv2d_ReLU_BiasAdd.py"]
    listed = tmp_path / "names.txt"
    listed.write_text("level1/40_Add_IgnoresSecond.py\nlevel2/21_Gemm_Scale_Tanh.py\n")
    assert [i.name for i in pm.chosen(kb, None, f"@{listed}")] == [
        "level1/40_Add_IgnoresSecond.py",
        "level2/21_Gemm_Scale_Tanh.py",
    ]
    assert pm.chosen(kb, "level1", "level2/21_Gemm_Scale_Tanh.py") == []  # both filters apply
    slots = pm.GpuSlots(2)
    first, second, third = slots.take(), slots.take(), slots.take()
    assert sorted([first, second]) == [0, 1] and third in (0, 1)  # the least busy GPU each time
    slots.give(first)
    assert slots.take() == first


@pytest.mark.e2e
def test_gpu_mode_s_own_submissions_are_judged_beside_what_gpu_mode_says(tmp_path):
    """A task folder with GPU MODE's kinds of submissions: the example, a correct solution and a
    wrong one, each run unmodified through `gpuarena run` after the import."""
    task = tmp_path / "material" / "pmpp" / "histogram_py"
    shutil.copytree(FIXTURES / "gpumode" / "histogram_py", task)
    submissions = FIXTURES / "gpumode" / "submissions"
    shutil.copy(submissions / "histogram_ok.py", task / "submission.py")
    (task / "solutions" / "correct").mkdir(parents=True)
    (task / "solutions" / "wrong").mkdir(parents=True)
    shutil.copy(submissions / "histogram_ok.py", task / "solutions" / "correct" / "ok.py")
    shutil.copy(submissions / "histogram_off_by_one.py", task / "solutions" / "wrong" / "off_by_one.py")
    out = tmp_path / "out"
    args = ["--gpumode", str(tmp_path / "material"), "--device", "cpu", "--jobs", "2", "--submissions"]
    assert pm.main([*args, "--out", str(out)]) == 0
    (json_file,) = out.glob("peer-submissions-cpu-vm-*.json")
    report = json.loads(json_file.read_text())
    judged = {Path(s["submission"]).name: (s["expected"], s["status"], s["agrees"]) for s in report["submissions"]}
    assert judged == {
        "submission.py": ("passes", "PASSED", True),
        "ok.py": ("passes", "PASSED", True),
        "off_by_one.py": ("fails", "WRONG_VALUES", True),
    }, report["submissions"]
    assert report["summary"] == (
        "3 of 3 submissions that run here judged as GPU MODE judges them; 0 of 3 cannot run on this machine"
    )
    from peer_submissions import Judged as sub  # bench/ is on sys.path once peer_material is loaded

    missing = sub(task="t", submission="s.py", expected="passes", status="COMPILE_ERROR")
    missing.reason = "ModuleNotFoundError: No module named 'helion'"
    assert not missing.runs_here and sub(task="t", submission="s.py", expected="fails", status="WRONG_VALUES").runs_here
    helion = languages.get("helion")  # a helion submission where the package is missing: the harness says so
    assert helion is not None and helion.package is not None
    broken = dataclasses.replace(helion, package=languages.Package("gpuarena_no_such_module", "helion"))
    with mock.patch.dict(languages.base._LANGUAGES, {"helion": broken}), pytest.raises(runtimes.MissingPackage) as said:
        runtimes.require("helion")
    missing.reason = str(said.value)
    assert not missing.runs_here, missing.reason
    assert "| pmpp/histogram_py | `solutions/wrong/off_by_one.py` | fails | - | WRONG_VALUES | yes |" in (
        json_file.with_suffix(".md").read_text()
    )


@pytest.mark.e2e
def test_a_submission_to_a_task_of_several_layouts_is_judged_on_every_layout(tmp_path):
    """A task whose entries make data of several layouts is imported as one problem a layout
    (NAME_layoutK); GPU MODE judges a submission on every entry, so each submission is judged on
    every layout, and one wrong on a single layout fails there, named."""
    task = tmp_path / "material" / "pmpp" / "groupscale_py"
    shutil.copytree(FIXTURES / "gpumode" / "more" / "groupscale_py", task)
    submissions = FIXTURES / "gpumode" / "submissions"
    shutil.copy(submissions / "groupscale_ok.py", task / "submission.py")
    (task / "solutions" / "wrong").mkdir(parents=True)
    shutil.copy(submissions / "groupscale_wrong_on_three.py", task / "solutions" / "wrong" / "on_three.py")
    out = tmp_path / "out"
    args = ["--gpumode", str(tmp_path / "material"), "--device", "cpu", "--jobs", "2", "--submissions"]
    assert pm.main([*args, "--work", str(tmp_path / "work"), "--out", str(out)]) == 0
    (json_file,) = out.glob("peer-submissions-cpu-vm-*.json")
    report = json.loads(json_file.read_text())
    judged = {Path(s["submission"]).name: s for s in report["submissions"]}
    assert set(judged) == {"submission.py", "on_three.py"}, report["submissions"]
    layouts = judged["submission.py"]["problem"].split("; ")
    assert [Path(p).name for p in layouts] == [
        "groupscale_py_layout1",
        "groupscale_py_layout2",
        "groupscale_py_layout3",
    ]
    assert judged["submission.py"]["status"] == "PASSED" and judged["submission.py"]["agrees"]
    wrong = judged["on_three.py"]
    assert wrong["status"] == "WRONG_VALUES" and wrong["agrees"], wrong
    three = [Path(p).name for p in layouts if "groups = 3," in (Path(p) / "problem.toml").read_text()]
    assert len(three) == 1 and wrong["reason"].startswith(f"{three[0]}: "), wrong["reason"]


@pytest.mark.quick
def test_runs_on_one_machine_are_merged_by_their_last_word_on_each_item(tmp_path, capsys):
    header = {"machine": "NVIDIA-H200", "date": "2026-11-30", "device": "cuda", "timeout_s": 150.0}
    header |= {"note": "", "elapsed_s": 10.0, "material": {"kernelbench": {"path": "KB", "revision": ""}}}

    def report(name: str, items: list) -> Path:
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps({**header, "command": name, "items": [asdict(i) for i in items]}))
        return path

    first = report(
        "first",
        [
            pm.Item("kernelbench", "level1/a.py", "level1", "a", outcome="imported"),
            pm.Item("kernelbench", "level1/b.py", "level1", "b", outcome="refused", category="timeout"),
            pm.Item("kernelbench", "level2/c.py", "level2", "c", outcome="refused", category=pm.BUDGET_SPENT),
        ],
    )
    again = report(
        "again",
        [
            pm.Item("kernelbench", "level1/b.py", "level1", "b", outcome="imported"),
            pm.Item(
                "kernelbench", "level2/c.py", "level2", "c", outcome="refused", category="degenerate (constant output)"
            ),
        ],
    )
    assert pm.main(["--merge", str(first), str(again), "--out", str(tmp_path / "out")]) == 0
    merged = json.loads((tmp_path / "out" / "peer-material-NVIDIA-H200-2026-11-30-merged.json").read_text())
    assert merged["merged_from"] == ["first.json", "again.json"] and merged["elapsed_s"] == 20.0
    assert (
        merged["table"]["KernelBench problems"]
        == "imported 2 of 3 (L1 2/2, L2 0/1); refused: degenerate (constant output) 1"
    )
    assert {i["name"]: i["extra"]["report"] for i in merged["items"]}["level1/b.py"] == "again.json"


@pytest.mark.quick
def test_submissions_past_the_budget_are_not_run_and_count_nowhere(tmp_path):
    """`--budget` bounds the submissions too: on the H200 (stop 64) a run's 64 submissions outlasted
    its step's limit, which killed it before any report was written."""
    from peer_submissions import NOT_RUN, judge_all

    task = tmp_path / "pmpp" / "histogram_py"
    shutil.copytree(FIXTURES / "gpumode" / "histogram_py", task)
    shutil.copy(FIXTURES / "gpumode" / "submissions" / "histogram_ok.py", task / "submission.py")
    said: list[str] = []
    judged = judge_all([("pmpp/histogram_py", task, [tmp_path / "imported"])], "cpu", 60, 2, 0, said.append, 0.0)
    assert [(j.status, j.runs_here, j.command) for j in judged] == [(NOT_RUN, False, [])]
    assert not said


@pytest.mark.quick
def test_a_verdict_that_names_the_gpu_s_memory_running_out_is_judged_again_alone():
    """Beside three others on the H200, bioml/trimul's own submission was REJECTED for the
    supervisor's OutOfMemoryError, and GPU MODE's eval.py failed it beside them too; alone it
    PASSED (stop 64). Such verdicts, either side's, may be the neighbours' doing."""
    from peer_submissions import FAIL, PASS, Judged, owed_to_others

    oom = "the supervisor could not judge the worker's replies (OutOfMemoryError: CUDA out of memory. Tried"
    assert owed_to_others(Judged(task="t", submission="s.py", expected=PASS, status="REJECTED", reason=oom))
    assert owed_to_others(Judged(task="t", submission="s.py", expected=PASS, status="TIMEOUT"))
    own_oom = Judged(task="t", submission="s.py", expected=PASS, status="PASSED", own=FAIL)
    own_oom.own_log = "test: torch.OutOfMemoryError: CUDA out of memory"
    assert owed_to_others(own_oom)
    assert not owed_to_others(Judged(task="t", submission="s.py", expected=PASS, status="REJECTED", reason="forged"))
    assert not owed_to_others(Judged(task="t", submission="s.py", expected=PASS, status="WRONG_VALUES"))


@pytest.mark.quick
def test_a_timeout_beside_others_not_judged_again_alone_says_so(tmp_path, monkeypatch):
    """linalg/eigh_py's three submissions read TIMEOUT beside each other on one H200 (stop 78) and
    the run's --budget left no time to judge them alone, where each PASSED in 130 s (2026-12-04):
    such a verdict says it is not the submission's own."""
    import peer_submissions
    from peer_submissions import PASS, Judged

    def slow_timeout(one: Judged, device: str, timeout: float, env: dict) -> Judged:
        time.sleep(0.4)  # past the run's deadline
        one.status, one.reason = "TIMEOUT", "not done in 300 s"
        return one

    task = tmp_path / "pmpp" / "histogram_py"
    shutil.copytree(FIXTURES / "gpumode" / "histogram_py", task)
    shutil.copy(FIXTURES / "gpumode" / "submissions" / "histogram_ok.py", task / "submission.py")
    monkeypatch.setattr(peer_submissions, "judge", slow_timeout)
    tasks = [("pmpp/histogram_py", task, [tmp_path / "imported"])]
    judged = peer_submissions.judge_all(tasks, "cpu", 60, 2, 1, lambda _: None, time.monotonic() + 0.2)
    assert [(j.expected, j.status) for j in judged] == [(PASS, "TIMEOUT")]
    assert judged[0].reason == (
        "not done in 300 s (judged beside others and not again alone: the run's --budget was spent)"
    )


STAND_IN_EVAL = """import os, sys
from submission import custom_kernel
ok = custom_kernel(3) == 4  # a stand-in for GPU MODE's eval.py, written for this test
with os.fdopen(int(os.environ["POPCORN_FD"]), "w") as log:
    log.write(f"mode: {sys.argv[1]}\\ncheck: {'pass' if ok else 'fail'}\\n")
"""


@pytest.mark.quick
def test_gpu_mode_s_own_eval_judges_a_submission_and_is_what_gpuarena_is_held_against(tmp_path):
    """`--gpumode-eval`: the task's own eval.py (here a stand-in) in test mode, in a folder laid out
    as task.yml's `files` say; where it ran, a verdict agrees with it rather than with the folder."""
    from peer_submissions import FAIL, PASS, Judged, own_verdict

    task = tmp_path / "task"
    task.mkdir()
    (task / "task.yml").write_text(
        'files:\n  - {"name": "submission.py", "source": "@SUBMISSION@"}\n  - {"name": "eval.py", "source": "eval.py"}\n'
        'tests:\n  - {"size": 4}\nbenchmarks:\n  - {"size": 8}\n'
    )
    (task / "eval.py").write_text(STAND_IN_EVAL)
    (task / "right.py").write_text("def custom_kernel(x):\n    return x + 1\n")
    (task / "wrong.py").write_text("def custom_kernel(x):\n    return x\n")
    right = Judged(task="t", submission=str(task / "right.py"), expected=PASS, status="PASSED")
    wrong = Judged(task="t", submission=str(task / "wrong.py"), expected=PASS, status="WRONG_VALUES")
    for one in (right, wrong):
        own_verdict(one, task, dict(os.environ), 60)
    assert (right.own, wrong.own) == (PASS, FAIL), (right.own_log, wrong.own_log)
    assert right.agrees and wrong.agrees  # the folder says passes, GPU MODE's own eval fails it too
    assert not Judged(task="t", submission="s.py", expected=PASS, status="WRONG_VALUES").agrees
