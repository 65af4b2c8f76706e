"""A page that says once what a form of this session just made: the form notes the page's path
in the signed session cookie, and that page, shown next, takes the note (a reload, or anyone
else, sees the page as it is). The contest and bounty forms use it for the API's warnings (a
device kind no runner serves yet: service/device_kinds.py)."""

from __future__ import annotations

from fastapi import Request

CREATED = "created"
"""The session's note of the page a form just made (a contest's, a bounty's)."""


def note_created(request: Request, path: str) -> None:
    """A form made what `path` shows: that page says so once, with the API's warnings."""
    request.session[CREATED] = path


def just_created(request: Request) -> bool:
    """Whether this page shows what a form of this session just made (said once: the note is
    taken)."""
    if request.session.get(CREATED) != request.url.path:
        return False
    request.session.pop(CREATED)
    return True
