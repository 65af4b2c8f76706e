"""The suite page in a real browser: the results in the server's suite folder and the shipped
baseline listed, one scored against another with its plots (by level, by model, the slowest
problems), and a file that is not a suite result named, not fatal."""

from __future__ import annotations

import json
import math

from tests.web.test_browser import _watch_errors

from gpuarena.suite.model import ProblemTime, SuiteResult


def _result(framework: str, times: dict[str, float]) -> SuiteResult:
    tags = {
        "level1/mm": ["aten.mm.default", "harvested", "llama", "prefill"],
        "level2/mlp": ["module:MLP", "harvested", "llama", "prefill", "qwen3", "decode"],
        "level3/attn": ["module:Attention", "harvested", "qwen3", "decode"],
    }
    return SuiteResult(
        framework=framework,
        device="cuda",
        device_name="Test GPU",
        environment={},
        command="test",
        problems=[
            ProblemTime(
                problem=name,
                level=int(name[5]),
                weight=1.0,
                tags=tags[name],
                status="PASSED",
                time_us=t,
                low_us=t * 0.9,
                high_us=t * 1.1,
            )
            for name, t in times.items()
        ],
    )


def test_the_suite_page_scores_a_result_against_a_baseline_with_plots(server, browser) -> None:
    folder = server.home / "suite"
    folder.mkdir(exist_ok=True)
    (folder / "eager.json").write_text(
        _result("pytorch", {"level1/mm": 100, "level2/mlp": 100, "level3/attn": 100}).model_dump_json()
    )
    (folder / "compiled.json").write_text(
        _result("torch-compile", {"level1/mm": 50, "level2/mlp": 200, "level3/attn": 25}).model_dump_json()
    )
    (folder / "broken.json").write_text(json.dumps({"format": "something else"}))
    context = browser.new_context()
    errors = _watch_errors(context)
    page = context.new_page()
    page.goto(f"{server.url}/suite")
    listed = page.locator("#suite-results").inner_text()
    assert "shipped/H100-pytorch" in listed and "eager" in listed and "compiled" in listed
    assert "broken.json: not a suite result" in page.content()
    page.select_option("select[name=result]", "compiled")
    page.select_option("select[name=baseline]", "eager")
    page.click("text=Compare")
    page.wait_for_url("**/suite?result=compiled&baseline=eager")
    score = page.locator("#score").inner_text()
    expected = math.exp((math.log(2) + math.log(0.5) + math.log(4)) / 3)  # the ratios' geometric mean
    assert f"{expected:.3f}x" in score and "3 problems" in score
    assert "from the timings" in score and "over resampled problem sets" in score
    for label in ("score by level", "score by model", "the 3 problems slowest relative to the baseline"):
        assert page.locator(f'svg[aria-label="{label}"]').count() == 1, label
    by_model = page.locator('svg[aria-label="score by model"]').inner_html()
    assert "llama" in by_model and "qwen3" in by_model
    slowest = page.locator("#suite-ratios tbody tr").first.inner_text()
    assert slowest.startswith("level2/mlp")  # 0.5x: the slowest relative to the baseline
    page.screenshot(path="tests/artifacts/suite-page.png", full_page=True)
    assert errors == []
    context.close()
