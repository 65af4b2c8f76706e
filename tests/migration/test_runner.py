"""Running apps: the environment, entry points and commands, figures, time limits, the sandbox
(where bubblewrap runs here), and the check that nothing outside the working folder changed."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import numpy as np
import pytest

from gpuarena.harness.launch.containment import sandbox_problem
from gpuarena.migration.model import load_app
from gpuarena.migration.runner import run_app

from .helpers import make_app, tensor_app

needs_sandbox = pytest.mark.skipif(bool(sandbox_problem()), reason=f"no sandbox here: {sandbox_problem()}")


def run(folder: Path, tmp_path: Path, **kw):
    root = tmp_path / "run"
    root.mkdir()
    return run_app(folder, load_app(folder), root, **kw)


@pytest.mark.harness
def test_environment_and_entry_args(tmp_path):
    folder = make_app(
        tmp_path / "app",
        """
        import os, sys
        from pathlib import Path
        import numpy as np

        def main(scale):
            out = Path(os.environ["GPUARENA_APP_OUTPUT"])
            assert Path.cwd().name == "work" and sys.argv[1:] == [scale]
            value = int(os.environ["GPUARENA_APP_SEED"]) * int(scale)
            np.save(out / "y.npy", np.array([value]))
            print("device", os.environ["GPUARENA_APP_DEVICE"], "latency_ms =", 2.5)
        """,
        toml_extra='[performance]\nname = "latency_ms"\nregex = "latency_ms = ([0-9.]+)"\n',
        run='entry = "app.py:main"\nargs = ["3"]',
        top="seed = 7\nrepeats = 2",
    )
    result = run(folder, tmp_path, device="cpu")
    assert result.ran, result
    assert np.load(Path(result.output_dir) / "y.npy").tolist() == [21]
    assert result.figures == [2.5, 2.5] and len(result.runs) == 2
    assert "device cpu" in result.runs[0].stdout_tail


@pytest.mark.harness
def test_command_setup_and_failure(tmp_path):
    folder = make_app(
        tmp_path / "app",
        "import sys\nsys.exit(3)\n",
        run='command = ["python", "app.py"]',
        top="repeats = 1\nsetup = [[\"python\", \"-c\", \"open('built', 'w').write('x')\"]]",
    )
    result = run(folder, tmp_path)
    assert not result.ran and result.reason == "run 1 of 1 exited with status 3"
    assert result.setup[0].exit_code == 0


@pytest.mark.harness
def test_timeout_kills_the_group(tmp_path):
    folder = make_app(
        tmp_path / "app",
        """
        import subprocess, sys, time
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
        time.sleep(60)
        """,
        run='command = ["python", "app.py"]',
        top="repeats = 3\ntime_limit_s = 1",
    )
    start = time.monotonic()
    result = run(folder, tmp_path)
    assert time.monotonic() - start < 15
    assert not result.ran and result.runs[0].timed_out and result.runs[0].exit_code is None
    assert "passed the time limit of 1 s" in result.reason and len(result.runs) == 1


@pytest.mark.e2e
def test_writing_into_its_source_folder_fails(tmp_path, monkeypatch):
    # without the sandbox (which would not show the folder at all) the hash check catches it
    monkeypatch.setenv("GPUARENA_SANDBOX", "0")
    source = tmp_path / "app"
    tensor_app(
        source,
        extra_code=f"Path({str(source)!r}, 'app.py').write_text('# changed')\n"
        f"            Path({str(source)!r}, 'new.txt').write_text('x')",
    )
    result = run(source, tmp_path)
    assert not result.ran
    assert result.changed == ["app/app.py (changed)", "app/new.txt (added)"]
    assert "wrote outside its working folder" in result.reason and "app/app.py (changed)" in result.reason


@pytest.mark.e2e
def test_writing_into_the_golden_folder_fails(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUARENA_SANDBOX", "0")
    golden = tmp_path / "golden"
    golden.mkdir()
    (golden / "keep.txt").write_text("x")
    source = tensor_app(tmp_path / "app", extra_code=f"Path({str(golden)!r}, 'keep.txt').unlink()")
    result = run(source, tmp_path, protected={"golden": golden})
    assert not result.ran and result.changed == ["golden/keep.txt (removed)"]
    assert not result.sandboxed and "GPUARENA_SANDBOX=0" in result.containment


ATTEMPT = """
        import json, os
        from pathlib import Path
        import numpy as np

        def attempt(what, action):
            try:
                action()
                return "done"
            except OSError as exc:
                return type(exc).__name__

        def main():
            out = Path(os.environ["GPUARENA_APP_OUTPUT"])
            np.save(out / "y.npy", np.zeros(1, dtype=np.float32))
            tries = {}
            %s
            (out / "tries.json").write_text(json.dumps(tries))
        """


def attempts(result) -> dict[str, str]:
    return json.loads((Path(result.output_dir) / "tries.json").read_text())


@pytest.mark.harness
@needs_sandbox
def test_sandbox_keeps_the_golden_and_source_folders_unwritable(tmp_path):
    golden = tmp_path / "golden"
    golden.mkdir()
    (golden / "keep.txt").write_text("golden")
    source = tmp_path / "app"
    code = ATTEMPT % "; ".join(
        [
            f"tries['golden'] = attempt('golden', lambda: Path({str(golden)!r}, 'keep.txt').write_text('changed'))",
            f"tries['golden_new'] = attempt('golden', lambda: Path({str(golden)!r}, 'new.txt').write_text('x'))",
            f"tries['source'] = attempt('source', lambda: Path({str(source)!r}, 'app.py').write_text('# changed'))",
            "tries['work'] = attempt('work', lambda: Path('made_here.txt').write_text('x'))",
        ]
    )
    make_app(source, code)
    before = (source / "app.py").read_text()
    result = run(source, tmp_path, protected={"golden": golden})
    assert result.ran, result.reason
    assert result.sandboxed and result.containment.startswith("bubblewrap:")
    tries = attempts(result)
    assert tries["golden"] != "done" and tries["golden_new"] != "done" and tries["source"] != "done"
    assert tries["work"] == "done"  # its working copy is its own
    assert (golden / "keep.txt").read_text() == "golden" and sorted(os.listdir(golden)) == ["keep.txt"]
    assert (source / "app.py").read_text() == before and result.changed == []


@pytest.mark.harness
@needs_sandbox
def test_sandbox_hides_the_supervisors_files(tmp_path):
    secret = tmp_path / "private"
    secret.mkdir(mode=0o700)
    (secret / "token").write_text("TOPSECRET")
    os.chmod(secret / "token", 0o600)
    code = ATTEMPT % (
        f"tries['secret'] = attempt('read', lambda: print(Path({str(secret / 'token')!r}).read_text()))"
        "; tries['net'] = sorted(l.split(':')[0].strip() for l in open('/proc/net/dev').readlines()[2:])"
    )
    source = make_app(tmp_path / "app", code)
    result = run(source, tmp_path)
    assert result.ran, result.reason
    tries = attempts(result)
    assert tries["secret"] in ("FileNotFoundError", "PermissionError")
    assert "TOPSECRET" not in result.runs[0].stdout_tail
    assert tries["net"] == ["lo"]  # a network namespace of its own: loopback only


@pytest.mark.harness
@needs_sandbox
@pytest.mark.parametrize("how", ["time limit", "exit"])
def test_sandbox_kills_what_the_app_left_running(tmp_path, how):
    # a daemon of its own session (out of the app's process group, which is all the unsandboxed
    # path kills) that writes a heartbeat into the working copy
    code = """
        import os, sys, time
        from pathlib import Path
        import numpy as np

        def main():
            np.save(Path(os.environ["GPUARENA_APP_OUTPUT"]) / "y.npy", np.zeros(1))
            if os.fork() == 0:
                os.setsid()
                if os.fork() == 0:
                    end = time.time() + 20
                    while time.time() < end:
                        Path("heartbeat").write_text(repr(time.time()))
                        time.sleep(0.05)
                os._exit(0)
            time.sleep(0.5)
            %s
        """ % ("time.sleep(60)" if how == "time limit" else "")
    source = make_app(tmp_path / "app", code, top="repeats = 1\ntime_limit_s = 2")
    result = run(source, tmp_path)
    if how == "time limit":
        assert not result.ran and result.runs[0].timed_out
    else:
        assert result.ran, result.reason
    heartbeat = tmp_path / "run" / "work" / "heartbeat"
    assert heartbeat.is_file()  # it did run
    first = heartbeat.read_text()
    time.sleep(0.5)
    assert heartbeat.read_text() == first, "a process the app started is still running"
    assert result.sandboxed


@pytest.mark.harness
def test_a_symbolic_link_in_the_output_folder_is_not_read(tmp_path):
    secret = tmp_path / "secret.json"
    secret.write_text('{"tokens_per_s": 1}')
    folder = make_app(
        tmp_path / "app",
        f"""
        import os
        from pathlib import Path

        def main():
            out = Path(os.environ["GPUARENA_APP_OUTPUT"])
            (out / "y.npy").symlink_to({str(secret)!r})
        """,
    )
    result = run(folder, tmp_path)
    assert not result.ran and "y.npy (symbolic link)" in result.reason and "not a plain file" in result.reason


@pytest.mark.harness
def test_unreadable_figure_is_reported(tmp_path):
    folder = make_app(
        tmp_path / "app",
        """
        import os
        from pathlib import Path
        import numpy as np

        def main():
            np.save(Path(os.environ["GPUARENA_APP_OUTPUT"]) / "y.npy", np.ones(1))
            print("no figure here")
        """,
        toml_extra='[performance]\nname = "tokens_per_s"\nregex = "tps=(\\\\S+)"\n',
    )
    result = run(folder, tmp_path)
    assert result.ran and result.figures == []
    assert "found nothing in stdout" in result.runs[0].figure_error


@pytest.mark.harness
def test_a_command_that_cannot_start(tmp_path):
    folder = make_app(tmp_path / "app", "", run='command = ["./no-such-program"]')
    result = run(folder, tmp_path)
    assert not result.ran and "could not be started" in result.reason
