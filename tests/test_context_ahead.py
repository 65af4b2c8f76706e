"""A worker started ahead makes its CUDA context while it imports (harness/inside/context_ahead.py):
what it asks of libcuda, against a stand-in library that logs the calls, and which workers do it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.stand_in_library import built

from gpuarena.harness.launch.started import context_ordinal

# libcuda's three calls, each logged with its arguments; cuInit fails where STAND_IN_FAIL is set
STAND_IN = r"""
#include <stdio.h>
#include <stdlib.h>
static void note(const char* what, int value) {
    FILE* log = fopen(getenv("STAND_IN_LOG"), "a");
    fprintf(log, "%s %d\n", what, value);
    fclose(log);
}
int cuInit(unsigned flags) { note("cuInit", (int)flags); return getenv("STAND_IN_FAIL") ? 3 : 0; }
int cuDeviceGet(int* device, int ordinal) { note("cuDeviceGet", ordinal); *device = 40 + ordinal; return 0; }
int cuDevicePrimaryCtxRetain(void** context, int device) {
    note("cuDevicePrimaryCtxRetain", device); *context = (void*)1; return 0;
}
"""


def run_ahead(tmp_path: Path, ordinal: int, fail: bool = False) -> list[str]:
    """context_ahead.start(ordinal) then join() in a fresh interpreter over the stand-in; the calls it made."""
    built(tmp_path, STAND_IN)
    log = tmp_path / "calls.log"
    env = {**os.environ, "LD_LIBRARY_PATH": str(tmp_path), "STAND_IN_LOG": str(log)}
    if fail:
        env["STAND_IN_FAIL"] = "1"
    code = f"from gpuarena.harness.inside import context_ahead; context_ahead.start({ordinal}); context_ahead.join()"
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return log.read_text().splitlines() if log.exists() else []


def test_the_context_made_ahead_is_the_device_s_primary_one(tmp_path):
    assert run_ahead(tmp_path, 2) == ["cuInit 0", "cuDeviceGet 2", "cuDevicePrimaryCtxRetain 42"]


def test_a_driver_that_fails_leaves_the_context_to_prepare(tmp_path):
    assert run_ahead(tmp_path, 0, fail=True) == ["cuInit 0"]  # nothing retained, no error raised


def test_only_a_worker_prepared_on_a_cuda_device_makes_one(monkeypatch):
    assert context_ordinal("cuda:3") == 3 and context_ordinal("cuda") == 0
    assert context_ordinal(None) is None and context_ordinal("cpu") is None
    monkeypatch.setenv("GPUARENA_CONTEXT_AHEAD", "0")
    assert context_ordinal("cuda:0") is None
