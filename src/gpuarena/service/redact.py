"""Host details out of what the service stores and shows: logs, reasons and the other text of
an Evaluation record, and the reason of a job that failed.

The runner's supervisor already redacts its own machine's paths with the same code
(gpuarena.harness.redact), but the service cannot rely on that alone: a runner may be of an older version or on another
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

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from gpuarena.contracts.records import Evaluation
from gpuarena.harness import redact as host_redact

_service_values: dict[str, str] = {}
"""The service's own folders and database URL, as registered by `remember_service` (every app
made in this process; a union is harmless: it only redacts more)."""


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


def redact(text: str, hostnames: Iterable[str | None] = ()) -> str:
    """`text` without the service's folders and database, and everything
    gpuarena.harness.redact takes out (`hostnames` among the names)."""
    return host_redact.redact(text, hostnames, _service_values.items())


def _walk(value: Any, hosts: list[str | None], in_environment: bool = False) -> Any:
    """Every string in a JSON value redacted, but the environment's hostname field."""
    if isinstance(value, str):
        return redact(value, hosts)
    if isinstance(value, list):
        return [_walk(item, hosts) for item in value]
    if isinstance(value, dict):
        return {
            key: item if in_environment and key == "hostname" else _walk(item, hosts, key == "environment")
            for key, item in value.items()
        }
    return value


def redact_json(value: Any, hostnames: Iterable[str | None] = ()) -> Any:
    """Every string in a JSON value (a sample's report) redacted."""
    return _walk(value, list(hostnames))


def redact_evaluation(record: Evaluation, hostnames: Iterable[str | None] = ()) -> Evaluation:
    """The record with every text in it redacted (log, reasons, notes of checks skipped, the
    sandbox's description), the record's own hostname among the names taken out. The
    environment's hostname field itself stays: who may see it is decided where it is shown."""
    hosts = [*hostnames, record.environment.hostname if record.environment else None]
    return Evaluation.model_validate(_walk(record.model_dump(mode="json"), hosts))
