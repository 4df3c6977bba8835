"""A job or a comparison as a notebook cell: a small, self-contained HTML fragment.

The report's parts, fewer of them: the diagnosis, the step duration chart and the
step split of the training phase, with the chart layer inlined (no network). The
time series keep at most ``2 * CELL_BUCKETS`` points, so that a cell stays a cell
(tens of kilobytes of data, besides the chart layer's script).
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

import pandas as pd

from stepscope.analysis.compare import Comparison, PhaseComparison
from stepscope.analysis.diagnosis import Diagnosis, diagnose_verdicts, job_facts
from stepscope.analysis.outliers import Definition, judge_steps
from stepscope.analysis.report_data import per_step
from stepscope.read import Job
from stepscope.report._charts import Charts
from stepscope.report._compare import durations_chart
from stepscope.report._context import Context
from stepscope.report._html import esc, fmt_duration, note, script_json, table
from stepscope.report._steps import _duration_chart, _split_charts
from stepscope.webcharts import script_text, style_text

if TYPE_CHECKING:
    from stepscope.analysis.compare import Side

CELL_BUCKETS = 150  # 2 points per bucket: 300 points per series at most

# Scoped to the cell: a notebook page is not ours to restyle.
_CSS = """
.stepscope-cell{font-family:system-ui,sans-serif;font-size:13px;max-width:980px}
.stepscope-cell h3{margin:.2em 0}.stepscope-cell h4{margin:.8em 0 .2em}
.stepscope-cell .note{color:#555;font-size:12px}
.stepscope-cell table{border-collapse:collapse;margin:.3em 0}
.stepscope-cell td,.stepscope-cell th{padding:2px 8px;border-bottom:1px solid #ddd;text-align:right}
.stepscope-cell td:first-child,.stepscope-cell th:first-child{text-align:left}
.stepscope-cell .diag-fix{color:#333}
"""

# Draws the charts of this cell only (the page may hold other cells' charts).
_DRAW = """(function(){var root=document.getElementById(%s);if(!root)return;
var data=JSON.parse(root.querySelector("script.stepscope-data").textContent);
root.querySelectorAll("[data-chart]").forEach(function(el){
try{StepscopeCharts.draw(el,Object.assign({id:el.dataset.chart},data.charts[el.dataset.chart]));}
catch(e){console.error("stepscope: chart failed",e);}});})();"""


def diagnosis_cell(d: Diagnosis) -> str:
    """The diagnosis: its summary line, then each problem with its fix."""
    items = "".join(
        f"<li><b>{esc(e.rule)}</b>: {esc(e.message)}"
        + (f'<div class="diag-fix">Fix: {esc(e.recommendation)}</div>' if e.recommendation else "")
        + "</li>"
        for e in d.entries
    )
    body = f'<p class="diag-summary">{esc(d.summary)}</p>'
    return "<h4>Diagnosis</h4>" + body + (f'<ol class="diagnosis">{items}</ol>' if items else "")


def wrap(title: str, sub: str, body: str, charts: dict[str, object]) -> str:
    """The fragment: styles, the body, the chart data and the scripts that draw it."""
    cell_id = f"stepscope-{uuid.uuid4().hex[:12]}"
    return (
        f'<div class="stepscope-cell" id="{cell_id}"><style>{style_text()}{_CSS}</style>'
        f'<h3>{esc(title)}</h3><div class="note">{esc(sub)}</div>{body}'
        f'<script type="application/json" class="stepscope-data">'
        f"{script_json({'charts': charts})}</script>"
        f"<script>{script_text()}\n;{_DRAW % script_json(cell_id)}</script></div>"
    )


def _phase(ctx: Context) -> str:
    steps = ctx.steps
    if steps.empty:
        return note("No steps were recorded.")
    phases = sorted(steps["phase"].unique(), key=lambda p: (p != "train", p))
    phase = str(phases[0])
    rows: pd.DataFrame = steps[steps["phase"] == phase]
    agg = per_step(rows)
    judged = judge_steps(rows, Definition.of_job(ctx.rules))
    median = float(rows["duration"].median())
    head = f"<h4>{esc(phase.capitalize())} steps</h4>"
    stats = note(f"{len(agg)} steps, median {fmt_duration(median)}.")
    return (
        head
        + stats
        + _duration_chart(ctx, agg, phase, judged)
        + _split_charts(ctx, agg, rows, phase)
    )


def render_job_cell(job: Job, now: float | None = None) -> str:
    """The job as a notebook cell: the diagnosis, its steps and their split (HTML)."""
    ctx = Context.load(job, now, buckets=CELL_BUCKETS)
    diagnosis = diagnose_verdicts(ctx.rules, job_facts(ctx.meta, ctx.steps, ctx.now))
    body = diagnosis_cell(diagnosis) + _phase(ctx)
    sub = f"{ctx.meta.get('status')} · {job.path}"
    return wrap(str(ctx.meta.get("name") or "job"), sub, body, dict(ctx.charts.specs))


def _ms(x: float) -> str:
    return fmt_duration(x) if x == x else "\u2013"  # NaN: not measured


def _phase_table(p: PhaseComparison) -> str:
    rows = [("step (median)", _ms(p.base_median), _ms(p.new_median), "")]
    rows += [
        (c.part, _ms(c.base_s), _ms(c.new_s), f"{_ms(c.change.low)} to {_ms(c.change.high)}")
        for c in p.parts
    ]
    return table(["Part", "A", "B", "B - A (95%)"], rows, cls="num split")


def render_comparison_cell(comparison: Comparison, base: Side, new: Side) -> str:
    """B against the baseline A as a notebook cell: the verdict, the split per phase
    and the setup that differs (HTML)."""
    charts = Charts(0.0, CELL_BUCKETS)
    body = ""
    for p in comparison.phases:
        body += f"<h4>{esc(p.phase.capitalize())}</h4><p>{esc(p.verdict)}</p>"
        body += _phase_table(p) + durations_chart(charts, base, new, p.phase)
    if not comparison.phases:
        body += note("No phase has steps in both jobs: nothing to compare.")
    diffs = [(k, a or "\u2013", b or "\u2013") for k, a, b in comparison.setup.facts]
    diffs += [(f"rule {k}", a or "\u2013", b or "\u2013") for k, a, b in comparison.setup.rules]
    if diffs:
        body += "<h4>What differs</h4>" + table(["", "A", "B"], diffs)
    title = f"{comparison.new} against {comparison.base}"
    return wrap(title, "stepscope compare: B against the baseline A", body, dict(charts.specs))
