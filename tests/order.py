"""The order a lane's tests start in (a pytest plugin, loaded by tests/conftest.py): longest first,
dealt out in turn to the lane's test processes.

pytest-xdist hands each process a contiguous share of the collection and lets an idle process
take half of another's queue. In file order a lane's longest test (the organisers' walk: 160 s of
the e2e lane's 930 s on the 2-core CI machine) could start last and run alone at the end. The
durations of the slowest tests are kept in tests/slowest.json (`python scripts/slowest.py LOG`
refreshes it from test.sh's output); a test not in it counts as short. Sorting is stable and
the same in every process, as xdist requires."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

SLOWEST = Path(__file__).with_name("slowest.json")


def dealt(nodeids: list[str], seconds: dict[str, float], processes: int) -> list[str]:
    """`nodeids` longest first, dealt in turn into `processes` contiguous shares: each share
    starts with its longest test and the shares' totals come out close."""
    ranked = sorted(nodeids, key=lambda nodeid: -seconds.get(nodeid, 0.0))
    return [nodeid for share in range(processes) for nodeid in ranked[share::processes]]


@pytest.hookimpl(trylast=True)  # after -m and -k have deselected: the lane's own tests are dealt
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    processes = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "0"))
    if processes < 2 or not SLOWEST.exists():
        return
    seconds = json.loads(SLOWEST.read_text())
    by_id = {item.nodeid: item for item in items}
    items[:] = [by_id[nodeid] for nodeid in dealt(list(by_id), seconds, processes)]
