"""The kernel languages as a registry, one module each, and their self-tests (issue 50, after
DMOJ judge-server's executors and their `test_program`): each language's tiny program judged by
the real harness on the CPU, a broken one reported failed with the harness's reason, outcomes
kept in the cache, and a runner's slots carrying them (runner/self_tests.py; a real runner
process: tests/service/test_runner_self_tests.py)."""

from __future__ import annotations

import dataclasses
import importlib
import logging
from typing import get_args

import pytest

from gpuarena import language_check
from gpuarena.contracts.wire import DeviceSlot
from gpuarena.language_check import SelfTestResult, self_test, self_tests
from gpuarena.runner import self_tests as runner_self_tests
from gpuarena.solutions import languages, runtimes
from gpuarena.solutions.model import Language as ManifestLanguage

NOT_KERNELS = {"app", "sample"}
"""solution.toml's languages that are no kernel (a ported app, a dataset sample): no builder."""


def test_every_kernel_language_of_solution_toml_is_registered_by_a_module_of_its_own():
    kernels = set(get_args(ManifestLanguage)) - NOT_KERNELS
    assert {found.name for found in languages.registered()} == kernels
    assert len(languages.MODULES) == len(kernels)
    for found in languages.registered():
        module = importlib.import_module(f"gpuarena.solutions.languages.{found.name.replace('-', '_')}")
        assert module.LANGUAGE is found and module in languages.MODULES
        assert found.self_test.sources and set(found.self_test.devices) <= {"cpu", "cuda"}
    assert languages.get("app") is None and languages.get("sample") is None


def test_build_and_runtimes_read_the_registry():
    assert set(runtimes.STARTED_AHEAD) == {"jax", "tilelang", "cute-dsl", "helion"}
    assert runtimes.describe("pytorch") is None and runtimes.describe("triton") is None
    assert (runtimes.describe("tvm-ffi") or "").startswith("apache-tvm-ffi ")
    pytorch = languages.get("pytorch")
    assert pytorch is not None
    languages.register(dataclasses.replace(pytorch, package=languages.Package("gpuarena_no_such", "nothing")))
    try:
        with pytest.raises(runtimes.MissingPackage, match="pip install nothing"):
            runtimes.require("pytorch")
        assert language_check.why_skipped("pytorch", "cpu") == "nothing is not installed"
    finally:
        languages.register(pytorch)
    runtimes.require("pytorch")


@pytest.mark.harness
def test_the_pytorch_self_test_passes_on_the_cpu():
    result = self_test("pytorch", "cpu")
    assert (result.outcome, result.reason) == ("passed", "")


@pytest.mark.harness
def test_the_triton_self_test_passes_on_the_cpu_in_triton_s_interpreter(monkeypatch):
    pytest.importorskip("triton")
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    skipped = self_test("triton", "cpu")
    assert skipped.outcome == "skipped" and "TRITON_INTERPRET=1" in skipped.reason
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    result = self_test("triton", "cpu")
    assert (result.outcome, result.reason) == ("passed", "")


def test_a_language_s_self_test_is_skipped_off_its_devices():
    assert self_test("cuda", "cpu") == SelfTestResult("cuda", "cpu", "skipped", "runs on cuda only")


def _broken_pytorch(program: str) -> languages.Language:
    pytorch = languages.get("pytorch")
    assert pytorch is not None
    return dataclasses.replace(pytorch, self_test=dataclasses.replace(pytorch.self_test, sources={"solve.py": program}))


@pytest.mark.harness
def test_a_broken_self_test_program_is_reported_failed_with_the_harness_s_reason():
    wrong = self_test(_broken_pytorch("def solve(a, b):\n    return a - b\n"), "cpu")
    assert wrong.outcome == "failed" and wrong.reason.startswith("WRONG_VALUES: "), wrong
    assert wrong.summary().startswith("failed: WRONG_VALUES: ") and len(wrong.summary(40)) == 40


