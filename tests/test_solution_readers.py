"""Solution readers are registered, not sniffed (issue 50): solutions/ reads its own format and
imports no feature; gpuarena/solution_readers.py registers the others, and every format still
loads through the public load functions, the CLI's and the service's."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from tests.migration.helpers import tensor_app

import gpuarena.solution_readers  # noqa: F401  (registers every format's reader)
from gpuarena.errors import FormatError
from gpuarena.solutions import load_solution
from gpuarena.solutions import readers as registry
from gpuarena.solutions.loader import solution_from_upload

ROOT = Path(__file__).resolve().parents[1]
KERNELBENCH = ROOT / "tests" / "interop" / "fixtures" / "kernelbench" / "solutions" / "conv_new.py"
GPUMODE = ROOT / "tests" / "interop" / "fixtures" / "gpumode" / "submissions" / "vectoradd_ok.py"
NATIVE = ROOT / "examples" / "softmax" / "pytorch.py"


def fresh(code: str) -> str:
    """What a fresh interpreter prints for code (nothing registered beforehand)."""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def imported_flashinfer(folder: Path, name: str) -> Path:
    """A folder as `gpuarena import flashinfer-solution` leaves one: solution.toml and flashinfer.json."""
    folder.mkdir()
    (folder / "kernel.py").write_text("def solve(x):\n    return x\n")
    (folder / "solution.toml").write_text('language = "pytorch"\nentry_point = "kernel.py:solve"\n')
    (folder / "flashinfer.json").write_text(json.dumps({"solution": {"name": name}}))
    return folder


def test_the_readers_are_tried_in_the_stated_order():
    assert [r.name for r in registry.source_readers()] == ["kernelbench", "gpumode", "native"]
    assert [r.name for r in registry.folder_readers()] == ["app", "flashinfer", "native"]


def test_solutions_alone_imports_no_feature_and_reads_its_own_format():
    probe = (
        "import sys\n"
        "from gpuarena.solutions import load_solution, readers\n"
        f"solution = load_solution({str(KERNELBENCH)!r})\n"
        "print([r.name for r in readers.source_readers()], [r.name for r in readers.folder_readers()],"
        " solution.manifest.entry_point,"
        " sorted(m for m in sys.modules if m.startswith(('gpuarena.interop', 'gpuarena.migration'))))"
    )
    assert fresh(probe) == "['native'] ['native'] conv_new.py:solve []"


def test_each_format_loads_through_the_public_functions(tmp_path):
    kernelbench = load_solution(KERNELBENCH)
    assert kernelbench.manifest.entry_point == "kernelbench_adapter.py:solve"
    assert set(kernelbench.sources) == {"conv_new.py", "kernelbench_adapter.py"}
    assert solution_from_upload("conv_new.py", KERNELBENCH.read_bytes()) == kernelbench
    gpumode = load_solution(GPUMODE)
    assert gpumode.manifest.entry_point == "gpumode_adapter.py:solve"
    assert solution_from_upload("vectoradd_ok.py", GPUMODE.read_bytes()) == gpumode
    assert load_solution(NATIVE).manifest.entry_point == "pytorch.py:solve"
    port = load_solution(tensor_app(tmp_path / "port"))
    assert port.manifest.language == "app" and "app.toml" in port.sources
    assert load_solution(imported_flashinfer(tmp_path / "folder_name", "imported_name")).name == "imported_name"


def test_errors_are_said_as_before(tmp_path):
    with pytest.raises(FormatError, match=r"s.py is empty.*write solve\(\) in it"):
        solution_from_upload("s.py", b"")
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "flashinfer.json").write_text("{}")
    with pytest.raises(FormatError, match="solution.toml: not found"):
        load_solution(broken)
    bad_sidecar = imported_flashinfer(tmp_path / "bad_sidecar", "x")
    (bad_sidecar / "flashinfer.json").write_text("{not json")
    assert load_solution(bad_sidecar).name == "bad_sidecar"  # said by `gpuarena export solution`, not here


@pytest.mark.e2e
def test_the_faces_register_every_reader():
    """The CLI's commands and the service's uploads register the readers before loading."""
    service = fresh(
        "import gpuarena.service.routes, gpuarena.service.web.actions\n"
        "from gpuarena.solutions import readers\n"
        "print([r.name for r in readers.source_readers()], [r.name for r in readers.folder_readers()])"
    )
    assert service == "['kernelbench', 'gpumode', 'native'] ['app', 'flashinfer', 'native']"
    packed = subprocess.run(
        [sys.executable, "-m", "gpuarena.cli", "pack", str(GPUMODE)], capture_output=True, text=True, cwd=ROOT
    )
    assert packed.returncode == 0, packed.stderr
    assert json.loads(packed.stdout)["manifest"]["entry_point"] == "gpumode_adapter.py:solve"
