"""Migration targets as the service stores them, ports as submissions, and runners naming
their stack: golden folders packed and verified on the way back, ports read from their folders
(bad ones refused with a clear error), an app never built as a kernel, kinds with a stack."""

from __future__ import annotations

import base64

import pytest
from tests.migration.helpers import tensor_app

import gpuarena.solution_readers  # noqa: F401  (registers every format's reader)
from gpuarena.contracts.device import device_type
from gpuarena.contracts.wire import DeviceSlot
from gpuarena.errors import FormatError, GpuarenaError
from gpuarena.migration.golden import make_writable, record
from gpuarena.migration.job import evaluate_app
from gpuarena.migration.model import AppError
from gpuarena.migration.target import (
    discover_goldens,
    is_app,
    pack_golden,
    port_solution,
    target_spec,
    unpack_golden,
    write_port,
)
from gpuarena.runner.devices import advertise
from gpuarena.solutions.build import BuildError, build
from gpuarena.solutions.loader import load_solution
from gpuarena.solutions.model import Solution, SolutionManifest


@pytest.fixture(scope="module")
def golden_root(tmp_path_factory):
    """targets/migration/t: the golden record of a tiny app (y = [1, 2, 3]), made on the CPU."""
    root = tmp_path_factory.mktemp("targets")
    reference = tensor_app(root.parent / "reference-app", figure="100.0")
    record(reference, root / "migration" / "t", "cpu")
    yield root
    make_writable(root)


@pytest.mark.harness
def test_a_golden_folder_under_a_root_is_a_migration_target(golden_root) -> None:
    (found,) = discover_goldens(golden_root)
    assert found[0] == "migration/t"
    spec = target_spec(*found)
    assert is_app(spec) and spec["name"] == "t" and spec["workloads"] == []
    assert [o["file"] for o in spec["outputs"]] == ["y.npy"] and spec["golden_device"] == "cpu"


def test_a_packed_golden_comes_back_verified_and_read_only(golden_root, tmp_path) -> None:
    packed = pack_golden("migration/t", golden_root / "migration" / "t")
    assert set(packed.files) == {"app.toml", "golden.json", "outputs/y.npy"}
    folder = unpack_golden(packed, tmp_path)
    assert (folder / "outputs" / "y.npy").read_bytes() == (
        golden_root / "migration" / "t" / "outputs" / "y.npy"
    ).read_bytes()
    assert not (folder / "outputs" / "y.npy").stat().st_mode & 0o222
    assert unpack_golden(packed, tmp_path) == folder  # again: the same folder, nothing rewritten


def test_a_golden_altered_in_transit_or_in_its_content_is_refused(golden_root, tmp_path) -> None:
    packed = pack_golden("migration/t", golden_root / "migration" / "t")
    edited = dict(packed.files, **{"outputs/y.npy": base64.b64encode(b"forged").decode()})
    with pytest.raises(FormatError, match="does not match the files"):
        unpack_golden(packed.model_copy(update={"files": edited}), tmp_path / "a")
    rehashed = pack_golden("x", golden_root / "migration" / "t").model_copy(update={"files": edited})
    from gpuarena.contracts.packed import evaluation_hash

    rehashed = rehashed.model_copy(update={"hash": evaluation_hash(edited)})
    with pytest.raises(AppError, match="changed since it was recorded"):
        unpack_golden(rehashed, tmp_path / "b")


def test_a_port_folder_is_a_solution_of_language_app(tmp_path) -> None:
    port = tensor_app(tmp_path / "port")
    solution = load_solution(port)
    assert solution.manifest.language == "app" and solution.manifest.entry_point == "app.toml"
    assert set(solution.sources) == {"app.py", "app.toml"} and solution == port_solution(port)
    again = write_port(solution, tmp_path / "again")
    assert (again / "app.py").read_text() == (port / "app.py").read_text()


def test_bad_ports_are_refused_with_a_clear_error(tmp_path) -> None:
    binary = tensor_app(tmp_path / "binary")
    (binary / "weights.bin").write_bytes(bytes(range(256)))
    with pytest.raises(AppError, match="weights.bin: not UTF-8 text"):
        port_solution(binary)
    bad_toml = tensor_app(tmp_path / "bad")
    (bad_toml / "app.toml").write_text((bad_toml / "app.toml").read_text().replace("repeats = 1", "repeats = 0"))
    with pytest.raises(AppError, match="repeats"):
        port_solution(bad_toml)
    with pytest.raises(ValueError, match="needs its app.toml"):
        Solution(name="x", manifest=SolutionManifest(language="app", entry_point="app.toml"), sources={"a.py": "x"})


