"""The worker's sandbox (harness/launch/containment.py): what a solution can see and start, checked
through real runs on this machine (bubblewrap, cgroups where the machine gives them)."""

from __future__ import annotations

import fnmatch
import os
import shutil
from pathlib import Path

import pytest

from conftest import EXAMPLES, judge
from gpuarena.harness.inside.sandbox import default_memory_limit
from gpuarena.harness.launch import cgroup, containment
from gpuarena.harness.launch.worker_env import scrubbed_env

ROOT = Path(__file__).resolve().parents[1]

needs_bwrap = pytest.mark.skipif(
    bool(not containment.bwrap_path() or containment.bwrap_problem(containment.bwrap_path())),
    reason="bubblewrap cannot make a sandbox here",
)


def _solution(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "solution.py"
    path.write_text("import os\nimport torch\n\n" + body)
    return path


def _argv(tmp_path: Path, gpu: bool, gpu_files: tuple[str, ...] | list[str] = ()) -> list[str]:
    run = tmp_path / "run"
    (run / "work").mkdir(parents=True)
    return containment.sandbox_argv(
        "/usr/bin/bwrap",
        run,
        run / "work",
        gpu=gpu,
        network=True,
        tmpfs_bytes=1 << 28,
        env=scrubbed_env(),
        gpu_files=gpu_files,
    )


@pytest.mark.harness
@needs_bwrap
def test_the_worker_runs_in_a_sandbox_and_the_record_says_so(softmax_small):
    record = softmax_small(ROOT / "examples" / "softmax" / "pytorch.py")
    assert record.status == "PASSED", record.reason
    assert record.environment.worker_containment.startswith("bubblewrap: PID, mount")
    if os.geteuid() == 0:
        assert "(no capabilities)" in record.log  # nothing to read past: the view holds what it needs


def test_a_cpu_run_s_view_has_no_gpu_device_files_and_no_home_or_repository(tmp_path):
    argv = _argv(tmp_path, gpu=False)
    binds = [argv[i + 1] for i, a in enumerate(argv) if a in ("--ro-bind", "--bind", "--dev-bind")]
    assert "--dev-bind" not in argv
    assert not any(b.startswith("/dev/nvidia") for b in binds)
    for secret in ("/root", os.path.expanduser("~"), str(ROOT), str(ROOT / ".gpuarena"), "/"):
        assert secret not in binds, secret
    assert str(ROOT / "src") in binds  # the package itself (an editable install)
    assert argv.count("--tmpfs") >= 3  # /tmp, /dev/shm and the worker's own folder


def test_a_gpu_run_s_view_has_the_gpu_device_files(tmp_path, monkeypatch):
    argv = _argv(tmp_path, gpu=True, gpu_files=["/dev/nvidia0", "/dev/nvidiactl"])
    assert ["--dev-bind", "/dev/nvidia0", "/dev/nvidia0"] == argv[
        argv.index("--dev-bind") : argv.index("--dev-bind") + 3
    ]


def _driver_table(tmp_path: Path, models: list[str]) -> tuple[Path, Path]:
    """A stand-in for /proc/driver/nvidia/gpus and /dev on a host of len(models) GPUs."""
    table, devices = tmp_path / "gpus", tmp_path / "dev"
    devices.mkdir()
    for name in ("nvidiactl", "nvidia-uvm", "nvidia-uvm-tools", "nvidia-modeset", "dri", "null"):
        (devices / name).touch()
    for index, model in enumerate(models):
        folder = table / f"0000:{0x18 + index * 0x10:02x}:00.0"
        folder.mkdir(parents=True)
        (folder / "information").write_text(
            f"Model: \t\t {model}\nIRQ:   \t\t 100\nGPU UUID: \t GPU-{index}aaaa-bbbb\nDevice Minor: \t {index}\n"
        )
        (devices / f"nvidia{index}").touch()
    return table, devices


def test_a_gpu_job_sees_its_own_gpus_device_files_only(tmp_path):
    """Every /dev/nvidia* in each GPU job's sandbox let a child without CUDA_VISIBLE_DEVICES reach
    the GPUs where other users' runs were being timed."""
    from gpuarena.harness.launch.gpu_view import gpu_view

    table, devices = _driver_table(tmp_path, ["NVIDIA H200"] * 4)
    view = gpu_view({"CUDA_VISIBLE_DEVICES": "2"}, table, devices)
    shown = sorted(Path(f).name for f in view.files)
    assert shown == ["nvidia-modeset", "nvidia-uvm", "nvidia-uvm-tools", "nvidia2", "nvidiactl"]
    assert view.visible == "GPU-2aaaa-bbbb"  # by UUID: the sandbox numbers only the GPUs it can open
    assert "1 GPU(s) of 4" in view.described
    both = gpu_view({"CUDA_VISIBLE_DEVICES": "GPU-3aaaa,1"}, table, devices)
    assert both.visible == "GPU-3aaaa-bbbb,GPU-1aaaa-bbbb" and {"nvidia1", "nvidia3"} <= {
        Path(f).name for f in both.files
    }
    assert "nvidia0" not in {Path(f).name for f in both.files}


def test_where_the_gpus_cannot_be_told_apart_every_gpu_is_shown_and_said(tmp_path):
    from gpuarena.harness.launch.gpu_view import gpu_view

    mixed, devices = _driver_table(tmp_path, ["NVIDIA H200", "NVIDIA A100"])
    for env in (
        {},  # nothing named: the job may use them all
        {"CUDA_VISIBLE_DEVICES": "1"},  # CUDA's order may not be the bus order on mixed models
        {"CUDA_VISIBLE_DEVICES": "MIG-1234"},
        {"CUDA_VISIBLE_DEVICES": "7"},
    ):
        view = gpu_view(env, mixed, devices)
        assert view.visible is None and "every GPU" in view.described
        assert {"nvidia0", "nvidia1", "dri"} <= {Path(f).name for f in view.files}
    ordered = gpu_view({"CUDA_VISIBLE_DEVICES": "1", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}, mixed, devices)
    assert ordered.visible == "GPU-1aaaa-bbbb"
    assert gpu_view({"CUDA_VISIBLE_DEVICES": "0"}, tmp_path / "no-driver", devices).visible is None


def test_no_home_folder_is_bound_for_a_bin_folder_in_it(monkeypatch):
    env = {"PATH": f"/root/bin:/usr/bin:{os.path.expanduser('~')}/bin:/home/ann/bin"}
    monkeypatch.setattr(os.path, "isdir", lambda p: True)
    tools = containment._tool_paths(env)
    assert not [t for t in tools if t.startswith(("/root", "/home", os.path.expanduser("~")))]
    assert "/usr/bin" in tools


def test_a_path_entry_shows_itself_never_its_parent_nor_a_temporary_folder(monkeypatch, tmp_path):
    """A PATH entry `X/bin` used to show the whole of X read-only: an organiser's wrapper in
    /tmp/bin replaced the worker's private /tmp with the host's. Each entry is now bound as
    itself, none under /tmp, /var/tmp or /dev/shm; a whole installation is named on purpose."""
    tool = tmp_path / "opt-tool"
    (tool / "bin").mkdir(parents=True)
    (tool / "secret").mkdir()
    monkeypatch.setattr(containment, "TEMPORARY_ROOTS", ("/var/tmp", "/dev/shm", "/nonexistent-tmp"))
    env = {"PATH": f"{tool / 'bin'}:/usr/bin"}
    tools = containment._tool_paths(env)
    assert str(tool / "bin") in tools and str(tool) not in tools
    monkeypatch.setattr(containment, "TEMPORARY_ROOTS", ("/tmp", "/var/tmp", "/dev/shm"))
    assert not [t for t in containment._tool_paths({"PATH": "/tmp/bin:/var/tmp/x:/usr/bin"}) if "tmp" in t]
    monkeypatch.setenv("GPUARENA_SANDBOX_TOOLS", str(tool))
    assert str(tool) in containment._tool_paths(env)  # named by the deployment: the whole installation


def test_a_compiler_s_own_installation_is_shown_as_it_names_it(monkeypatch, tmp_path):
    """A gcc in /opt/gcc/bin runs cc1 from /opt/gcc/libexec: the installation the compiler names
    (`-print-search-dirs`) is shown whole, not its PATH folder's parent (the lent H200's gcc)."""
    root = tmp_path / "opt-gcc"
    (root / "bin").mkdir(parents=True)
    (root / "libexec").mkdir()
    gcc = root / "bin" / "gcc"
    gcc.write_text(f"#!/bin/sh\necho 'install: {root}/lib/gcc/x86_64-linux-gnu/13/'\n")
    gcc.chmod(0o755)
    monkeypatch.setattr(containment, "TEMPORARY_ROOTS", ("/var/tmp", "/dev/shm", "/nonexistent-tmp"))
    containment._compiler_root.cache_clear()
    tools = containment._tool_paths({"PATH": f"{root / 'bin'}:/usr/bin"})
    assert str(root) in tools and str(root / "bin") in tools


@pytest.mark.harness
@needs_bwrap
def test_files_written_to_dev_shm_stay_in_the_sandbox(softmax_small, tmp_path):
    solution = _solution(
        tmp_path,
        """
def solve(x):
    with open("/dev/shm/gpuarena-test-left-behind", "wb") as f:
        f.write(b"x" * 4096)
    return torch.softmax(x, dim=-1)
""",
    )
    record = softmax_small(solution, mode="test")
    assert record.status == "PASSED", record.reason
    assert not Path("/dev/shm/gpuarena-test-left-behind").exists()


@pytest.mark.harness
@needs_bwrap
def test_shared_anonymous_memory_counts_against_the_memory_limit(tmp_path):
    """RLIMIT_DATA does not count MAP_SHARED|MAP_ANONYMOUS memory; the cgroup does."""
    probe = cgroup.Cgroup.make(f"gpuarena-test-{os.getpid()}", 1 << 30)
    counts = probe.counts_memory
    probe.remove()
    if not counts:
        pytest.skip("no cgroup memory controller for the supervisor here")
    solution = _solution(
        tmp_path,
        """
import mmap

def solve(x):
    block = mmap.mmap(-1, 3 << 30, flags=mmap.MAP_SHARED | mmap.MAP_ANONYMOUS)
    for at in range(0, 3 << 30, 4096):
        block[at] = 1
    return torch.softmax(x, dim=-1)
""",
    )
    record = judge("level1/softmax", solution, mode="test", workloads=["small-64x1000"], memory_limit_bytes=1 << 30)
    assert record.status == "RUNTIME_ERROR", (record.status, record.reason)
    assert (
        "memory.limit_in_bytes 1024 MiB" in record.environment.worker_containment
        or "memory.max 1024 MiB" in record.environment.worker_containment
    )


@pytest.mark.harness
@needs_bwrap
def test_without_a_cgroup_the_memory_limit_is_watched_from_outside(tmp_path, monkeypatch, softmax_small):
    """Where no cgroup counts memory (cgroup v2 without the memory controller delegated, as on
    the lent H100), shared anonymous memory still counts: the supervisor sums the sandbox's
    resident memory from outside and kills it over the limit, with a reason that says so."""
    monkeypatch.setenv("GPUARENA_SANDBOX_CGROUP", "0")
    solution = _solution(
        tmp_path,
        """
import mmap

def solve(x):
    block = mmap.mmap(-1, 3 << 30, flags=mmap.MAP_SHARED | mmap.MAP_ANONYMOUS)
    for at in range(0, 3 << 30, 4096):
        block[at] = 1
    return torch.softmax(x, dim=-1)
""",
    )
    record = judge("level1/softmax", solution, mode="test", workloads=["small-64x1000"], memory_limit_bytes=1 << 30)
    assert record.status == "RUNTIME_ERROR", (record.status, record.reason)
    assert "went over its memory limit" in record.reason and "limit 1024 MiB" in record.reason
    assert "memory watched from outside (1024 MiB resident)" in record.environment.worker_containment
    assert "memory.max" not in record.environment.worker_containment
    honest = softmax_small(EXAMPLES / "softmax" / "pytorch.py", memory_limit_bytes=1 << 30)
    assert honest.status == "PASSED", honest.reason  # a worker's own footprint stays under it


@pytest.mark.harness
@needs_bwrap
def test_the_run_leaves_no_cgroup_behind(softmax_small):
    # the cgroups this process made (named after its pid): other test processes run beside it
    mine = f"gpuarena-{os.getpid()}-*"
    before = _cgroups_named(mine) if os.geteuid() == 0 else set()
    softmax_small(ROOT / "examples" / "softmax" / "pytorch.py", mode="test")
    after = _cgroups_named(mine) if os.geteuid() == 0 else set()
    assert after <= before


def _cgroups_named(pattern: str) -> set[str]:
    """The cgroups under /sys/fs/cgroup named like `pattern`. Other test processes make and
    remove cgroups meanwhile: one that goes while it is being listed is skipped (Path.rglob
    raised FileNotFoundError on the fresh clone's CI)."""
    found: set[str] = set()
    for folder, children, _ in os.walk("/sys/fs/cgroup", onerror=lambda _: None):
        found.update(os.path.join(folder, name) for name in fnmatch.filter(children, pattern))
    return found


@pytest.mark.harness
@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap not installed")
def test_the_sandbox_can_be_turned_off_and_the_record_says_so(softmax_small, monkeypatch):
    monkeypatch.setenv("GPUARENA_SANDBOX", "0")
    record = softmax_small(ROOT / "examples" / "softmax" / "pytorch.py", mode="test")
    assert record.status == "PASSED", record.reason
    assert record.environment.worker_containment.startswith("none: no sandbox (turned off")


@pytest.mark.harness
@needs_bwrap
def test_each_worker_has_a_tmp_of_its_own(softmax_small, tmp_path):
    """Inductor keeps its cache in /tmp/torchinductor_$USER, a folder only its maker may enter: a
    later worker of another user hit the folder an earlier one made (PermissionError), and a second
    torch.compile solution in a row failed. Each worker now has its own /tmp and TMPDIR, so what
    one worker leaves there the next never sees. (One torch.compile solution is judged by the
    red-team corpus's honest/torch_compile; two in a row took 31 s of the lane.)"""
    solution = tmp_path / "leaves_a_folder.py"
    solution.write_text(LEAVES_A_FOLDER)
    for _ in range(2):
        record = softmax_small(solution, mode="test")
        assert record.status == "PASSED", record.reason


LEAVES_A_FOLDER = """import os
import tempfile

import torch

for _tmp in sorted({"/tmp", tempfile.gettempdir()}):
    _left = os.path.join(_tmp, "gpuarena-left-by-a-worker")
    if os.path.exists(_left):
        raise RuntimeError(f"{_left} was left by an earlier worker")
    os.makedirs(_left, mode=0o700)


def solve(x):
    return torch.softmax(x, dim=-1)
"""


def test_a_data_folder_inside_a_readable_folder_is_hidden(tmp_path, monkeypatch):
    """A checkout on PYTHONPATH holds serve.sh's `.gpuarena/` (database, tokens): the view
    mounts an empty tmpfs over it."""
    checkout = tmp_path / "checkout"
    (checkout / ".gpuarena").mkdir(parents=True)
    (checkout / ".gpuarena" / "gpuarena.db").write_text("secret")
    env = {**scrubbed_env(), "PYTHONPATH": str(checkout)}
    monkeypatch.setattr(containment, "_WORKER_SYS_PATH", None)
    run = tmp_path / "run"
    (run / "work").mkdir(parents=True)
    try:
        argv = containment.sandbox_argv(
            "/usr/bin/bwrap", run, run / "work", gpu=False, network=True, tmpfs_bytes=1 << 28, env=env
        )
    finally:
        containment._WORKER_SYS_PATH = None
    assert str(checkout) in argv
    at = argv.index(str(checkout / ".gpuarena"))
    assert argv[at - 1] == "--tmpfs"


def test_the_worker_s_import_path_is_kept_on_disk_until_the_site_folders_change(tmp_path, monkeypatch):
    """A fresh interpreter is asked for its import path once; later processes read the answer
    from the cache, and a .pth file added to site-packages (an editable install) asks again."""
    import sysconfig

    monkeypatch.setenv("GPUARENA_CACHE", str(tmp_path / "cache"))
    site = tmp_path / "site"
    site.mkdir()
    real_get_path = sysconfig.get_path
    monkeypatch.setattr(
        containment.sysconfig,
        "get_path",
        lambda name, *a, **k: str(site) if name == "purelib" else real_get_path(name, *a, **k),
    )
    asked: list[list[str]] = []
    real_run = containment.subprocess.run

    def counted(argv, *args, **kwargs):
        asked.append(argv)
        return real_run(argv, *args, **kwargs)

    monkeypatch.setattr(containment.subprocess, "run", counted)
    env = scrubbed_env()
    monkeypatch.setattr(containment, "_WORKER_SYS_PATH", None)
    first = containment._worker_sys_path(env)
    assert len(asked) == 1 and first and any("python3" in p or "lib" in p for p in first)
    assert (tmp_path / "cache" / "worker-sys-path.json").is_file()
    containment._WORKER_SYS_PATH = None  # a new process
    assert containment._worker_sys_path(env) == first and len(asked) == 1
    (site / "editable.pth").write_text(str(tmp_path) + "\n")
    containment._WORKER_SYS_PATH = None
    containment._worker_sys_path(env)
    assert len(asked) == 2
    containment._WORKER_SYS_PATH = None
    containment._worker_sys_path({**env, "PYTHONPATH": str(tmp_path)})
    assert len(asked) == 3
    containment._WORKER_SYS_PATH = None


def test_the_memory_cap_is_half_the_machine_shared_by_the_workers_its_gpus_may_run():
    """A runner has a slot per GPU, so as many workers may run at once: with half the machine
    each, two could take all of it (a 64 GiB hog passed on a 251 GiB machine of two H200s)."""
    gib = 1 << 30
    assert default_memory_limit(128 * gib, gpus=1) == 64 * gib
    assert default_memory_limit(128 * gib, gpus=0) == 64 * gib  # no GPU: one worker at a time
    assert default_memory_limit(251 * gib, gpus=2) < 64 * gib
    assert default_memory_limit(560 * gib, gpus=8) == 35 * gib
    assert default_memory_limit(8 * gib, gpus=8) == 4 * gib  # never under 4 GiB
    assert default_memory_limit() >= 4 * gib


def test_the_host_s_other_gpus_are_hidden_in_sys_and_proc(tmp_path):
    """/sys bound whole showed every GPU of the host to each job (its PCI folder: identity, link,
    NUMA node): the other GPUs' folders are mounted over, empty, after /sys and /proc."""
    from gpuarena.harness.launch.gpu_view import gpu_view

    table, devices = _driver_table(tmp_path, ["NVIDIA H200"] * 3)
    sys_root = tmp_path / "sys"
    for bus in sorted(p.name for p in table.iterdir()):
        real = sys_root / "devices" / "pci0000:00" / bus
        real.mkdir(parents=True)
        (sys_root / "bus" / "pci" / "devices").mkdir(parents=True, exist_ok=True)
        (sys_root / "bus" / "pci" / "devices" / bus).symlink_to(real)
    view = gpu_view({"CUDA_VISIBLE_DEVICES": "1"}, table, devices, sys_root)
    buses = sorted(p.name for p in table.iterdir())
    expected = {str(table / buses[i]) for i in (0, 2)} | {
        str(sys_root / "devices" / "pci0000:00" / buses[i]) for i in (0, 2)
    }
    assert set(view.hidden) == expected  # the real folders, not the links to them
    assert "the other 2 hidden" in view.described
    run = tmp_path / "run"
    (run / "work").mkdir(parents=True)
    argv = containment.sandbox_argv(
        "/usr/bin/bwrap",
        run,
        run / "work",
        gpu=True,
        network=True,
        tmpfs_bytes=1 << 28,
        env=scrubbed_env(),
        gpu_hidden=view.hidden,
    )
    assert argv.index("/sys") < min(argv.index(folder) for folder in view.hidden)
    assert all(argv[argv.index(folder) - 1] == "--tmpfs" for folder in view.hidden)
    assert gpu_view({"CUDA_VISIBLE_DEVICES": "0"}, table, devices, tmp_path / "no-sys").hidden == tuple(
        str(table / bus) for bus in buses[1:]
    )


@pytest.mark.harness
@needs_bwrap
def test_a_hidden_gpu_s_pci_folder_is_empty_inside_the_sandbox(tmp_path):
    """The mechanism on this machine's own /sys: one PCI device's folder is mounted over (a
    GPU's, on a GPU host) and the sandbox sees it empty, while its neighbours stay readable."""
    pci = Path("/sys/bus/pci/devices")
    devices = sorted(pci.iterdir()) if pci.is_dir() else []
    if len(devices) < 2:
        pytest.skip("this machine shows fewer than two PCI devices")
    hidden, kept = os.path.realpath(devices[0]), os.path.realpath(devices[1])
    run = tmp_path / "run"
    (run / "work").mkdir(parents=True)
    argv = containment.sandbox_argv(
        containment.bwrap_path(),
        run,
        run / "work",
        gpu=True,
        network=True,
        tmpfs_bytes=1 << 28,
        env=scrubbed_env(),
        gpu_hidden=[hidden],
    )
    import subprocess

    listed = subprocess.run(
        [*argv, "--", "/bin/sh", "-c", f"ls -A {hidden} | wc -l; ls -A {kept} | wc -l"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert listed.returncode == 0, listed.stderr
    assert [int(n) for n in listed.stdout.split()][0] == 0
    assert [int(n) for n in listed.stdout.split()][1] > 0
