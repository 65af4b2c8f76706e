#!/usr/bin/env python3
"""Keep the slowest tests' durations for the order tests start in (tests/order.py): reads the
"NN.NNs  nodeid" lines that scripts/test.sh prints for each lane and writes tests/slowest.json.

    bash scripts/test.sh 2>&1 | tee ci.log; python scripts/slowest.py ci.log
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

OUT = Path(__file__).resolve().parents[1] / "tests" / "slowest.json"
LINE = re.compile(r"^\s*(\d+\.\d+)s\s+(tests/\S+)\s*$")


def main() -> None:
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    found: dict[str, float] = {}
    for line in Path(sys.argv[1]).read_text(errors="replace").splitlines():
        if match := LINE.match(line):
            found[match.group(2)] = max(found.get(match.group(2), 0.0), float(match.group(1)))
    if not found:
        raise SystemExit(f"no test durations in {sys.argv[1]}")
    OUT.write_text(json.dumps(dict(sorted(found.items(), key=lambda kv: -kv[1])), indent=1) + "\n")
    print(f"wrote {len(found)} durations to {OUT}")


if __name__ == "__main__":
    main()
