"""Host details out of what the service stores and shows: logs, reasons and the other text of
an Evaluation record, and the reason of a job that failed.

The runner's supervisor already redacts its own machine's paths (gpuarena.harness.redact),
but the service cannot rely on that alone: a runner may be of an older version or on another
machine, and some text never passes through a supervisor (the tail of a crashed job
process, posted with a release). So the service redacts again, before storing and before
showing, with what it knows and the runner may not:

- the service's own folders (its data folder GPUARENA_HOME, the SQLite file's folder) and its
  database URL (a PostgreSQL URL carries a password);
- the names the judging machine gave itself (the record's environment.hostname, the runner's
  hostname from its hello) and this machine's name;
- the shapes of install paths and run folders on any machine: `.../site-packages`,
  `.../lib/python3.X`, `/home/<name>`, `/root`, `/tmp/gpuarena-run-*`, `/dev/shm/gpuarena-*`.

What is left still reads well: `File "<site-packages>/torch/nn/functional.py", line 5096`.
"""

from __future__ import annotations

import functools
import os
import re
import socket
import sys
import sysconfig
from pathlib import Path
from typing import Any, Iterable

from gpuarena.harness.records import Evaluation

PATH = re.compile(r"(?<![\w.~<>-])/[^\s'\"()<>:,;|=`]+")
"""A path-like token: from a slash that starts a word up to the next space, quote or separator.
One greedy character class, so scanning is linear in the text (logs are the solution's to
write: a pattern that backtracks would let a solution stall the service)."""
RUN_FOLDER = re.compile(r"/gpuarena-(?:run-)?\w{4,}")
TEMP_ROOTS = ("/tmp/", "/dev/shm/", "/var/tmp/", "/private/tmp/")
PYTHON_LIB = re.compile(r"/lib(?:64)?/python3(?:\.\d+)?(?=/|$)")

_service_values: dict[str, str] = {}
"""The service's own folders and database URL, as registered by `remember_service` (every app
made in this process; a union is harmless: it only redacts more)."""


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


def remember_service(home: Path, database_url: str) -> None:
    """Register the service's data folder and database so that they never show in a record."""
    for folder in {str(home), str(Path(home).resolve())}:
        if len(folder) > 1:
            _service_values[folder] = "<data>"
    if database_url.startswith("sqlite"):
        path = database_url.split(":///", 1)[-1]
        if path and path != ":memory:":
            for folder in {str(Path(path).parent), str(Path(path).resolve().parent)}:
                if len(folder) > 1:
                    _service_values[folder] = "<data>"
    elif database_url:
        _service_values[database_url] = "<database>"  # a PostgreSQL URL: its password with it


def _path(token: str) -> str:
    """One path with the machine-specific part at its front replaced; the rest (the file
    within a package, the solution's own file) kept, because that is what a person needs."""
    run = RUN_FOLDER.search(token)
    if run and any(root in token[:run.start() + 1] for root in TEMP_ROOTS):
        return "<run>" + token[run.end():]
    for marker in ("/site-packages", "/dist-packages"):
        at = token.rfind(marker)
        end = at + len(marker)
        if at >= 0 and (end == len(token) or token[end] == "/"):
            return "<site-packages>" + token[end:]
    lib = PYTHON_LIB.search(token)
    if lib:
        return "<python>/lib" + token[lib.end():]
    for home in ("/home/", "/Users/"):
        if token.startswith(home):
            rest = token[len(home):]
            return "~" + (rest[rest.index("/"):] if "/" in rest else "")
    if token == "/root" or token.startswith("/root/"):
        return "~" + token[len("/root"):]
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


def redact(text: str, hostnames: Iterable[str | None] = ()) -> str:
    """`text` without the service's folders and database, install paths, run folders, home
    folders and the judging machine's names (`hostnames`, plus this machine's). Linear in
    the length of the text; applying it twice changes nothing more."""
    if not text:
        return text
    for value, placeholder in sorted(_service_values.items(), key=lambda kv: -len(kv[0])):
        text = text.replace(value, placeholder)
    for value, placeholder in _this_host():
        text = text.replace(value, placeholder)
    text = PATH.sub(lambda m: _path(m.group(0)), text)
    for pattern in _host_names(hostnames):
        text = pattern.sub("<host>", text)
    return text


def _walk(value: Any, hosts: list[str | None], in_environment: bool = False) -> Any:
    """Every string in a JSON value redacted, but the environment's hostname field."""
    if isinstance(value, str):
        return redact(value, hosts)
    if isinstance(value, list):
        return [_walk(item, hosts) for item in value]
    if isinstance(value, dict):
        return {key: item if in_environment and key == "hostname" else _walk(item, hosts, key == "environment")
                for key, item in value.items()}
    return value


def redact_evaluation(record: Evaluation, hostnames: Iterable[str | None] = ()) -> Evaluation:
    """The record with every text in it redacted (log, reasons, notes of checks skipped, the
    sandbox's description), the record's own hostname among the names taken out. The
    environment's hostname field itself stays: who may see it is decided where it is shown."""
    hosts = [*hostnames, record.environment.hostname if record.environment else None]
    return Evaluation.model_validate(_walk(record.model_dump(mode="json"), hosts))
