"""The `gpuarena` command end to end on the CPU, as a user runs it (real subprocesses)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from conftest import EXAMPLES, ROOT, gpuarena

FAST = ["--device", "cpu", "--workload", "small-64x1000", "--budget", "0.3"]


@pytest.mark.e2e
def test_run_passing_solution_prints_table_verdict_and_score():
    result = gpuarena("run", "level1/softmax", str(EXAMPLES / "softmax" / "pytorch.py"), *FAST)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "small-64x1000" in result.stdout
    assert "verdict: PASSED" in result.stdout
    assert "score:" in result.stdout and "speedup" in result.stdout


@pytest.mark.e2e
def test_run_through_a_pipe_prints_whole_rows_without_columns_set():
    """stdout is a pipe and COLUMNS is unset (a script, `| tee`, CI): the results table is not
    cut to 80 columns; each workload's row holds its name, times and speed-up on one line."""
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    result = subprocess.run(
        [sys.executable, "-m", "gpuarena", "run", "level1/softmax", str(EXAMPLES / "softmax" / "pytorch.py")]
        + ["--device", "cpu", "--budget", "0.3"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    header = next(line for line in lines if "workload" in line and "status" in line)
    assert all(column in header for column in ("abs err", "rel err", "time", "reference", "speedup"))
    assert len(header) > 80
    for workload in ("small-64x1000", "small-128x4096"):
        row = next(line for line in lines if workload in line)
        assert "PASSED" in row and row.count("s ±") == 2, row  # both times with their half-widths
        assert re.search(r"\d\.\d+x \(\d+\.\d+-\d+\.\d+\)", row), row  # the speed-up with its interval
    assert "mode benchmark" in lines[0]


@pytest.mark.e2e
def test_run_failing_solution_exits_nonzero_with_reason():
    result = gpuarena("run", "level1/softmax", str(EXAMPLES / "softmax" / "broken.py"), *FAST)
    assert result.returncode == 1
    assert "verdict: WRONG_VALUES" in result.stdout
    assert "elements outside" in result.stdout


@pytest.mark.e2e
def test_run_json_prints_the_evaluation_record():
    result = gpuarena(
        "run", "level1/softmax", str(EXAMPLES / "softmax" / "pytorch.py"), *FAST, "--mode", "test", "--json"
    )
    assert result.returncode == 0, result.stderr
    record = json.loads(result.stdout)
    for key in (
        "status",
        "reason",
        "problem",
        "solution_hash",
        "device",
        "mode",
        "workloads",
        "score",
        "environment",
        "log",
        "harness_version",
    ):
        assert key in record
    assert record["status"] == "PASSED" and record["mode"] == "test"
    workload = record["workloads"][0]
    for key in ("name", "status", "max_abs_error", "max_rel_error", "time", "reference_time", "speedup"):
        assert key in workload


@pytest.mark.e2e
def test_run_benchmark_json_has_timing_fields():
    result = gpuarena("run", "level1/softmax", str(EXAMPLES / "softmax" / "pytorch.py"), *FAST, "--json")
    record = json.loads(result.stdout)
    # where the time went (issue 18): the phases in run order, adding up to the run's duration
    phases = record["phases"]
    assert list(phases) == ["start-up", "build", "correctness", "timing", "teardown"]
    assert all(seconds >= 0 for seconds in phases.values()) and phases["timing"] > 0
    assert abs(sum(phases.values()) - record["duration_s"]) < 0.05 * record["duration_s"] + 0.01
    time = record["workloads"][0]["time"]
    assert time["samples"] >= 10 and time["method"] == "cpu-perf-counter"
    assert time["ci95_low_us"] <= time["median_us"] <= time["ci95_high_us"]
    assert record["workloads"][0]["speedup"] > 0 and record["score"] > 0


@pytest.mark.parametrize(
    "args, words",
    [
        (["run", "level9/nothing", "x.py"], "no bundled problem"),
        (["run", "level1/softmax", "missing.py"], "not found"),
        (["run", "level1/softmax", str(EXAMPLES / "softmax" / "pytorch.py"), "--device", "tpu"], "not a device"),
        (["run", "level1/softmax", str(EXAMPLES / "softmax" / "pytorch.py"), "--mode", "fast"], "--mode must be"),
        (
            ["run", "level1/softmax", str(EXAMPLES / "softmax" / "pytorch.py"), "--workload", "huge"],
            "not in level1/softmax",
        ),
        # what a message quotes is printed as it is: rich's markup would eat the [brackets]
        (["run", "level9/x[bold]y[/]", "x.py"], "level9/x[bold]y[/]"),
    ],
)
@pytest.mark.e2e
def test_bad_arguments_get_a_clear_error(args, words):
    result = gpuarena(*args, env={"CUDA_VISIBLE_DEVICES": ""})
    assert result.returncode == 2
    assert words in result.stderr.replace("\n", " ")


@pytest.mark.e2e
def test_list_shows_bundled_problems():
    result = gpuarena("list", "--json")
    rows = json.loads(result.stdout)
    ids = {row["id"] for row in rows}
    assert {
        "level1/softmax",
        "level1/matmul",
        "level2/rmsnorm",
        "level2/fused_add_rmsnorm",
        "level3/swiglu_mlp",
        "level4/attention_decode",
    } <= ids
    assert len(rows) >= 16 and {row["level"] for row in rows} == {1, 2, 3, 4}
    table = gpuarena("list")
    assert "level1/softmax" in table.stdout


@pytest.mark.e2e
def test_pack_writes_json_with_hash(tmp_path):
    target = tmp_path / "packed.json"
    result = gpuarena("pack", str(EXAMPLES / "softmax" / "cuda"), "-o", str(target))
    assert result.returncode == 0, result.stderr
    packed = json.loads(target.read_text())
    assert packed["manifest"]["language"] == "cuda" and len(packed["hash"]) == 64
    assert "softmax.cu" in packed["sources"]


@pytest.mark.e2e
def test_new_problem_passes_check_and_new_solution_passes_run(tmp_path):
    folder = tmp_path / "level1" / "my_op"
    assert gpuarena("new", "problem", str(folder)).returncode == 0
    check = gpuarena("check", str(folder))
    assert check.returncode == 0, check.stdout
    solution = tmp_path / "my_solution.py"
    made = gpuarena("new", "solution", str(folder), "-o", str(solution))
    assert made.returncode == 0, made.stderr
    run = gpuarena("run", str(folder), str(solution), "--device", "cpu", "--mode", "test")
    assert run.returncode == 0, run.stdout + run.stderr
    again = gpuarena("new", "problem", str(folder))
    assert again.returncode == 2 and "already exists" in again.stderr


@pytest.mark.e2e
def test_new_solution_for_every_bundled_problem_passes_in_test_mode(tmp_path):
    rows = json.loads(gpuarena("list", "--json").stdout)
    for row in rows[:: max(1, len(rows) // 5)]:  # a spread over the levels, to keep this quick
        solution = tmp_path / (row["id"].replace("/", "_") + ".py")
        assert gpuarena("new", "solution", row["id"], "-o", str(solution)).returncode == 0
        run = gpuarena("run", row["id"], str(solution), "--device", "cpu", "--mode", "test")
        assert run.returncode == 0, f"{row['id']}: {run.stdout[-2000:]}"


@pytest.mark.e2e
@pytest.mark.parametrize("problem", ["level1/softmax", "level4/moe_topk_router"])
def test_new_jax_solution_passes_in_test_mode(tmp_path, problem):
    pytest.importorskip("jax")
    solution = tmp_path / "jax_solution.py"
    made = gpuarena("new", "solution", problem, "-o", str(solution), "--language", "jax")
    assert made.returncode == 0, made.stdout + made.stderr
    run = gpuarena("run", problem, str(solution), "--device", "cpu", "--mode", "test")
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    assert "(jax, " in run.stdout and "verdict: PASSED" in run.stdout


@pytest.mark.e2e
def test_check_notes_outputs_under_atol_that_the_l2_bound_judges(tmp_path):
    """Elementwise bounds cannot tell such outputs from zeros; the relative L2 bound can, so the
    problem is judged and the author told (a loose L2 bound: the next test)."""
    folder = tmp_path / "tiny"
    gpuarena("new", "problem", str(folder))
    reference = folder / "reference.py"
    reference.write_text(
        reference.read_text().replace(
            "return (x.float() * scale.float() + bias.float()).to(x.dtype)",
            "return ((x.float() * scale.float() + bias.float()) * 1e-9).to(x.dtype)",
        )
    )
    result = gpuarena("check", str(folder))
    assert result.returncode == 0, result.stdout
    assert "note:" in result.stdout and "smaller than atol" in result.stdout and "L2" in result.stdout


@pytest.mark.e2e
def test_check_rejects_a_tolerance_that_lets_zeros_pass(tmp_path):
    folder = tmp_path / "lax"
    gpuarena("new", "problem", str(folder))
    toml = folder / "problem.toml"
    toml.write_text(
        toml.read_text().replace(
            "[[workloads]]", "[tolerance.float32]\natol = 1e-4\nrtol = 10.0\nl2 = 2.0\n\n[[workloads]]", 1
        )
    )
    result = gpuarena("check", str(folder))
    assert result.returncode == 1
    assert "returning zeros passes" in result.stdout


@pytest.mark.e2e
def test_check_rejects_output_independent_of_an_input(tmp_path):
    folder = tmp_path / "tiny"
    gpuarena("new", "problem", str(folder))
    reference = folder / "reference.py"
    reference.write_text(reference.read_text().replace("+ bias.float()", "+ 1.0"))
    result = gpuarena("check", str(folder))
    assert result.returncode == 1
    assert "does not depend on input bias" in result.stdout


@pytest.mark.e2e
def test_check_all_bundled_problems():
    result = gpuarena("check", str(ROOT / "problems"))
    assert result.returncode == 0, result.stdout
    assert "FAIL" not in result.stdout


@pytest.mark.e2e
def test_check_takes_a_bundled_id_like_run(tmp_path):
    """Every command that takes a problem takes a bundled id (it failed with "problem.toml: not
    found"); a missing one gets the loader's message, not a traceback."""
    result = gpuarena("check", "level1/softmax", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 of 1 problems ok" in result.stdout
    missing = gpuarena("check", "level1/no-such-problem", cwd=tmp_path)
    assert missing.returncode == 1 and "Traceback" not in missing.stderr


def test_a_local_problem_folder_names_the_server_s_problem(tmp_path):
    """`gpuarena submit problems/level1/softmax ...` (a folder, as `run` takes) asks the server
    for level1/softmax, not for "unknown problem" problems/level1/softmax."""
    from gpuarena.bundled import problem_id

    assert problem_id("level1/softmax") == "level1/softmax"
    assert problem_id(ROOT / "problems" / "level1" / "softmax") == "level1/softmax"
    copy = tmp_path / "contest" / "problems" / "level2" / "mine"
    copy.mkdir(parents=True)
    (copy / "problem.toml").write_text((ROOT / "problems" / "level1" / "softmax" / "problem.toml").read_text())
    assert problem_id(copy) == "level2/mine"
    lone = tmp_path / "lone"
    lone.mkdir()
    (lone / "problem.toml").write_text("")
    assert problem_id(lone) == "lone"


@pytest.mark.e2e
def test_schema_command_writes_schemas(tmp_path):
    assert gpuarena("schema", "-o", str(tmp_path)).returncode == 0
    assert {p.name for p in tmp_path.iterdir()} >= {"problem.schema.json", "evaluation.schema.json"}


@pytest.mark.e2e
def test_bad_solutions_are_refused_with_the_reason_not_a_traceback(tmp_path):
    """The same checks as the server's door (an empty file, a folder whose manifest names
    '../' sources), in the user's words."""
    empty = tmp_path / "empty.py"
    empty.write_text("\n")
    result = gpuarena("run", "level1/softmax", str(empty), "--device", "cpu")
    assert result.returncode != 0 and "empty.py is empty" in result.stderr, result.stderr
    assert "Traceback" not in result.stderr and "pydantic" not in result.stderr
    folder = tmp_path / "sneaky"
    folder.mkdir()
    (folder / "solution.toml").write_text(
        'language = "pytorch"\nentry_point = "../x.py:solve"\nsources = ["../x.py"]\n'
    )
    (tmp_path / "x.py").write_text("def solve(x):\n    return x\n")
    result = gpuarena("run", "level1/softmax", str(folder), "--device", "cpu")
    assert result.returncode != 0 and "'..' parts" in result.stderr, result.stderr


@pytest.mark.e2e
def test_a_problem_s_time_limit_is_shown_and_ends_an_infinite_loop(tmp_path):
    """Per-problem, per-mode limits ([time_limits] in problem.toml): `gpuarena run` says the
    limit it runs under and a `while True: pass` ends TIMEOUT there, not after 10 minutes."""
    import shutil
    import time

    problem = tmp_path / "axpy_dest"
    shutil.copytree(ROOT / "tests" / "fixtures" / "problems" / "axpy_dest", problem)
    with (problem / "problem.toml").open("a") as toml:
        toml.write("\n[time_limits]\ntest = 8\n")
    loop = tmp_path / "loop.py"
    loop.write_text("def solve(a, x, b, y):\n    while True:\n        pass\n")
    started = time.monotonic()
    result = gpuarena("run", str(problem), str(loop), "--device", "cpu", "--mode", "test")
    assert result.returncode == 1 and "time limit 8 s in test mode" in result.stderr
    assert "TIMEOUT" in result.stdout and time.monotonic() - started < 60
    from gpuarena.problems import resolve_problem

    assert resolve_problem(problem).spec.time_limit_for("ranked") == 600.0  # the defaults for the others


@pytest.mark.e2e
def test_run_verbose_shows_where_the_time_went():
    result = gpuarena(
        "run", "level1/softmax", str(EXAMPLES / "softmax" / "pytorch.py"), *FAST, "--mode", "test", "--verbose"
    )
    assert result.returncode == 0, result.stdout + result.stderr
    line = next(line for line in result.stdout.splitlines() if line.startswith("phases: "))
    assert "start-up" in line and "build" in line and "correctness" in line and "timing" not in line
    assert (
        "phases:"
        not in gpuarena(
            "run", "level1/softmax", str(EXAMPLES / "softmax" / "pytorch.py"), *FAST, "--mode", "test"
        ).stdout
    )


@pytest.mark.e2e
def test_run_starts_its_worker_ahead_and_leaves_nothing_behind(tmp_path):
    """`gpuarena run` starts the worker before importing torch itself (the imports overlap);
    the run takes it, and a run refused before it starts (an unknown workload) stops it: no
    worker folder is left either way."""
    env = {"TMPDIR": str(tmp_path)}
    refused = gpuarena(
        "run",
        "level1/softmax",
        str(EXAMPLES / "softmax" / "pytorch.py"),
        "--device",
        "cpu",
        "--workload",
        "no-such-workload",
        env=env,
    )
    assert refused.returncode != 0 and "no-such-workload" in refused.stdout + refused.stderr
    assert not list(tmp_path.glob("gpuarena-run-*"))
    ran = gpuarena(
        "run", "level1/softmax", str(EXAMPLES / "softmax" / "pytorch.py"), *FAST, "--mode", "test", "--json", env=env
    )
    assert ran.returncode == 0, ran.stderr
    assert not list(tmp_path.glob("gpuarena-run-*"))


@pytest.mark.e2e
@pytest.mark.parametrize("code, status, stderr", [("3", 3, ""), ("None", 0, ""), ("'bad input'", 1, "bad input")])
def test_a_run_leaves_without_teardown_but_pays_what_an_exit_owes(code, status, stderr):
    """`gpuarena run` ends with `leave`: the exit status SystemExit would give, atexit hooks run
    and output flushed (a non-daemon thread finished first); only the interpreter's teardown is skipped."""
    program = (
        "import atexit, sys, threading, time\n"
        "from gpuarena.cli import app\n"
        "atexit.register(lambda: print('hook ran'))\n"
        "threading.Thread(target=lambda: (time.sleep(0.2), print('thread done'))).start()\n"
        "sys.stdout.write('unflushed')\n"
        f"app.leave({code})\n"
    )
    result = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=120)
    assert result.returncode == status
    assert result.stdout.startswith("unflushed") and "thread done" in result.stdout and "hook ran" in result.stdout
    assert stderr in result.stderr


@pytest.mark.harness
def test_the_console_script_s_early_worker_is_taken_only_for_the_device_it_was_started_for():
    """`gpuarena run` starts its worker before the CLI's imports (cli/entry.py), reading --device
    itself; `run` takes that worker only for the device typer parsed, and closes it otherwise."""
    from gpuarena.cli import early
    from gpuarena.cli.entry import _option

    assert _option(["run", "p", "s", "--device", "cpu"], "--device") == "cpu"
    assert _option(["run", "p", "s", "--device=cuda:1"], "--device") == "cuda:1"
    assert _option(["run", "p", "s"], "--device") is None
    early.start("cpu")
    started = early._started[1]
    taken = early.take("cpu")
    try:
        assert taken is started and taken.alive()
    finally:
        taken.close()
    early.start("cpu")
    stale = early._started[1]
    other = early.take(None)  # no --device given: another start than `cpu`
    try:
        assert other is not stale and not stale.alive() and early._started is None
    finally:
        if other is not None:
            other.close()
