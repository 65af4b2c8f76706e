"""Errors the API answers with a 4xx status and a message that says what is wrong."""

from __future__ import annotations

from gpuarena.errors import GpuarenaError


class NotFound(GpuarenaError):
    """HTTP 404."""


class Forbidden(GpuarenaError):
    """HTTP 403: signed in, but not allowed to do this."""


class TooLarge(GpuarenaError):
    """HTTP 413."""


class Unavailable(GpuarenaError):
    """HTTP 503 with Retry-After: the server is at a limit of its own (not the caller's)."""

    def __init__(self, message: str, retry_after: int):
        self.retry_after = retry_after
        super().__init__(message)
