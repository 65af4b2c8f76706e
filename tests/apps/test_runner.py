"""Running apps: the environment, entry points and commands, figures, time limits, and the
check that nothing outside the working folder changed."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from gpuarena.apps.model import load_app
from gpuarena.apps.runner import run_app

from .helpers import make_app, tensor_app


def run(folder: Path, tmp_path: Path, **kw):
    root = tmp_path / "run"
    root.mkdir()
    return run_app(folder, load_app(folder), root, **kw)


def test_environment_and_entry_args(tmp_path):
    folder = make_app(tmp_path / "app", """
        import os, sys
        from pathlib import Path
        import numpy as np

        def main(scale):
            out = Path(os.environ["GPUARENA_APP_OUTPUT"])
            assert Path.cwd().name == "work" and sys.argv[1:] == [scale]
            value = int(os.environ["GPUARENA_APP_SEED"]) * int(scale)
            np.save(out / "y.npy", np.array([value]))
            print("device", os.environ["GPUARENA_APP_DEVICE"], "latency_ms =", 2.5)
        """, toml_extra='[performance]\nname = "latency_ms"\nregex = "latency_ms = ([0-9.]+)"\n',
        run='entry = "app.py:main"\nargs = ["3"]', top="seed = 7\nrepeats = 2")
    result = run(folder, tmp_path, device="cpu")
    assert result.ran, result
    assert np.load(Path(result.output_dir) / "y.npy").tolist() == [21]
    assert result.figures == [2.5, 2.5] and len(result.runs) == 2
    assert "device cpu" in result.runs[0].stdout_tail


def test_command_setup_and_failure(tmp_path):
    folder = make_app(tmp_path / "app", "import sys\nsys.exit(3)\n", run='command = ["python", "app.py"]',
                      top='repeats = 1\nsetup = [["python", "-c", "open(\'built\', \'w\').write(\'x\')"]]')
    result = run(folder, tmp_path)
    assert not result.ran and result.reason == "run 1 of 1 exited with status 3"
    assert result.setup[0].exit_code == 0


def test_timeout_kills_the_group(tmp_path):
    folder = make_app(tmp_path / "app", """
        import subprocess, sys, time
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
        time.sleep(60)
        """, run='command = ["python", "app.py"]', top="repeats = 3\ntime_limit_s = 1")
    start = time.monotonic()
    result = run(folder, tmp_path)
    assert time.monotonic() - start < 15
    assert not result.ran and result.runs[0].timed_out and result.runs[0].exit_code is None
    assert "passed the time limit of 1 s" in result.reason and len(result.runs) == 1


def test_writing_into_its_source_folder_fails(tmp_path):
    source = tmp_path / "app"
    tensor_app(source, extra_code=f"Path({str(source)!r}, 'app.py').write_text('# changed')\n"
                                  f"            Path({str(source)!r}, 'new.txt').write_text('x')")
    result = run(source, tmp_path)
    assert not result.ran
    assert result.changed == ["app/app.py (changed)", "app/new.txt (added)"]
    assert "wrote outside its working folder" in result.reason and "app/app.py (changed)" in result.reason


def test_writing_into_the_golden_folder_fails(tmp_path):
    golden = tmp_path / "golden"
    golden.mkdir()
    (golden / "keep.txt").write_text("x")
    source = tensor_app(tmp_path / "app", extra_code=f"Path({str(golden)!r}, 'keep.txt').unlink()")
    result = run(source, tmp_path, protected={"golden": golden})
    assert not result.ran and result.changed == ["golden/keep.txt (removed)"]


def test_unreadable_figure_is_reported(tmp_path):
    folder = make_app(tmp_path / "app", """
        import os
        from pathlib import Path
        import numpy as np

        def main():
            np.save(Path(os.environ["GPUARENA_APP_OUTPUT"]) / "y.npy", np.ones(1))
            print("no figure here")
        """, toml_extra='[performance]\nname = "tokens_per_s"\nregex = "tps=(\\\\S+)"\n')
    result = run(folder, tmp_path)
    assert result.ran and result.figures == []
    assert "found nothing in stdout" in result.runs[0].figure_error


def test_a_command_that_cannot_start(tmp_path):
    folder = make_app(tmp_path / "app", "", run='command = ["./no-such-program"]')
    result = run(folder, tmp_path)
    assert not result.ran and "could not be started" in result.reason
