"""Building the harness's CUPTI programs (harness/device/cupti_build.py), for each of them: the PM
sampler of the device audit and the range timer. What runs without a GPU: the refusals with a
reason, the compiler's words on a broken toolkit, and a compile-only check against this
machine's CUDA headers. Linking and running them happen on an NVIDIA GPU."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from gpuarena.harness.device import cupti_build, device_audit, range_timer

BUILDS = {
    "PM sampler": (device_audit.build_sampler, device_audit.compile_sampler, "cupti_pmsampling.h", ()),
    "range timer": (
        range_timer.build_range_timer,
        range_timer.compile_range_timer,
        "cupti_range_profiler.h",
        ("grt_open", "grt_start", "grt_stop", "grt_read", "grt_error", "grt_close"),
    ),
}
OTHER_HEADER = {"cupti_pmsampling.h": "cupti_range_profiler.h", "cupti_range_profiler.h": "cupti_pmsampling.h"}


@pytest.fixture
def toolkit(tmp_path, monkeypatch):
    """A CUDA install of the test's making, the only one the build can find."""
    include = tmp_path / "cuda/extras/CUPTI/include"
    include.mkdir(parents=True)
    monkeypatch.setenv("CUDA_HOME", str(tmp_path / "cuda"))
    monkeypatch.delenv("CUDA_PATH", raising=False)
    monkeypatch.setenv("GPUARENA_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(cupti_build, "DEFAULT_CUDA", str(tmp_path / "no-usr-local-cuda"))
    return include


@pytest.mark.parametrize("what", BUILDS)
def test_no_toolkit_is_refused_with_a_reason(what, toolkit):
    build, _, _, _ = BUILDS[what]
    shutil.rmtree(toolkit.parents[2])
    built, why = build()
    assert built is None and "CUDA_HOME" in why


@pytest.mark.parametrize("what", BUILDS)
def test_a_toolkit_without_the_program_s_header_is_refused_and_builds_nothing(what, toolkit, tmp_path):
    build, _, header, _ = BUILDS[what]
    (toolkit / OTHER_HEADER[header]).write_text("/* the other program's header only */\n")
    built, why = build()
    assert built is None and "CUDA_HOME" in why
    assert not (tmp_path / "cache").exists()


@pytest.mark.parametrize("what", BUILDS)
def test_a_toolkit_without_a_usable_cupti_fails_the_build_with_the_compiler_s_words(what, toolkit):
    build, _, header, _ = BUILDS[what]
    (toolkit / header).write_text("#error not a real CUPTI header\n")
    assert cupti_build.cuda_home(header) == toolkit.parents[2]
    built, why = build()
    if why == "no C++ compiler":
        pytest.skip(why)
    assert built is None and why.startswith(f"building the {what} failed") and "error" in why


@pytest.mark.parametrize("what", BUILDS)
def test_the_program_compiles_against_this_machine_s_cupti_headers(what, tmp_path):
    """Compile only: no driver here to link against (the H100 built and ran both)."""
    _, compile_only, header, exported = BUILDS[what]
    cuda = cupti_build.cuda_home(header)
    if cuda is None or cupti_build.compiler() is None:
        pytest.skip(f"no CUDA toolkit with {header}, or no C++ compiler")
    done = compile_only(cuda, tmp_path / "program.o", link=False)
    assert done.returncode == 0, done.stderr
    if exported and shutil.which("nm"):
        symbols = subprocess.run(["nm", str(tmp_path / "program.o")], capture_output=True, text=True).stdout
        for name in exported:
            assert f" T {name}\n" in symbols, f"{name} is not exported with a C name"