@pytest.mark.harness
def test_a_passed_self_test_is_kept_for_the_same_stack_and_kind_and_a_failure_is_not(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUARENA_CACHE", str(tmp_path))
    children: list[list[str]] = []

    def in_process(names, device, env):  # a runner's child process: tests/service/test_runner_self_tests.py
        children.append(names)
        return [self_test(name, device) for name in names]

    monkeypatch.setattr(language_check, "_in_child", in_process)
    first = self_tests("cpu", "cpu", ["pytorch", "cuda"])
    assert children == [["pytorch"]]
    assert [(r.language, r.outcome, r.cached) for r in first] == [
        ("pytorch", "passed", False),
        ("cuda", "skipped", False),
    ]
    again = self_tests("cpu", "cpu", ["pytorch"])
    assert (again[0].outcome, again[0].cached) == ("passed", True) and len(children) == 1
    assert language_check.cached("pytorch", "H100", "cpu") is None  # another kind: run again
    assert language_check.cache_key("pytorch", "cpu") != language_check.cache_key(_broken_pytorch("x = 1\n"), "cpu")
    language_check.keep(SelfTestResult("triton", "cpu", "failed", "COMPILE_ERROR: no"), "cpu")
    assert language_check.cached("triton", "cpu", "cpu") is None


def test_a_runner_s_slots_carry_their_kind_s_outcomes_and_the_log_a_line_each(monkeypatch, caplog):
    ran: list[tuple[str, str, dict]] = []

    def fake(kind, device, names=None, env=None, fresh=False):
        ran.append((kind, device, env))
        return [
            SelfTestResult("pytorch", device, "passed", duration_s=1.0),
            SelfTestResult("triton", device, "failed", "COMPILE_ERROR: triton is broken here"),
        ]

    monkeypatch.setattr(runner_self_tests, "self_tests", fake)
    shared = {"python": "3.11"}  # advertise() gives every slot the same dict
    slots = [
        DeviceSlot(device="cpu", kind="cpu", software=shared),
        DeviceSlot(device="cpu:1", kind="cpu", software=shared),
        DeviceSlot(device="cuda:3", kind="H100", software=shared),
        DeviceSlot(device="cuda:4", kind="B200", healthy=False, reason="gone", software=shared),
    ]
    with caplog.at_level(logging.INFO, logger="gpuarena.runner"):
        outcomes = runner_self_tests.run_self_tests(slots)
    assert sorted(outcomes) == ["H100", "cpu"]  # once per kind, not for a drained slot
    assert sorted(ran, key=str) == sorted(
        [("cpu", "cpu", {}), ("H100", "cuda", {"CUDA_VISIBLE_DEVICES": "3", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"})],
        key=str,
    )
    for slot in slots[:3]:
        assert slot.software["self-test:pytorch"] == "passed" and slot.software["python"] == "3.11"
        assert slot.software["self-test:triton"] == "failed: COMPILE_ERROR: triton is broken here"
        assert runner_self_tests.failed(slot, "triton") and not runner_self_tests.failed(slot, "pytorch")
    assert "self-test:pytorch" not in slots[3].software and shared == {"python": "3.11"}
    lines = [r.getMessage() for r in caplog.records if "self-test of" in r.getMessage()]
    assert len(lines) == 4 and any("triton on cpu: failed: COMPILE_ERROR" in line for line in lines)
    assert any(r.levelno == logging.WARNING and "triton" in r.getMessage() for r in caplog.records)


def test_the_runner_skips_its_self_tests_when_told(monkeypatch):
    monkeypatch.setenv("GPUARENA_RUNNER_SELF_TEST", "0")
    assert not runner_self_tests.wanted()
    monkeypatch.delenv("GPUARENA_RUNNER_SELF_TEST")
    assert runner_self_tests.wanted()


def test_gpuarena_languages_lists_each_language_its_package_and_its_kept_outcome(tmp_path, monkeypatch):
    import json

    from typer.testing import CliRunner

    from gpuarena.cli.app import app

    monkeypatch.setenv("GPUARENA_CACHE", str(tmp_path))
    language_check.keep(SelfTestResult("pytorch", "cpu", "passed"), "cpu")
    listed = CliRunner().invoke(app, ["languages", "--json"])
    assert listed.exit_code == 0, listed.output
    rows = {row["language"]: row for row in json.loads(listed.stdout)}
    assert set(rows) == {found.name for found in languages.registered()}
    assert rows["pytorch"]["self_test"] == "passed" and rows["pytorch"]["package"] == "torch"
    assert rows["cuda"]["self_test"] == "skipped: runs on cuda only"
    assert rows["jax"]["started_ahead"] and not rows["pytorch"]["started_ahead"]
    unknown = CliRunner().invoke(app, ["languages", "--language", "cobol"])
    assert unknown.exit_code == 2 and "not a kernel language" in unknown.output
