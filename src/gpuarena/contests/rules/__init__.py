"""The scoring rules, by the name a contest's configuration gives (Contest.rule.name)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

from gpuarena.contests.model import Contest, Entry, Standings
from gpuarena.contests.rules import ccf_dataset, ccf_kernel, ccf_migration, fast_p, fastest
from gpuarena.contests.table import EntryTable

REJECTED_STATUS = "REJECTED"
"""The status a rejected entry is read with."""

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
    if not isinstance(entries, EntryTable):
        entries = counting(entries)
    return RULES[contest.rule.name](contest, entries)


def counting(entries: Iterable[Entry]) -> Iterator[Entry]:
    """The entries as every rule reads them: one an organizer rejected (a copy, say) passes
    no rule, in any rule (a rejected entry kept its points in a `fastest` contest); its
    contestant keeps a row. The table does the same (EntryTable.status_passed)."""
    for e in entries:
        yield e if e.accepted_by_organizer is not False else e.model_copy(update=_NOTHING)


_NOTHING: dict[str, object] = {
    "status": REJECTED_STATUS,
    **dict.fromkeys(("score", "score_low", "score_high", "judge_score"), None),
    "samples_accepted": 0,
    "samples_score": 0.0,
    "bonus": [],
}
"""What a rejected entry is read with: nothing any rule counts."""
