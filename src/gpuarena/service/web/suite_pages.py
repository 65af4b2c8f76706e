"""The suite page: the suite results the server holds (suite/results.py), and one scored against
a baseline (suite/score.py) with plots: the score by level and by model, and the problems
slowest relative to the baseline (suite/plots.py)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Request
from fastapi.responses import HTMLResponse
from markupsafe import Markup

from gpuarena.errors import GpuarenaError
from gpuarena.service.config import Settings
from gpuarena.service.deps import Caller, get_settings
from gpuarena.service.web.render import page
from gpuarena.service.web.session import viewer
from gpuarena.suite.plots import comparison_plots
from gpuarena.suite.results import load_results
from gpuarena.suite.score import compare

router = APIRouter(include_in_schema=False)
WHO = Annotated[Caller | None, Depends(viewer)]
SETTINGS = Annotated[Settings, Depends(get_settings)]


@router.get("/suite", response_class=HTMLResponse)
def suite_page(request: Request, who: WHO, settings: SETTINGS, result: str = "", baseline: str = "") -> HTMLResponse:
    results, unreadable = load_results(settings.home / "suite")
    names = list(results)
    baseline = baseline if baseline in results else next((n for n in names if n.startswith("shipped/")), "")
    result = result if result in results else next((n for n in names if n != baseline), "")
    rows = [
        {
            "name": name,
            "framework": r.framework,
            "device": r.device_name or r.device,
            "problems": len(r.problems),
            "timed": sum(p.time_us is not None for p in r.problems),
        }
        for name, r in results.items()
    ]
    context: dict = {
        "rows": rows,
        "unreadable": unreadable,
        "result": result,
        "baseline": baseline,
        "names": names,
        "error": "",
        "comparison": None,
        "plots": [],
    }
    if result and baseline and result != baseline:
        try:
            scored = compare(results[baseline], results[result])
        except GpuarenaError as exc:
            context["error"] = str(exc)
        else:
            context["comparison"] = scored
            context["plots"] = [Markup(svg) for svg in comparison_plots(scored).values()]
    return page(request, "suite.html", who, **context)
