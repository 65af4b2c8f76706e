"""A solution's compile caches are kept between its own runs (build_cache.py), and are nobody
else's: real runs on the CPU with a worker of its own user per run (root only), and the
keeping itself against what a worker may plant (links, pipes, too much)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from conftest import judge
from gpuarena.harness.launch import build_cache

# writes a mark into its compile cache at import; a run that finds one left by an earlier run
# answers with zeros (WRONG_VALUES), so the verdict says whether anything was left for it
LEAVES_A_MARK = """
import os, pathlib, torch
CACHE = pathlib.Path(os.environ["TRITON_CACHE_DIR"])
MARK = CACHE / "left-behind.json"
FOUND = MARK.exists()
CACHE.mkdir(parents=True, exist_ok=True)
MARK.write_text("{tag}")

def solve(x):
    return torch.zeros_like(x) if FOUND else torch.softmax(x, dim=-1)
"""

FOLDER = ".cache"


def keep(solution_hash: str, workdir: Path) -> int:
    fd = build_cache.open_parent(workdir / FOLDER, None)
    try:
        return build_cache.keep(solution_hash, fd, FOLDER)
    finally:
        os.close(fd)


def restore(solution_hash: str, workdir: Path, owner: tuple[int, int] | None = None) -> int:
    fd = build_cache.open_parent(workdir / FOLDER, None)
    try:
        return build_cache.restore(solution_hash, fd, FOLDER, owner)
    finally:
        os.close(fd)


needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="a worker user of its own per run needs root")


@pytest.fixture
def store(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUARENA_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("GPUARENA_WORKER_ISOLATION", "1")
    monkeypatch.delenv("GPUARENA_WORKER_UID", raising=False)
    return tmp_path / "cache" / "solution-caches"


@pytest.mark.harness
@needs_root
def test_a_solution_finds_what_its_own_earlier_run_compiled_and_nothing_of_another_s(tmp_path, store):
    first = tmp_path / "a.py"
    first.write_text(LEAVES_A_MARK.format(tag="a"))
    other = tmp_path / "b.py"
    other.write_text(LEAVES_A_MARK.format(tag="b") + "# another solution: another hash\n")
    run = lambda path: judge("level1/softmax", path, workloads=["small-64x1000"])  # noqa: E731
    assert run(first).status == "PASSED"  # nothing kept yet
    assert [p.name for p in store.iterdir()] and (
        next(store.iterdir()) / "triton" / "left-behind.json"
    ).read_text() == "a"
    assert run(other).status == "PASSED"  # a's caches are not b's
    assert run(first).status == "WRONG_VALUES"  # its own are back: the mark it left was found


def test_only_regular_files_are_kept_never_links_or_pipes(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUARENA_CACHE", str(tmp_path / "cache"))
    work = tmp_path / "work"
    cache = work / FOLDER / "triton"
    cache.mkdir(parents=True)
    (cache / "kernel.cubin").write_bytes(b"\x7fELF built")
    os.utime(cache / "kernel.cubin", ns=(1_000_000_000, 1_000_000_000))  # a build tool compares times
    (cache / "launcher.so").write_bytes(b"lib")
    (cache / "launcher.so").chmod(0o755)
    secret = tmp_path / "supervisor-secret"
    secret.write_text("not the worker's")
    (cache / "link-to-a-file").symlink_to(secret)
    (cache / "link-to-a-folder").symlink_to(tmp_path)
    os.mkfifo(cache / "a-pipe")  # reading it would block the supervisor
    assert keep("hash1", work) == 2
    kept = build_cache.store("hash1") / "triton"
    assert sorted(p.name for p in kept.iterdir()) == ["kernel.cubin", "launcher.so"]
    assert os.access(kept / "launcher.so", os.X_OK) and not os.access(kept / "kernel.cubin", os.X_OK)
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    assert restore("hash1", fresh) == 2
    assert (fresh / FOLDER / "triton" / "kernel.cubin").read_bytes() == b"\x7fELF built"
    assert (fresh / FOLDER / "triton" / "kernel.cubin").stat().st_mtime_ns == 1_000_000_000
    assert restore("another-hash", fresh) == 0


def test_a_cache_folder_that_is_a_link_or_too_large_is_not_kept(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUARENA_CACHE", str(tmp_path / "cache"))
    linked = tmp_path / "linked"
    linked.mkdir()
    (linked / FOLDER).symlink_to(tmp_path)
    assert keep("h", linked) == 0 and not build_cache.store("h").exists()
    big = tmp_path / "big"
    (big / FOLDER).mkdir(parents=True)
    with open(big / FOLDER / "huge", "wb") as f:
        f.truncate(build_cache.MAX_BYTES + 1)  # sparse: no disk used
    assert keep("h", big) == 0 and not build_cache.store("h").exists()


def test_a_later_run_replaces_what_was_kept(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUARENA_CACHE", str(tmp_path / "cache"))
    for round_, name in enumerate(("old", "new")):
        work = tmp_path / f"work{round_}"
        (work / FOLDER).mkdir(parents=True)
        (work / FOLDER / f"{name}.json").write_text(name)
        keep("h", work)
    assert [p.name for p in build_cache.store("h").iterdir()] == ["new.json"]
    assert sorted(p.name for p in build_cache.store("h").parent.iterdir()) == ["h"]  # no partial copies left


def test_restored_files_belong_to_the_worker(tmp_path, monkeypatch):
    if os.geteuid() != 0:
        pytest.skip("chown needs root")
    monkeypatch.setenv("GPUARENA_CACHE", str(tmp_path / "cache"))
    work = tmp_path / "work"
    (work / FOLDER / "sub").mkdir(parents=True)
    (work / FOLDER / "sub" / "f.o").write_text("x")
    keep("h", work)
    target = tmp_path / "target"
    target.mkdir()
    restore("h", target, (4242, 4343))
    for path in (target / FOLDER, target / FOLDER / "sub", target / FOLDER / "sub" / "f.o"):
        assert (path.stat().st_uid, path.stat().st_gid) == (4242, 4343), path
    assert Path(target / FOLDER).stat().st_mode & 0o777 == 0o700


def test_only_what_compilers_make_is_kept_counted_in_blocks_on_disk(tmp_path, monkeypatch):
    """A kept folder is a channel from one run to the next and a claim on the host's disk: the
    solution's own files are not kept, nor a sparse file that costs the sandbox nothing and
    would cost the host its full size."""
    monkeypatch.setenv("GPUARENA_CACHE", str(tmp_path / "cache"))
    work = tmp_path / "work"
    (work / FOLDER / "torch_extensions" / "ext").mkdir(parents=True)
    (work / FOLDER / "torch_extensions" / "ext" / "ext.so").write_bytes(b"\x7fELF" + bytes(4096))
    (work / FOLDER / "torch_extensions" / "ext" / "build.ninja").write_text("rule cc")
    (work / FOLDER / "notes-for-my-next-run.txt").write_text("the inputs looked like ...")
    with open(work / FOLDER / "zeros.so", "wb") as f:
        f.truncate(1 << 30)  # sparse: no disk used in the sandbox's tmpfs
    assert keep("h", work) == 2
    kept = sorted(str(p.relative_to(build_cache.store("h"))) for p in build_cache.store("h").rglob("*") if p.is_file())
    assert kept == ["torch_extensions/ext/build.ninja", "torch_extensions/ext/ext.so"]


def test_a_deep_chain_of_folders_is_walked_without_recursion(tmp_path, monkeypatch):
    """A 1,500-deep chain made the recursive walk raise RecursionError in the supervisor."""
    monkeypatch.setenv("GPUARENA_CACHE", str(tmp_path / "cache"))
    work = tmp_path / "work"
    (work / FOLDER).mkdir(parents=True)
    (work / FOLDER / "top.o").write_text("kept")
    fd = os.open(work / FOLDER, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for _ in range(1500):  # relative steps: the path is longer than PATH_MAX
            os.mkdir("d", dir_fd=fd)
            deeper = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = deeper
        with open(os.open("deep.o", os.O_WRONLY | os.O_CREAT, 0o600, dir_fd=fd), "w") as f:
            f.write("too deep to keep")
    finally:
        os.close(fd)
    try:
        assert keep("h", work) == 1
        assert [p.name for p in build_cache.store("h").iterdir()] == ["top.o"]
    finally:
        _remove_chain(work / FOLDER)


def _remove_chain(top: Path) -> None:
    """Remove a chain of `d` folders from the bottom up, without recursion (shutil.rmtree, and
    pytest's clean-up of old temporary folders, recurse and fail on it)."""
    fds = [os.open(top, os.O_RDONLY | os.O_DIRECTORY)]
    while True:
        try:
            fds.append(os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fds[-1]))
        except FileNotFoundError:
            break
    for name in os.listdir(fds[-1]):
        os.unlink(name, dir_fd=fds[-1])
    os.close(fds.pop())
    while fds:
        os.rmdir("d", dir_fd=fds[-1])
        os.close(fds.pop())


def test_many_entries_are_not_kept(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUARENA_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(build_cache, "MAX_ENTRIES", 50)
    work = tmp_path / "work"
    (work / FOLDER).mkdir(parents=True)
    for i in range(60):
        (work / FOLDER / f"{i}.o").write_text("x")
    assert keep("h", work) == 0 and not build_cache.store("h").exists()


def test_the_least_recently_used_caches_go_beyond_the_quota(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUARENA_CACHE", str(tmp_path / "cache"))
    for age, name in enumerate(("oldest", "middle", "newest")):
        work = tmp_path / name
        (work / FOLDER).mkdir(parents=True)
        (work / FOLDER / "lib.so").write_bytes(os.urandom(64 << 10))
        keep(name, work)
        os.utime(build_cache.store(name), (1_000_000 + age, 1_000_000 + age))
    (tmp_path / "fresh").mkdir()
    restore("oldest", tmp_path / "fresh")  # used again: now the most recent
    size = sum(p.lstat().st_blocks * 512 for p in build_cache.store("middle").rglob("*"))
    assert build_cache.expire(2 * size + 4096) == ["middle"]
    assert sorted(p.name for p in build_cache.store("x").parent.iterdir()) == ["newest", "oldest"]