def test_an_app_is_never_built_as_a_kernel(tmp_path) -> None:
    with pytest.raises(BuildError, match="not a kernel"):
        build(port_solution(tensor_app(tmp_path / "port")), tmp_path / "build")


@pytest.mark.harness
def test_an_app_job_checks_the_port_and_scores_it(golden_root, tmp_path) -> None:
    packed = pack_golden("migration/t", golden_root / "migration" / "t")
    good = evaluate_app(
        packed, port_solution(tensor_app(tmp_path / "good", figure="100.0")), "cpu", "ranked", tmp_path / "cache"
    )
    assert good.status == "PASSED" and good.migration["ran"] and 100 <= good.score <= 150, good.reason
    assert good.score == good.migration["score"]["total"] and good.reason.startswith(f"{good.score:g} points")
    wrong = evaluate_app(
        packed,
        port_solution(tensor_app(tmp_path / "wrong", values="[1.0, 2.0, 4.0]")),
        "cpu",
        "ranked",
        tmp_path / "cache",
    )
    assert wrong.status == "PASSED" and 60 <= wrong.score < 100 and "0 of 1 outputs matched" in wrong.reason
    crash = evaluate_app(
        packed,
        port_solution(tensor_app(tmp_path / "crash", extra_code="raise SystemExit(3)")),
        "cpu",
        "ranked",
        tmp_path / "cache",
    )
    assert crash.status == "RUNTIME_ERROR" and crash.score == 0 and "did not run" in crash.reason


def test_a_runner_names_its_stack_in_its_device_kinds() -> None:
    slots = [
        DeviceSlot(device="cpu", kind="cpu", name="CPU"),
        DeviceSlot(device="cuda:0", kind="H100", name="NVIDIA H100 80GB HBM3"),
    ]
    plain = advertise(slots)
    assert [s.kind for s in plain] == ["cpu", "H100"] and plain[1].vendor == "NVIDIA"
    assert plain[0].vendor and plain[0].software["python"] and "torch" in plain[0].software
    stacked = advertise(slots, "maca-3.1")
    assert [(s.kind, s.stack) for s in stacked] == [("cpu@maca-3.1", "maca-3.1"), ("H100@maca-3.1", "maca-3.1")]
    assert [device_type(s.kind) for s in stacked] == ["cpu", "cuda"]
    with pytest.raises(GpuarenaError, match="--stack 'a b'"):
        advertise(slots, "a b")


@pytest.mark.harness
def test_a_port_cannot_copy_the_golden_outputs_it_is_checked_against(golden_root, tmp_path) -> None:
    """The runner's copy of the golden record lies outside what the sandbox shows: a port that
    knows its path and copies y.npy from it finds nothing there, so it does not match."""
    from gpuarena.harness.launch import containment

    if containment.sandbox_problem():
        pytest.skip(f"no sandbox here: {containment.sandbox_problem()}")
    packed = pack_golden("migration/t", golden_root / "migration" / "t")
    cache = tmp_path / "cache"
    stolen = unpack_golden(packed, cache) / "outputs" / "y.npy"
    copier = tensor_app(
        tmp_path / "copier",
        values="[0.0, 0.0, 0.0]",
        extra_code=(
            f"import shutil; shutil.copyfile({str(stolen)!r}, out / 'y.npy') if Path({str(stolen)!r}).exists() else None"
        ),
    )
    record_ = evaluate_app(packed, port_solution(copier), "cpu", "ranked", cache)
    assert record_.migration["sandboxed"], record_.migration["containment"]
    assert record_.status == "PASSED" and not record_.migration["outputs"][0]["matched"], record_.reason


@pytest.mark.e2e
def test_a_ranked_check_without_the_sandbox_is_the_runner_s_failure_not_a_verdict(
    golden_root, tmp_path, monkeypatch
) -> None:
    from gpuarena.migration.job import SandboxMissing

    monkeypatch.setenv("GPUARENA_SANDBOX", "0")
    packed = pack_golden("migration/t", golden_root / "migration" / "t")
    port = port_solution(tensor_app(tmp_path / "port"))
    with pytest.raises(SandboxMissing, match="needs the sandbox"):
        evaluate_app(packed, port, "cpu", "ranked", tmp_path / "cache")
    assert evaluate_app(packed, port, "cpu", "test", tmp_path / "cache").status == "PASSED"


