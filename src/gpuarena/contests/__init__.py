"""Contest scoring: pure functions from a contest's configuration and its judged entries to
standings, resubmission flags and similarity flags. The service calls them; nothing here
touches a database."""

from gpuarena.contests.model import Contest, Entry, Row, Standings
from gpuarena.contests.rules import RULES, standings

__all__ = ["RULES", "Contest", "Entry", "Row", "Standings", "standings"]
