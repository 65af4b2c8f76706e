"""Building the harness's small CUPTI programs (the PM sampler, the range timer) with the C++
compiler against the CUDA toolkit found here, once per toolkit and source, into the cache.

Both need the toolkit's CUPTI headers and libraries, which PyTorch's wheels do not ship; a
GPU host without them still runs everything else, and the record says why the extra figure
is missing.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

from gpuarena.cache import cache_dir

DEFAULT_CUDA = "/usr/local/cuda"
CUPTI_PLACES = ("extras/CUPTI", "")
"""Where a CUDA install keeps CUPTI's include/ and lib64/: its own folder, or beside CUDA's."""


def cuda_home(header: str = "cupti_pmsampling.h") -> Path | None:
    """The first of $CUDA_HOME, $CUDA_PATH and /usr/local/cuda whose CUPTI has `header`."""
    for candidate in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), DEFAULT_CUDA):
        if candidate and has_header(Path(candidate), header):
            return Path(candidate)
    return None


def has_header(cuda: Path, header: str) -> bool:
    return any((cuda / place / "include" / header).is_file() for place in CUPTI_PLACES)


def compiler() -> str | None:
    return shutil.which("g++") or shutil.which("c++")


def compile_program(
    source: Path, cuda: Path, output: Path, link: bool = True, shared: bool = False, defines: tuple[str, ...] = ()
) -> subprocess.CompletedProcess:
    """Compile `source` against the toolkit at `cuda`: an executable, or a shared library with
    shared=True; link=False stops at the object file (a check that needs CUPTI's headers but no
    driver); defines: NAME=VALUE macros."""
    places = [cuda / place for place in CUPTI_PLACES]
    libs = [f"{place}/lib64" for place in places if (place / "lib64").is_dir()]
    command = [
        compiler() or "g++",
        "-O2",
        "-std=c++17",
        *(["-fPIC"] if shared else []),
        str(source),
        *[f"-I{place}/include" for place in places],
        *[f"-D{define}" for define in defines],
    ]
    if link:
        command += [
            *(["-shared"] if shared else []),
            *[f"-L{lib}" for lib in libs],
            f"-L{cuda}/lib64/stubs",
            "-lcupti",
            "-lcuda",
            *[f"-Wl,-rpath,{lib}" for lib in libs],
        ]
    else:
        command.append("-c")
    return subprocess.run([*command, "-o", str(output)], capture_output=True, text=True, timeout=300)


def build(
    source: Path,
    filename: str,
    what: str,
    header: str,
    needs: str,
    shared: bool = False,
    defines: Callable[[Path], tuple[str, ...]] | None = None,
) -> tuple[Path | None, str]:
    """`source` built into the cache as `filename` (once per toolkit and source), or None and
    why not; `what` names it in the reason, `needs` says which toolkit it takes; defines: the
    macros to build with, from the toolkit found."""
    cuda = cuda_home(header)
    if cuda is None:
        return None, f"no CUDA toolkit with {needs} (set CUDA_HOME)"
    if compiler() is None:
        return None, "no C++ compiler"
    macros = defines(cuda) if defines is not None else ()
    key = hashlib.sha256(source.read_bytes() + str(cuda.resolve()).encode() + repr(macros).encode()).hexdigest()[:16]
    target = cache_dir() / source.stem / key / filename
    if target.is_file():
        return target, ""
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(".tmp")
    done = compile_program(source, cuda, partial, shared=shared, defines=macros)
    if done.returncode != 0:
        return None, f"building the {what} failed: " + (done.stderr or done.stdout)[-500:]
    partial.rename(target)
    return target, ""
