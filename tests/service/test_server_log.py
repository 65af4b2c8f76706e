"""A quiet server's log is not the embedded runner's polling (issue 17)."""

from __future__ import annotations

import logging

from gpuarena.cli.serve import QuietPolling


def _access(path: str, status: int) -> logging.LogRecord:
    return logging.LogRecord(
        "uvicorn.access",
        logging.INFO,
        __file__,
        1,
        '%s - "%s %s HTTP/%s" %d',
        ("127.0.0.1:5000", "POST", path, "1.1", status),
        None,
    )


def test_idle_polling_is_left_out_and_everything_else_stays() -> None:
    quiet = QuietPolling()
    assert not quiet.filter(_access("/api/runner/claim", 204))  # nothing to claim
    assert not quiet.filter(_access("/api/runner/heartbeat", 200))
    assert quiet.filter(_access("/api/runner/claim", 200))  # a job taken
    assert quiet.filter(_access("/api/runner/claim", 500))
    assert quiet.filter(_access("/api/submissions", 201))
    assert quiet.filter(logging.LogRecord("uvicorn.access", logging.INFO, __file__, 1, "plain", None, None))
