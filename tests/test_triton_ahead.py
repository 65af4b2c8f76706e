"""What a worker started ahead on a GPU warms of Triton's first launch besides its cache key
(harness/inside/triton_key.py): ptxas's version for each visible device's arch, read through
libcuda without torch, so the backend's hash at the solution's first compile is a cache hit."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from tests.stand_in_library import built

# libcuda's four calls for the devices' capabilities: two devices, 9.0 and 8.0 (attributes 75 and 76)
STAND_IN = r"""
#include <stdlib.h>
int cuInit(unsigned flags) { return getenv("STAND_IN_FAIL") ? 3 : 0; }
int cuDeviceGetCount(int* count) { *count = 2; return 0; }
int cuDeviceGet(int* device, int ordinal) { *device = ordinal; return 0; }
int cuDeviceGetAttribute(int* value, int attribute, int device) {
    if (attribute == 75) { *value = device == 0 ? 9 : 8; return 0; }
    if (attribute == 76) { *value = 0; return 0; }
    return 1;
}
"""


def _run(code: str, env: dict[str, str] | None = None) -> str:
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def _archs(tmp_path: Path, fail: bool = False) -> str:
    built(tmp_path, STAND_IN)
    env = {**os.environ, "LD_LIBRARY_PATH": str(tmp_path)}
    if fail:
        env["STAND_IN_FAIL"] = "1"
    return _run("from gpuarena.harness.inside import triton_key; print(triton_key.device_archs())", env)


@pytest.mark.quick
def test_the_devices_archs_are_read_from_libcuda(tmp_path):
    assert _archs(tmp_path) == "[80, 90]"  # each distinct capability once, as Triton numbers them


@pytest.mark.quick
def test_a_driver_that_fails_gives_no_arch(tmp_path):
    assert _archs(tmp_path, fail=True) == "[]"


@pytest.mark.quick
def test_the_backend_s_hash_finds_ptxas_s_version_warmed():
    """The backend's hash at a first compile calls ptxas (twice) unless the version was read
    ahead for the device's arch; after `ptxas_versions`, the hash is a hit of Triton's own cache."""
    pytest.importorskip("triton.backends.nvidia.compiler")
    code = """
from triton.backends.compiler import GPUTarget
from triton.backends.nvidia.compiler import CUDABackend, get_ptxas_version
from gpuarena.harness.inside.triton_key import ptxas_versions
ptxas_versions([90])
before = get_ptxas_version.cache_info()
CUDABackend(GPUTarget("cuda", 90, 32)).hash()
after = get_ptxas_version.cache_info()
print(before.misses, after.misses, after.hits - before.hits)
"""
    assert _run(code) == "1 1 1"  # read once ahead; the hash missed nothing and hit once
