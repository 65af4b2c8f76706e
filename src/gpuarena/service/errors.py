"""Errors the API answers with a 4xx status and a message that says what is wrong."""

from __future__ import annotations

from gpuarena.errors import GpuarenaError


class NotFound(GpuarenaError):
    """HTTP 404."""


class Forbidden(GpuarenaError):
    """HTTP 403: signed in, but not allowed to do this."""


class TooLarge(GpuarenaError):
    """HTTP 413."""
