"""The scoring rules, by the name a contest's configuration gives (Contest.rule.name)."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from gpuarena.contests.model import Contest, Entry, Standings
from gpuarena.contests.rules import ccf_dataset, ccf_kernel, ccf_migration, fast_p, fastest
from gpuarena.contests.table import EntryTable

RuleFunction = Callable[[Contest, Iterable[Entry] | EntryTable], Standings]

RULES: dict[str, RuleFunction] = {
    "fastest": fastest.standings,
    "fast_p": fast_p.standings,
    "ccf-kernel": ccf_kernel.standings,
    "ccf-dataset": ccf_dataset.standings,
    "ccf-migration": ccf_migration.standings,
}


def standings(contest: Contest, entries: Iterable[Entry] | EntryTable) -> Standings:
    """The contest's standings under its own rule, from entries or from their columns
    (table.py, what the service keeps and large contests need): the same standings either way."""
    return RULES[contest.rule.name](contest, entries)
