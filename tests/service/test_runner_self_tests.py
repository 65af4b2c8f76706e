"""A real `gpuarena runner` runs the languages' self-tests before its hello (issue 50): its slot,
as the server lists it, carries each language's outcome under "self-test:LANGUAGE", its log has a
line each, and a passed outcome is kept so that the next start does not pay again. The other
languages' outcomes are put in the cache first, so the runner judges pytorch's program only."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import pytest
from tests.service.conftest import ROOT

from gpuarena import language_check
from gpuarena.language_check import SelfTestResult
from gpuarena.solutions import languages


@pytest.mark.e2e
def test_a_runner_s_slot_carries_its_languages_self_tests(api, live, tmp_path, monkeypatch) -> None:
    if not api.settings.database_url.startswith("sqlite"):
        pytest.skip("the database plays no part here: the run on SQLite is enough")
    cache = tmp_path / "cache"
    monkeypatch.setenv("GPUARENA_CACHE", str(cache))
    ahead = [f.name for f in languages.registered() if f.name != "pytorch" and not language_check.why_skipped(f, "cpu")]
    for name in ahead:  # passed at an "earlier start", with this very software
        language_check.keep(SelfTestResult(name, "cpu", "passed"), "cpu")
    headers = api.user("box", "runner")
    token_file = tmp_path / "runner-token"
    token_file.write_text(headers["Authorization"].removeprefix("Bearer ") + "\n")
    token_file.chmod(0o600)
    process = subprocess.Popen(
        [sys.executable, "-m", "gpuarena.cli", "runner", "--server", live, "--token-file", str(token_file)]
        + ["--name", "tested", "--devices", "cpu", "--no-prewarm"],
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "HOME": str(tmp_path), "GPUARENA_CACHE": str(cache)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 180
        while not (found := [r for r in api.http.get("/api/runners", headers=headers).json() if r["name"] == "tested"]):
            assert process.poll() is None, process.communicate()[1]
            assert time.monotonic() < deadline, "the runner did not say hello"
            time.sleep(0.2)
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            log = process.communicate(timeout=60)[1]
        except subprocess.TimeoutExpired:
            process.kill()
            log = process.communicate()[1]
    software = found[0]["devices"][0]["software"]
    assert software["self-test:pytorch"] == "passed", software
    assert software["self-test:cuda"] == "skipped: runs on cuda only"
    assert all(software[f"self-test:{name}"] == "passed" for name in ahead)
    assert {f"self-test:{f.name}" for f in languages.registered()} <= set(software)
    assert "self-test of pytorch on cpu: passed in" in log, log
    assert all(f"self-test of {name} on cpu: passed (kept from an earlier start)" in log for name in ahead), log
    assert language_check.cached("pytorch", "cpu", "cpu") is not None  # the next start does not pay again
