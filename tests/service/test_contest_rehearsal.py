"""The organiser's walk (docs/organiser.md), run as written: examples/contest_rehearsal.sh
starts a real server with its CPU runner, makes the accounts, a team contest with a freeze,
has a copy rejected, holds a late result back, ends the contest and pays a speed bounty to a
contestant. The organiser brings the freeze forward and ends the contest early (`gpuarena
contest reschedule`), so nothing waits on the clock: a slow machine cannot fail it. The script
checks each outcome itself and stops at the first that differs. This test runs it on SQLite
(GPUARENA_WALK_POSTGRES=1: on an empty PostgreSQL database too): the contest's rules on
PostgreSQL are the contest tests' own (test_contest_end_to_end.py, test_contest_schedule.py run
on both), and the walk twice took 2.5 minutes of CI's 2 cores for the same script."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from tests.databases import postgres_database
from tests.service.conftest import ROOT

pytestmark = pytest.mark.e2e


BACKENDS = ["sqlite", "postgresql"] if os.environ.get("GPUARENA_WALK_POSTGRES") == "1" else ["sqlite"]


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_organisers_walk_runs_as_written(backend: str, tmp_path: Path) -> None:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("GPUARENA_")}
    environment.update(
        PATH=f"{Path(sys.executable).parent}{os.pathsep}{environment.get('PATH', '')}",
        TMPDIR=str(tmp_path),
        GPUARENA_RUNNER_SELF_TEST="0",  # the languages' self-tests: tests/test_language_check.py
        GPUARENA_RUNNER_BUDGET="0.1",  # the jobs' timing: enough rounds for every bound, not a ranking's
    )

    def rehearse() -> subprocess.CompletedProcess:
        return subprocess.run(
            ["bash", str(ROOT / "examples" / "contest_rehearsal.sh")],
            env=environment,
            capture_output=True,
            text=True,
            timeout=600,
        )

    if backend == "postgresql":
        with postgres_database() as url:
            environment["GPUARENA_DATABASE_URL"] = url
            done = rehearse()
    else:
        done = rehearse()
    said = done.stdout + done.stderr
    assert done.returncode == 0 and "REHEARSAL PASSED" in said, said[-6000:]
    # What the walk shows a reader, beyond the checks inside the script:
    assert "403: only the organizers of rehearsal may do this" in said  # a contestant cannot review
    assert "only olga, who posted bounty 1, or an admin can pay it" in said  # nor pay her own claim
    assert "submissions no longer count" in said  # an entry after the organiser ended it
    assert "rank,contestant,total" in said and "1,blue,10" in said  # the final CSV
