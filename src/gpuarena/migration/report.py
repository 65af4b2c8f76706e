"""The migration report: a JSON document (the `MigrationReport` model) and a self-contained HTML
page rendered from it (inline CSS, no scripts, no external assets; everything autoescaped)."""

from __future__ import annotations

from pathlib import Path

from jinja2 import Environment
from pydantic import BaseModel, ConfigDict

from gpuarena.migration.compare import OutputComparison
from gpuarena.migration.golden import GoldenPerformance
from gpuarena.migration.sandboxed import RunResult
from gpuarena.migration.score import Score, SpeedUp

REPORT_JSON = "report.json"
REPORT_HTML = "report.html"


class PortPerformance(BaseModel):
    """The port's performance figure next to the golden one."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)
    name: str
    """latency_ms, tokens_per_s or samples_per_s."""
    higher_is_better: bool
    """Whether more is better."""
    golden: GoldenPerformance | None
    """The golden record's figures, if it has them."""
    samples: list[float]
    """The port's figure in each run."""
    median: float | None = None
    """Their median."""
    low: float | None = None
    """The median's 95% bootstrap interval, low end."""
    high: float | None = None
    """The median's 95% bootstrap interval, high end."""
    speedup: SpeedUp | None = None
    """The speed-up over the golden record (above 1 is faster)."""
    note: str = ""
    """Why a figure or the speed-up is missing."""


class MigrationReport(BaseModel):
    """What `gpuarena app check` found."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)
    app: str
    """The port's name."""
    golden_app: str
    """The reference app's name."""
    device: str
    """The --device of the check."""
    golden_device: str
    """The --device of the golden record."""
    golden_environment: dict[str, str]
    """What produced the golden record."""
    environment: dict[str, str]
    """What ran the check."""
    ran: bool
    """Whether the port ran (see the score rule)."""
    reason: str = ""
    """Why it did not run."""
    sandboxed: bool = False
    """Whether the port ran in the harness's sandbox (its own user, namespaces, no network, a
    read-only view; docs/migration.md), rather than as a plain subprocess."""
    containment: str = ""
    """How it was contained, or why it ran without the sandbox."""
    runs: list[RunResult] = []
    """Each run: exit status, wall time, figure, the ends of stdout and stderr."""
    outputs: list[OutputComparison] = []
    """Each golden output's comparison."""
    performance: PortPerformance | None = None
    """The performance figure against the golden one."""
    score: Score
    """The score and its parts."""


