"""Host details out of text people see: logs, reasons and the other text of a record.

Logs and reasons are shown to people (a submission's author, or everyone once its problem's
solutions are public); the layout of the machine that judged it is nobody's business. Taken
out: this machine's install and home paths, the shapes of install paths and run folders on
any machine (`.../site-packages`, `.../lib/python3.X`, `/home/<name>`, `/root`,
`/tmp/gpuarena-run-*`, `/dev/shm/gpuarena-*`), the names the judging machine gave itself and
this machine's name, and any (value, placeholder) a caller adds (the service: its data folder
and database, service/redact.py). What is left still reads well:
`File "<site-packages>/torch/nn/functional.py", line 5096`.
"""

from __future__ import annotations

import functools
import os
import re
import socket
import sys
import sysconfig
from collections.abc import Iterable
from pathlib import Path

PATH = re.compile(r"(?<![\w.~<>-])/[^\s'\"()<>:,;|=`]+")
"""A path-like token: from a slash that starts a word up to the next space, quote or separator.
One greedy character class, so scanning is linear in the text (logs are the solution's to
write: a pattern that backtracks would let a solution stall the service)."""
RUN_FOLDER = re.compile(r"/gpuarena-(?:run-)?\w{4,}")
TEMP_ROOTS = ("/tmp/", "/dev/shm/", "/var/tmp/", "/private/tmp/")
PYTHON_LIB = re.compile(r"/lib(?:64)?/python3(?:\.\d+)?(?=/|$)")


@functools.lru_cache(maxsize=1)
def _this_host() -> tuple[tuple[str, str], ...]:
    """This machine's install and home paths (path, placeholder), longest first."""
    import gpuarena

    pairs = {str(Path(gpuarena.__file__).resolve().parents[1]): "<gpuarena>"}
    if sys.prefix != sys.base_prefix:  # a virtual environment (the base prefix may be /usr: too broad)
        pairs[sys.prefix] = "<python-env>"
    for name in ("purelib", "platlib", "stdlib"):
        try:
            pairs[sysconfig.get_path(name)] = "<site-packages>" if name != "stdlib" else "<python>/lib"
        except KeyError:
            pass
    home = os.path.expanduser("~").rstrip("/")
    if home:
        pairs[home + "/"] = "~/"  # with its slash: /root must not eat /sys/fs/cgroup/root.slice
    found = {**pairs, **{os.path.realpath(k) + ("/" if k.endswith("/") else ""): v for k, v in pairs.items() if k}}
    return tuple(sorted(((k, v) for k, v in found.items() if len(k) > 4), key=lambda kv: -len(kv[0])))


def _path(token: str) -> str:
    """One path with the machine-specific part at its front replaced; the rest (the file
    within a package, the solution's own file) kept, because that is what a person needs."""
    run = RUN_FOLDER.search(token)
    if run and any(root in token[: run.start() + 1] for root in TEMP_ROOTS):
        return "<run>" + token[run.end() :]
    for marker in ("/site-packages", "/dist-packages"):
        at = token.rfind(marker)
        end = at + len(marker)
        if at >= 0 and (end == len(token) or token[end] == "/"):
            return "<site-packages>" + token[end:]
    lib = PYTHON_LIB.search(token)
    if lib:
        return "<python>/lib" + token[lib.end() :]
    for home in ("/home/", "/Users/"):
        if token.startswith(home):
            rest = token[len(home) :]
            return "~" + (rest[rest.index("/") :] if "/" in rest else "")
    if token == "/root" or token.startswith("/root/"):
        return "~" + token[len("/root") :]
    return token


def _host_names(hostnames: Iterable[str | None]) -> list[re.Pattern[str]]:
    """Whole-word patterns for each name and its first label (node7.cluster.example -> node7);
    one-character and all-digit names are skipped (they would eat ordinary words and numbers)."""
    names: set[str] = set()
    for name in [*hostnames, socket.gethostname()]:
        name = (name or "").strip()
        for candidate in (name, name.split(".", 1)[0]):
            if len(candidate) >= 2 and not candidate.isdigit():
                names.add(candidate)
    return [re.compile(rf"(?<![\w.-]){re.escape(n)}(?![\w-])") for n in sorted(names, key=len, reverse=True)]


def redact(text: str, hostnames: Iterable[str | None] = (), values: Iterable[tuple[str, str]] = ()) -> str:
    """`text` without `values` (longest first), install paths, run folders, home folders and the
    judging machine's names (`hostnames`, plus this machine's). Linear in the length of the
    text; applying it twice changes nothing more."""
    if not text:
        return text
    for value, placeholder in sorted(values, key=lambda kv: -len(kv[0])):
        text = text.replace(value, placeholder)
    for value, placeholder in _this_host():
        text = text.replace(value, placeholder)
    text = PATH.sub(lambda m: _path(m.group(0)), text)
    for pattern in _host_names(hostnames):
        text = pattern.sub("<host>", text)
    return text
