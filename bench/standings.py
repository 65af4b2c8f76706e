#!/usr/bin/env python3
"""How long recomputing a contest's standings takes, for each scoring rule (issue 20's target:
under 1 s a rule for 10,000 contestants x 50 problems on the CPU VM, 2 cores).

    python3 bench/standings.py [--contestants 10000] [--problems 50] [--seed 0] [--repeat 3]
                               [--out bench/results/standings-cpu-vm.json]

Synthetic entries, seeded: every contestant submits every problem once in ranked mode on the
contest's device kind; one in ten pairs gets a second ranked submission (half of them real
improvements, half within the first's interval, so that resubmission screening has work), and
one in fifty an entry that never counts (before the start, another device kind, test mode).
Every entry carries the fields of every rule. Building the entries (pydantic validation) and
their columns (contests.table.EntryTable, what the service keeps per contest) are timed apart.
Each rule's figure is the best of --repeat calls of the rule's function on the columns, which
does everything a recomputation does: scope, screening, scoring, ranking, the Standings record;
entry_path_seconds is the same rule on the list of Entry records (the path tests and small
contests use; the same standings, tests/contests/test_table.py).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import random
import shlex
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from gpuarena.contests.model import BONUS_ITEMS, Contest, Entry  # noqa: E402
from gpuarena.contests.rules import RULES  # noqa: E402
from gpuarena.contests.table import EntryTable  # noqa: E402

START = dt.datetime(2026, 12, 1, tzinfo=dt.UTC)
HOURS = 72.0
TARGET_S = 1.0
RULE_CONFIGS = {
    "fastest": {"name": "fastest"},
    "fastest-geomean": {"name": "fastest", "aggregation": "geomean"},
    "fast_p": {"name": "fast_p", "p": [0, 1, 2]},
    "ccf-kernel": {"name": "ccf-kernel"},
    "ccf-dataset": {"name": "ccf-dataset"},
    "ccf-migration": {"name": "ccf-migration"},
}


def synthetic_entries(contestants: int, problems: int, seed: int) -> list[Entry]:
    rng = random.Random(seed)
    entries: list[Entry] = []
    next_id = 0

    def add(**fields) -> Entry:
        nonlocal next_id
        next_id += 1
        e = Entry(submission_id=next_id, **fields)
        entries.append(e)
        return e

    for c in range(contestants):
        skill = rng.lognormvariate(0, 0.5)
        for p in range(problems):
            passed = rng.random() < 0.85
            score = skill * rng.lognormvariate(0, 0.4) if passed else None
            half = 0.02 * score if score else None
            fields = dict(
                contestant=f"c{c:05d}",
                problem=f"level{p % 4 + 1}/op{p:02d}",
                level=p % 4 + 1,
                device_kind="H100",
                status="PASSED" if passed else "WRONG_VALUES",
                mode="ranked",
                score=score,
                score_low=score - half if score else None,
                score_high=score + half if score else None,
                max_abs_error=rng.uniform(1e-5, 1e-3) if passed else None,
                submitted_at=START + dt.timedelta(hours=rng.uniform(0, HOURS * 0.8)),
                accepted_by_organizer=rng.choice((True, True, False, None)) if passed else None,
                merged_upstream=passed and rng.random() < 0.2,
                bonus=rng.sample(BONUS_ITEMS, rng.choice((0, 0, 0, 1, 2))) if passed else [],
                samples_accepted=rng.randrange(0, 20),
                samples_score=round(rng.uniform(0, 40), 2),
                judge_score=rng.choice((60.0, rng.uniform(61, 150))) if rng.random() < 0.9 else None,
                completeness=round(rng.random(), 2),
            )
            first = add(**fields)
            if rng.random() < 0.1:
                later = first.submitted_at + dt.timedelta(hours=rng.uniform(0.1, HOURS * 0.2))
                gain = rng.choice((1.2, 1.005)) if passed else 1.0
                new = score * gain if score else None
                add(
                    **{
                        **fields,
                        "submitted_at": later,
                        "score": new,
                        "score_low": new * 0.99 if new else None,
                        "score_high": new * 1.01 if new else None,
                    }
                )
            if rng.random() < 0.02:
                outside = rng.choice(
                    ({"submitted_at": START - dt.timedelta(hours=1)}, {"device_kind": "A100"}, {"mode": "test"})
                )
                add(**{**fields, **outside})
    return entries


def contest_for(name: str, problems: int) -> Contest:
    return Contest(
        slug="bench",
        title="Benchmark contest",
        start=START,
        end=START + dt.timedelta(hours=HOURS),
        problems=[f"level{p % 4 + 1}/op{p:02d}" for p in range(problems)],
        device_kinds=["H100"],
        rule=RULE_CONFIGS[name],
    )


def best_of(repeat: int, call) -> tuple[float, float, object]:
    """Best wall and CPU seconds of `repeat` calls (the CPU time shows what another process on
    the machine took away), and the last result."""
    wall, cpu, result = float("inf"), float("inf"), None
    for _ in range(repeat):
        result = None  # freeing the last standings is not part of the next call
        w0, c0 = time.perf_counter(), time.process_time()
        result = call()
        wall, cpu = min(wall, time.perf_counter() - w0), min(cpu, time.process_time() - c0)
    return wall, cpu, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--contestants", type=int, default=10_000)
    parser.add_argument("--problems", type=int, default=50)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()

    t0 = time.perf_counter()
    entries = synthetic_entries(args.contestants, args.problems, args.seed)
    build_s = time.perf_counter() - t0
    print(
        f"{len(entries):,} entries ({args.contestants:,} contestants x {args.problems} problems) "
        f"built in {build_s:.1f} s",
        flush=True,
    )

    t0 = time.perf_counter()
    table = EntryTable.from_entries(entries)
    table_s = time.perf_counter() - t0
    print(f"their columns built in {table_s:.1f} s", flush=True)

    load_before = os.getloadavg()
    results = {}
    for name in RULE_CONFIGS:
        config = contest_for(name, args.problems)
        seconds, cpu, standings = best_of(args.repeat, lambda: RULES[config.rule.name](config, table))
        entry_s, _, by_entries = best_of(args.repeat, lambda: RULES[config.rule.name](config, entries))
        if by_entries != standings:
            raise SystemExit(f"{name}: the columns and the entries give different standings")
        results[name] = {
            "seconds": round(seconds, 3),
            "cpu_seconds": round(cpu, 3),
            "rows": len(standings.rows),
            "within_target": seconds < TARGET_S,
            "entry_path_seconds": round(entry_s, 3),
        }
        print(
            f"{name:16s} {seconds:6.3f} s  (cpu {cpu:.3f} s, {len(standings.rows):,} rows; "
            f"from the Entry list {entry_s:.3f} s)",
            flush=True,
        )

    record = {
        "command": "python3 " + " ".join(shlex.quote(a) for a in [os.path.relpath(__file__, REPO), *sys.argv[1:]]),
        "date": dt.date.today().isoformat(),
        "machine": {
            "platform": platform.platform(),
            "python": platform.python_version(),
            "processor": platform.processor() or platform.machine(),
            "cpu_count": os.cpu_count(),
            "load_average_before": [round(x, 2) for x in load_before],
            "load_average_after": [round(x, 2) for x in os.getloadavg()],
        },
        "contestants": args.contestants,
        "problems": args.problems,
        "seed": args.seed,
        "repeat": args.repeat,
        "entries": len(entries),
        "build_entries_s": round(build_s, 2),
        "build_columns_s": round(table_s, 2),
        "target_s": TARGET_S,
        "rules": results,
    }
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(record, indent=1) + "\n")
        print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
