"""The page: sections in order, the chart layer and the data inlined into one file."""

from __future__ import annotations

import os
from functools import cache
from importlib import resources
from typing import TYPE_CHECKING

from stepscope import __version__
from stepscope.analysis.diagnosis import rule_anchor
from stepscope.analysis.report_data import rank_rules
from stepscope.read import Job
from stepscope.report._compare import ANCHOR as COMPARE_ANCHOR
from stepscope.report._compare import comparison_section
from stepscope.report._context import Context, Progress, no_progress
from stepscope.report._diagnosis import diagnosis_section
from stepscope.report._html import esc, fmt_time, script_json
from stepscope.report._profiles import profiles_section
from stepscope.report._rules import rules_section
from stepscope.report._steps import steps_section
from stepscope.report._summary import faults_section, summary_section, warnings_section
from stepscope.report._system import node_anchor, system_section
from stepscope.report._tensors import tensors_section
from stepscope.webcharts import script_text, style_text

if TYPE_CHECKING:
    from typing import TypeAlias

    from stepscope.analysis.compare import Side

    Against: TypeAlias = Side | None  # a baseline: one job or several runs

REPORT_NAME = "report.html"


@cache
def _static(name: str) -> str:
    return resources.files("stepscope.report").joinpath("static", name).read_text(encoding="utf-8")


def _toc(
    ctx: Context, has_faults: bool, has_profiles: bool, has_tensors: bool, has_cmp: bool
) -> str:
    links = [("diagnosis", "Diagnosis", False)]
    links += [(COMPARE_ANCHOR, "Comparison", False)] if has_cmp else []
    links.append(("steps", "Steps", False))
    links.append(("system", "System usage", False))
    links += [(node_anchor(n), n, True) for n in ctx.job.nodes()]
    links.append(("rules", "Rules", False))
    # in the order of the Rules section's blocks (most severe first), not the files'
    links += [
        (rule_anchor(str(r.get("rule"))), str(r.get("rule")), True) for r in rank_rules(ctx.rules)
    ]
    links.append(("summary", "Job summary", False))
    if has_faults:
        links.append(("faults", "Faults", False))
    if has_profiles:
        links.append(("profiles", "Profiling windows", False))
    if has_tensors:
        links.append(("tensors", "Tensors", False))
    items = "".join(
        f'<a href="#{esc(a)}"{" class=sub" if sub else ""}>{esc(t)}</a>' for a, t, sub in links
    )
    return f'<nav class="toc">{items}</nav>'


def _comparison(ctx: Context, against: Against) -> str:
    """B (this job) against the baseline ``against`` (one job or several runs), where
    one was given."""
    if against is None:
        return ""
    from stepscope.analysis.compare import compare_sides, runs_of

    base = runs_of(against)
    c = compare_sides(base, [ctx.job])
    return comparison_section(ctx.charts, c, base, [ctx.job])


def _body(ctx: Context, progress: Progress, out_dir: str | None, against: Against) -> str:
    progress("summary", 0.05)
    diagnosis = diagnosis_section(ctx)
    summary = summary_section(ctx) + faults_section(ctx)

    def system_progress(stage: str, fraction: float) -> None:
        progress(stage, 0.1 + 0.5 * fraction)

    steps = steps_section(ctx)  # first: the first charts of the page are the steps'
    progress("comparison", 0.08)
    comparison = _comparison(ctx, against)
    system = system_section(ctx, system_progress)
    progress("steps", 0.6)
    progress("rules", 0.75)
    rules = rules_section(ctx)
    progress("profiling windows", 0.8)
    profiles = profiles_section(ctx, out_dir)
    progress("tensors", 0.85)
    tensors = tensors_section(ctx)
    summary += warnings_section(ctx)  # last: the damage every section's reads ran into
    toc = _toc(ctx, 'id="faults"' in summary, bool(profiles), bool(tensors), bool(comparison))
    # the diagnosis, then the charts (steps, then the nodes'), then the rules; the facts after
    main = diagnosis + comparison + steps + system + rules + summary + profiles + tensors
    return f"{toc}<main>{main}</main>"


def render_report(
    job: Job,
    progress: Progress | None = None,
    now: float | None = None,
    out_dir: str | None = None,
    against: Against = None,
) -> str:
    """The job's profiling report: one self-contained HTML page (no network request).

    ``progress(stage, fraction)`` is called as the sections are built. ``now``
    (unix seconds) stands in for the clock for a job that still runs. ``out_dir``
    is the local folder the page will be saved in (None: the job folder): links
    to the job's profiling files are made relative to it. ``against``: a baseline
    job, or several runs of one; the page then has a comparison section, this job
    against it (docs/compare.md).
    """
    progress = progress or no_progress
    progress("reading", 0.0)
    ctx = Context.load(job, now)
    body = _body(ctx, progress, out_dir, against)
    progress("encoding", 0.9)
    # every time chart shows the job's whole time unzoomed: one time axis for all
    domain = [ctx.charts.t0, max(ctx.end_time, ctx.charts.t0)]
    data = script_json({"charts": ctx.charts.specs, "domain": domain})
    name = str(ctx.meta.get("name") or "job")
    sub = f"{ctx.meta.get('status')} · started {fmt_time(ctx.meta.get('start_time'))} · {job.path}"
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="generator" content="stepscope {esc(__version__)}">
<title>{esc(name)} · stepscope report</title>
<style>{style_text()}
{_static("report.css")}</style>
</head><body>
<header class="top"><h1>{esc(name)}</h1><div class="sub">{esc(sub)}</div></header>
<div class="layout">{body}</div>
<footer>Generated by stepscope {esc(__version__)} at {esc(fmt_time(ctx.now))}.
Charts: uPlot (MIT). Times in UTC. Drag on a chart to zoom, double-click to reset.</footer>
<script type="application/json" id="stepscope-data">{data}</script>
<script>{script_text()}</script>
<script>{_static("report.js")}</script>
</body></html>
"""


def write_report(
    job: Job,
    out_path: str | None = None,
    progress: Progress | None = None,
    against: Against = None,
) -> str:
    """Write the report (with a comparison against ``against``, a job or several runs,
    where given); returns where it went.

    Without ``out_path`` it goes to ``report.html`` in the job folder, written
    atomically through the job's store (local folder or object store). With
    ``out_path`` (a local path) it is written there, atomically too.
    """
    progress = progress or no_progress
    path = None if out_path is None else os.path.abspath(os.path.expanduser(out_path))
    out_dir = None if path is None else os.path.dirname(path)
    data = render_report(job, progress, out_dir=out_dir, against=against).encode("utf-8")
    progress("writing", 0.95)
    if path is None:
        job.store.write_bytes(REPORT_NAME, data)
        path = job.store.local_path(REPORT_NAME) or f"{job.store.url.rstrip('/')}/{REPORT_NAME}"
    else:
        _write_local(path, data)
    progress("done", 1.0)
    return path


def _write_local(path: str, data: bytes) -> None:
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    tmp = f"{path}.tmp-{os.getpid()}"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)
