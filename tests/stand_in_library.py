"""A stand-in for a driver library (libcuda.so.1), built from C in a test's folder: what the
harness's torch-free pieces ask of the driver, seen without a GPU."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

COMPILER = shutil.which("gcc") or shutil.which("cc")


def built(folder: Path, source: str, name: str = "libcuda.so.1") -> Path:
    """`source` compiled into `folder/name` (a test without a C compiler is skipped); run a
    process with LD_LIBRARY_PATH=folder to have it load this one."""
    if COMPILER is None:
        pytest.skip("no C compiler")
    c_file, library = folder / "stand_in.c", folder / name
    c_file.write_text(source)
    done = subprocess.run([COMPILER, "-shared", "-fPIC", str(c_file), "-o", str(library)], capture_output=True)
    assert done.returncode == 0, done.stderr
    return library
