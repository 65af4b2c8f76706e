"""The order a lane's tests start in (tests/order.py): longest first, dealt in turn to the test
processes, so no long test is left to run alone at a lane's end."""

from __future__ import annotations

import json

import pytest
from tests.order import SLOWEST, dealt


@pytest.mark.quick
def test_the_longest_tests_start_first_one_in_each_share():
    seconds = {"a": 160.0, "b": 120.0, "c": 108.0, "d": 5.0}
    order = dealt(["x", "d", "c", "y", "a", "b"], seconds, 2)
    assert order == ["a", "c", "x", "b", "d", "y"]  # shares [a, c, x] and [b, d, y]; unknown ones keep their order
    first, second = order[:3], order[3:]
    assert first[0] == "a" and second[0] == "b"
    assert sorted(order) == sorted(["x", "d", "c", "y", "a", "b"])


@pytest.mark.quick
def test_the_kept_durations_name_tests_by_their_ids():
    kept = json.loads(SLOWEST.read_text())
    assert kept and all(nodeid.startswith("tests/") and "::" in nodeid and s > 0 for nodeid, s in kept.items())
