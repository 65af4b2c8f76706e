"""The pages' templates and assets ship inside the wheel, and nothing loads from another host."""

from __future__ import annotations

import re
import subprocess
import sys
import zipfile

from tests.web.conftest import ROOT

from gpuarena.service.web.render import STATIC, TEMPLATES

VENDORED = [
    "htmx/htmx.min.js",
    "htmx/LICENSE",
    "chartjs/chart.umd.min.js",
    "chartjs/LICENSE.md",
    "highlightjs/highlight.min.js",
    "highlightjs/github.min.css",
    "highlightjs/LICENSE",
]


def test_pages_reference_no_other_host() -> None:
    own = [*TEMPLATES.glob("*.html"), STATIC / "app.js", STATIC / "app.css"]
    for path in own:
        text = path.read_text()
        assert not re.search(r"""(src|href)=["']?(https?:)?//""", text), f"{path.name} loads from another host"
        assert "url(http" not in text and "@import" not in text, path.name
    for name in VENDORED:
        assert (STATIC / "vendor" / name).is_file(), f"{name} is missing: run scripts/vendor_assets.sh"


def test_the_wheel_contains_templates_and_static_files(tmp_path) -> None:
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", str(ROOT), "--no-deps", "-q", "-w", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert built.returncode == 0, built.stdout + built.stderr
    wheel = next(tmp_path.glob("gpuarena-*.whl"))
    names = set(zipfile.ZipFile(wheel).namelist())
    web = "gpuarena/service/web/"
    expected = {web + "templates/" + p.name for p in TEMPLATES.glob("*.html")}
    expected |= {web + "static/app.js", web + "static/app.css"} | {web + "static/vendor/" + n for n in VENDORED}
    expected |= {"gpuarena/service/migrations/versions/0002_web.py"}
    assert expected <= names, f"missing from {wheel.name}: {sorted(expected - names)}"