_TEMPLATE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<title>Migration report: {{ r.app }}</title>
<style>
body{font:14px/1.45 system-ui,sans-serif;margin:2em auto;max-width:70em;color:#222;padding:0 1em}
table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ccc;padding:.25em .6em;text-align:left;vertical-align:top}
th{background:#f3f3f3}.ok{color:#17702c;font-weight:600}.bad{color:#b3261e;font-weight:600}
.score{font-size:2em;font-weight:700}pre{background:#f6f6f6;padding:.6em;overflow:auto;max-height:20em}code{font-size:90%}
</style></head><body>
<h1>Migration report: {{ r.app }}</h1>
<p>Checked against the golden record of <b>{{ r.golden_app }}</b> (recorded on {{ r.golden_device }},
{{ r.golden_environment.get('device_name', '?') }}); run on {{ r.device }} ({{ r.environment.get('device_name', '?') }}).</p>
<p class="score">{{ r.score.total }} points</p>
<table><tr><th>Part</th><th>Points</th></tr>
<tr><td>Ran</td><td>{{ r.score.running }} / 60</td></tr>
<tr><td>Outputs match</td><td>{{ r.score.matching }} / 40</td></tr>
<tr><td>Speed-up</td><td>{{ r.score.speed }} / 50</td></tr></table>
<ul>{% for note in r.score.notes %}<li>{{ note }}</li>{% endfor %}</ul>
<h2>Run</h2>
{% if r.ran %}<p class="ok">It ran ({{ r.runs|length }} run{{ 's' if r.runs|length != 1 }}).</p>
{% else %}<p class="bad">It did not run: {{ r.reason }}</p>{% endif %}
<p>{% if r.sandboxed %}Sandboxed{% else %}<span class="bad">Not sandboxed</span>{% endif %}{% if r.containment %}: {{ r.containment }}{% endif %}</p>
<table><tr><th>#</th><th>Exit</th><th>Wall s</th><th>Figure</th></tr>
{% for run in r.runs %}<tr><td>{{ loop.index }}</td><td>{{ 'killed (time limit)' if run.timed_out else run.exit_code }}</td>
<td>{{ '%.3f'|format(run.wall_s) }}</td><td>{{ run.figure if run.figure is not none else (run.figure_error or '') }}</td></tr>{% endfor %}</table>
{% if r.runs %}{% set last = r.runs[-1] %}
<details><summary>stdout of the last run</summary><pre>{{ last.stdout_tail }}</pre></details>
<details{% if not r.ran %} open{% endif %}><summary>stderr of the last run</summary><pre>{{ last.stderr_tail }}</pre></details>{% endif %}
<h2>Outputs</h2>
{% for o in r.outputs %}
<h3><code>{{ o.file }}</code> ({{ o.kind }}, {{ o.method }}):
{% if o.matched %}<span class="ok">matched</span>{% else %}<span class="bad">differs</span>{% endif %}</h3>
<p>{{ o.summary }}{% if not o.matched %}; closeness {{ '%.4f'|format(o.closeness) }}{% endif %}</p>
{% if o.worst %}<table><tr><th>Where</th><th>Got</th><th>Expected</th><th>|diff|</th></tr>
{% for d in o.worst %}<tr><td><code>{{ d.where }}</code></td><td><code>{{ d.got }}</code></td><td><code>{{ d.expected }}</code></td>
<td>{{ '%.4g'|format(d.abs_diff) if d.abs_diff is not none else '' }}</td></tr>{% endfor %}</table>{% endif %}
{% else %}<p>No output was compared.</p>{% endfor %}
<h2>Performance</h2>
{% set p = r.performance %}
{% if p %}<table><tr><th></th><th>{{ p.name }} ({{ 'higher' if p.higher_is_better else 'lower' }} is better): median</th><th>95% interval</th><th>Runs</th></tr>
{% if p.golden %}<tr><td>Golden</td><td>{{ '%.4g'|format(p.golden.median) }}</td><td>[{{ '%.4g'|format(p.golden.low) }}, {{ '%.4g'|format(p.golden.high) }}]</td><td>{{ p.golden.samples|length }}</td></tr>{% endif %}
{% if p.median is not none %}<tr><td>Port</td><td>{{ '%.4g'|format(p.median) }}</td><td>[{{ '%.4g'|format(p.low) }}, {{ '%.4g'|format(p.high) }}]</td><td>{{ p.samples|length }}</td></tr>{% endif %}
</table>
{% if p.speedup %}<p>Speed-up {{ '%.3f'|format(p.speedup.ratio) }}x, 95% interval [{{ '%.3f'|format(p.speedup.low) }}, {{ '%.3f'|format(p.speedup.high) }}].</p>{% endif %}
{% if p.note %}<p>{{ p.note }}</p>{% endif %}
{% else %}<p>No performance figure.</p>{% endif %}
<h2>Environments</h2>
<table><tr><th></th><th>Golden</th><th>This check</th></tr>
{% for key in (r.golden_environment.keys()|list + r.environment.keys()|list)|unique %}
<tr><td>{{ key }}</td><td>{{ r.golden_environment.get(key, '') }}</td><td>{{ r.environment.get(key, '') }}</td></tr>{% endfor %}</table>
</body></html>
"""


def render_html(report: MigrationReport) -> str:
    """The report as one self-contained HTML page."""
    return Environment(autoescape=True).from_string(_TEMPLATE).render(r=report)


def write_report(report: MigrationReport, folder: Path) -> tuple[Path, Path]:
    """Write report.json and report.html into folder."""
    folder.mkdir(parents=True, exist_ok=True)
    json_path, html_path = folder / REPORT_JSON, folder / REPORT_HTML
    json_path.write_text(report.model_dump_json(indent=2) + "\n", encoding="utf-8")
    html_path.write_text(render_html(report), encoding="utf-8")
    return json_path, html_path
