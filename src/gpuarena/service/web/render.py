"""Templates and the filters they use. Autoescape is on for every template, and Markdown is
rendered with raw HTML disabled, so no user or problem text can add markup of its own."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any
from urllib.parse import quote

from fastapi import Request
from fastapi.responses import HTMLResponse
from jinja2 import Environment, FileSystemLoader, StrictUndefined
from markdown_it import MarkdownIt
from markupsafe import Markup

from gpuarena import __version__
from gpuarena.service.deps import Caller
from gpuarena.service.web.security import CSRF_FIELD, csrf_token

HERE = Path(__file__).resolve().parent
TEMPLATES = HERE / "templates"
STATIC = HERE / "static"

_markdown = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False}).enable("table")


def markdown(text: str) -> Markup:
    """Problem READMEs as HTML: raw HTML in the source comes out as text, and markdown-it
    refuses javascript:, vbscript: and data: links."""
    return Markup(_markdown.render(text or ""))


def when(value: dt.datetime | None) -> str:
    return f"{value:%Y-%m-%d %H:%M} UTC" if value else "-"


def epoch_ms(value: dt.datetime) -> int:
    """Milliseconds since the epoch of a naive UTC time, for chart axes."""
    return int(value.replace(tzinfo=dt.UTC).timestamp() * 1000)


def segment(value: object) -> str:
    """One URL path segment: every reserved character quoted, "/" included (user names)."""
    return quote(str(value), safe="")


def number(value: float | None, digits: int = 3) -> str:
    if value is None:
        return "-"
    if value != 0 and (abs(value) >= 1e5 or abs(value) < 1e-3):
        return f"{value:.{digits}g}"
    return f"{value:.{digits}f}"


def sci(value: float | None) -> str:
    """Errors: zero as 0, anything else in scientific notation (they span many decades)."""
    if value is None:
        return "-"
    return "0" if value == 0 else f"{value:.2e}"


def time_us(timing: Any) -> str:
    """A median time with the half-width of its 95% interval, in a readable unit."""
    if timing is None:
        return "-"
    median, half = timing.median_us, (timing.ci95_high_us - timing.ci95_low_us) / 2
    unit, scale = ("s", 1e6) if median >= 1e6 else ("ms", 1e3) if median >= 1e3 else ("µs", 1.0)
    return f"{median / scale:.3g} ± {half / scale:.2g} {unit}"


def percent(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


def status_class(status: str) -> str:
    """A CSS class per verdict family, for colour only (the word is always shown)."""
    if status == "PASSED":
        return "ok"
    if status in ("QUEUED", "RUNNING"):
        return "wait"
    if status == "CANCELLED":
        return "muted"
    return "bad"


def _environment() -> Environment:
    env = Environment(
        loader=FileSystemLoader(TEMPLATES),
        autoescape=True,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(
        markdown=markdown,
        when=when,
        epoch_ms=epoch_ms,
        sci=sci,
        segment=segment,
        number=number,
        time_us=time_us,
        percent=percent,
        status_class=status_class,
    )
    env.globals.update(version=__version__, csrf_field=CSRF_FIELD)
    return env


ENV = _environment()


def page(request: Request, template: str, who: Caller | None, status_code: int = 200, **context: Any) -> HTMLResponse:
    """Render a template with what every page needs: the viewer, the CSRF token, the path."""
    html = ENV.get_template(template).render(
        request=request, who=who, csrf=csrf_token(request), path=request.url.path, **context
    )
    return HTMLResponse(html, status_code=status_code, headers={"Cache-Control": "no-store"})
