"""Where each kind of code lives (docs/architecture.md, "Where a change goes"; issue 50): a
feature that spans the floors keeps one name across them, its library in a package of its own
and its faces in modules that start with that name: `service/bounty_routes.py`,
`service/web/bounty_pages.py`, `cli/bounty_cli.py`. Every module of the faces is a feature's
or one of the face's own, listed here; a new one must be placed by the rule, or listed."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import gpuarena

pytestmark = pytest.mark.quick

PACKAGE = Path(gpuarena.__file__).parent

FEATURES = {
    "bounty": "bounties",
    "contest": "contests",
    "sample": "samples",
    "invite": "invites",
    "suite": "suite",
    "migration": "migration",
    "dataset": "dataset",
    "interop": "interop",
    "profile": "harness/profile",
    "runner": "runner",
}
"""A feature's name in its modules -> where its library lives (a package of gpuarena, or the
service's own module of that name for features only the service has)."""

FACE_OWN = {
    "service": {
        "app", "auth", "catalog", "config", "db", "deps", "device_kinds", "errors", "holdback",
        "leaderboard", "live", "migrate", "offloop", "public_reason", "queue", "ratelimit", "redact",
        "rights", "routes", "schemas", "standings_process", "submissions", "table_base",
        "tables", "webhooks",
    },
    "service/web": {"actions", "downloads", "flash", "render", "routes", "security", "session", "views"},
    "cli": {
        "__main__", "app", "batch", "client_cli", "console", "devices", "distinct_cli", "early", "entry",
        "languages_cli", "many", "problem_filters", "render", "serve", "server", "service_cli",
    },
}  # fmt: skip
"""Each face's own modules: its application, its core records and the commands that are the
face's own (`gpuarena run`, `serve`, `login`...), not a feature's."""


def misplaced(faces: dict[str, list[str]]) -> list[str]:
    """Modules of the faces that are neither a feature's (by their name's first word, or a
    feature's plural: `bounties.py`) nor listed as the face's own."""
    found = []
    plurals = {library.rsplit("/", 1)[-1] for library in FEATURES.values()}
    for face, modules in faces.items():
        for module in modules:
            if module == "__init__" or module in FACE_OWN[face]:
                continue
            first = re.split(r"_", module, maxsplit=1)[0]
            if first in FEATURES or module in plurals:
                continue
            found.append(f"{face}/{module}.py")
    return sorted(found)


def face_modules() -> dict[str, list[str]]:
    return {face: sorted(p.stem for p in (PACKAGE / face).glob("*.py")) for face in FACE_OWN}


def test_every_module_of_the_faces_is_a_features_or_the_faces_own():
    assert misplaced(face_modules()) == []


def test_a_module_placed_by_no_rule_is_found():
    faces = {"service": ["bounty_routes", "bounties", "routes", "helpers"], "service/web": [], "cli": ["suite_cli"]}
    assert misplaced(faces) == ["service/helpers.py"]


def test_every_feature_s_library_exists():
    """A feature named here has its library: a package of gpuarena, or the service's module."""
    for name, library in FEATURES.items():
        package = PACKAGE / library
        assert package.is_dir() or (PACKAGE / "service" / f"{library}.py").is_file(), name


def test_listed_modules_exist():
    """The face's own list holds no module that is gone (a list that only grows hides nothing)."""
    modules = face_modules()
    for face, own in FACE_OWN.items():
        assert own <= set(modules[face]), sorted(own - set(modules[face]))
