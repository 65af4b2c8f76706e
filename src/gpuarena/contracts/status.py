"""The verdicts (a record's `status`), apart from the records' models: code that runs before
pydantic is imported (the worker started ahead, launch/started.py) raises them too."""

from __future__ import annotations

from enum import Enum


class Status(str, Enum):
    """Verdicts, from best to worst; each failure names what went wrong."""

    PASSED = "PASSED"
    COMPILE_ERROR = "COMPILE_ERROR"
    RUNTIME_ERROR = "RUNTIME_ERROR"
    TIMEOUT = "TIMEOUT"
    WRONG_SHAPE = "WRONG_SHAPE"
    WRONG_DTYPE = "WRONG_DTYPE"
    WRONG_VALUES = "WRONG_VALUES"
    REJECTED = "REJECTED"
    ERROR = "ERROR"
    """The harness itself failed (an exception or signal in the supervisor): no verdict on the
    solution, and the reason says what broke."""
    SKIPPED = "SKIPPED"
    """A workload not run because an earlier one failed (never a whole-run verdict)."""