def test_a_port_that_asks_for_more_time_than_the_runner_gives_is_refused_before_it_runs(golden_root, tmp_path) -> None:
    packed = pack_golden("migration/t", golden_root / "migration" / "t")
    greedy = tensor_app(tmp_path / "greedy", extra_code="(out / 'ran').write_text('yes')")
    toml = greedy / "app.toml"
    toml.write_text(
        toml.read_text().replace("time_limit_s = 30", "time_limit_s = 500").replace("repeats = 1", "repeats = 5")
    )
    refused = evaluate_app(packed, port_solution(greedy), "cpu", "test", tmp_path / "cache", timeout_s=600)
    assert refused.status == "COMPILE_ERROR" and "asks for up to 2500 s" in refused.reason
    assert refused.migration is None and refused.score is None


@pytest.mark.harness
def test_a_ranked_check_times_the_port_from_outside_so_a_boasting_port_gets_no_speed_points(
    golden_root, tmp_path
) -> None:
    """The port claims 10^9 tokens/s and is in fact slower (it sleeps): its own figure would earn
    the 50 speed-up points; a ranked check compares the wall times gpuarena measured instead."""
    packed = pack_golden("migration/t", golden_root / "migration" / "t")
    boaster = port_solution(tensor_app(tmp_path / "boaster", figure="1e9", extra_code="import time; time.sleep(1.0)"))
    believed = evaluate_app(packed, boaster, "cpu", "test", tmp_path / "cache")
    assert believed.migration["score"]["speed"] == 50, believed.reason
    ranked = evaluate_app(packed, boaster, "cpu", "ranked", tmp_path / "cache")
    performance = ranked.migration["performance"]
    assert performance["name"] == "wall_s" and performance["golden"]["samples"], performance
    assert performance["speedup"]["ratio"] < 1 and ranked.migration["score"]["speed"] == 0, performance
    assert ranked.migration["score"]["total"] == 100


@pytest.mark.harness
def test_a_port_runs_with_the_reference_s_seed_whatever_its_own_app_toml_says(tmp_path) -> None:
    code = """
        import os
        from pathlib import Path
        import numpy as np

        def main():
            out = Path(os.environ["GPUARENA_APP_OUTPUT"])
            np.save(out / "y.npy", np.array([float(os.environ["GPUARENA_APP_SEED"])], dtype=np.float32))
        """
    from tests.migration.helpers import make_app

    record(
        make_app(tmp_path / "reference", code, top="repeats = 1\ntime_limit_s = 30\nseed = 7"),
        tmp_path / "golden",
        "cpu",
    )
    port = make_app(tmp_path / "port", code, top="repeats = 1\ntime_limit_s = 30\nseed = 8")
    packed = pack_golden("migration/seeded", tmp_path / "golden")
    checked = evaluate_app(packed, port_solution(port), "cpu", "test", tmp_path / "cache")
    assert checked.migration["outputs"][0]["matched"], checked.migration["outputs"]
    make_writable(tmp_path / "golden")


def test_outside_timing_leaves_each_side_s_cold_first_run_out() -> None:
    from gpuarena.migration.check import _outside_performance
    from gpuarena.migration.runner import AppRun, RunResult

    runs = [RunResult(command=["x"], exit_code=0, wall_s=w) for w in (9.0, 1.0, 1.02, 0.98)]
    perf = _outside_performance(AppRun(ran=True, runs=runs, output_dir="/nowhere"), [12.0, 1.0, 1.01, 0.99], [])
    assert perf.samples == [1.0, 1.02, 0.98] and perf.golden.samples == [1.0, 1.01, 0.99]
    assert 0.9 < perf.speedup.ratio < 1.1


def test_outside_timing_times_setup_with_the_runs() -> None:
    """Setup runs once, before the runs, knowing their seed: a port that does all its work there
    and only copies outputs in its runs (0.05 s a run after 4 s of setup) gains nothing; an honest
    port's setup (a build) costs it its share, as the reference's setup costs the reference."""
    from gpuarena.migration.check import _outside_performance
    from gpuarena.migration.runner import AppRun, RunResult

    golden = [1.2, 1.0, 1.01, 0.99]
    setup = [RunResult(command=["precompute"], exit_code=0, wall_s=4.0)]
    runs = [RunResult(command=["x"], exit_code=0, wall_s=w) for w in (0.3, 0.05, 0.05, 0.05)]
    perf = _outside_performance(AppRun(ran=True, setup=setup, runs=runs, output_dir="/nowhere"), golden, [])
    assert perf.samples == [1.05, 1.05, 1.05] and perf.speedup.ratio < 1.0
    built = _outside_performance(AppRun(ran=True, setup=setup, runs=runs, output_dir="/nowhere"), golden, [4.0])
    assert built.golden.samples == [2.0, 2.01, 1.99] and 1.8 < built.speedup.ratio < 2.0
