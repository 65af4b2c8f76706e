"""The scoring rules, by the name a contest's configuration gives (Contest.rule.name)."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from gpuarena.contests.model import Contest, Entry, Standings
from gpuarena.contests.rules import ccf_dataset, ccf_kernel, ccf_migration, fast_p, fastest

RuleFunction = Callable[[Contest, Iterable[Entry]], Standings]

RULES: dict[str, RuleFunction] = {
    "fastest": fastest.standings,
    "fast_p": fast_p.standings,
    "ccf-kernel": ccf_kernel.standings,
    "ccf-dataset": ccf_dataset.standings,
    "ccf-migration": ccf_migration.standings,
}


def standings(contest: Contest, entries: Iterable[Entry]) -> Standings:
    """The contest's standings under its own rule."""
    return RULES[contest.rule.name](contest, entries)
