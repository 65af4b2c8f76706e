"""Host details out of what a record shows: install paths, run folders, the home folder and
the host's name become placeholders. Logs and reasons are shown to people (a submission's
author, or everyone once its problem's solutions are public); the layout of the machine
that judged it is nobody's business, and a traceback still reads well with `<python>/...`."""

from __future__ import annotations

import functools
import os
import re
import socket
import sys
import sysconfig

RUN_FOLDERS = re.compile(r"/(?:tmp|dev/shm|var/tmp)/gpuarena-(?:run-)?\w{4,}")
"""Run folders and shared-tensor folders (direct children of the temporary roots): one pass,
no backtracking, whatever the solution wrote into its log."""


@functools.lru_cache(maxsize=1)
def _replacements() -> list[tuple[str, str]]:
    """(host path or name, placeholder), longest first so that nested paths go to the most
    specific placeholder."""
    import gpuarena

    pairs: dict[str, str] = {}
    for name in ("purelib", "platlib"):
        try:
            pairs[sysconfig.get_path(name)] = "<site-packages>"
        except KeyError:
            pass
    pairs[sys.prefix] = "<python-env>"
    pairs[sys.base_prefix] = "<python>"
    pairs[os.path.dirname(os.path.dirname(os.path.abspath(gpuarena.__file__)))] = "<gpuarena>"
    home = os.path.expanduser("~")
    if home not in ("/", ""):
        pairs[home] = "~"
    found = [(os.path.realpath(k), v) for k, v in pairs.items() if k and len(k) > 1] + \
            [(k, v) for k, v in pairs.items() if k and len(k) > 1]
    return sorted(set(found), key=lambda kv: -len(kv[0]))


@functools.lru_cache(maxsize=None)
def _whole_path(value: str) -> re.Pattern[str]:
    """`value` where it is a path of its own, not part of a longer name (/root in
    /sys/fs/cgroup/root.slice, /tmp in /tmpfs)."""
    return re.compile(rf"(?<![\w.~-]){re.escape(value)}(?![\w.-])")


@functools.lru_cache(maxsize=1)
def _host() -> re.Pattern[str] | None:
    """The host's name as a whole word (a short name like `vm` must not eat other words)."""
    host = socket.gethostname()
    return re.compile(rf"(?<![\w.-]){re.escape(host)}(?![\w-])") if len(host) >= 2 else None


def redact(text: str) -> str:
    """`text` with the host's paths and name replaced (see the module docstring)."""
    if not text:
        return text
    text = RUN_FOLDERS.sub("<run>", text)
    for value, placeholder in _replacements():
        text = _whole_path(value).sub(placeholder, text)
    host = _host()
    return host.sub("<host>", text) if host else text
