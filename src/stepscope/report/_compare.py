"""The comparison section of a report (``stepscope report B --against A``): B against
the baseline A, as ``stepscope compare`` judges it (docs/compare.md).

Rendering only: the numbers are :func:`stepscope.analysis.compare.compare`'s. The
verdict line first, then per phase its table of parts with their 95% intervals and
each run's step durations on one axis (by step number), then the setup facts and
the rules whose verdicts differ. The notebook cell (:mod:`._cell`) reuses the chart.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from stepscope.analysis.compare import Comparison, LeftOut, PhaseComparison, runs_of
from stepscope.analysis.report_data import per_step
from stepscope.read import Job
from stepscope.report._charts import Charts, ChartSpec
from stepscope.report._html import chart, esc, fmt_duration, note, section, table

if TYPE_CHECKING:
    from stepscope.analysis.compare import Side

__all__ = [
    "ANCHOR",
    "comparison_charts",
    "comparison_section",
    "durations_chart",
    "durations_spec",
]

ANCHOR = "comparison"
MISSING = "\u2013"


def _ms(x: float) -> str:
    return fmt_duration(x) if math.isfinite(x) else MISSING  # NaN: not measured


def _pct(low: float, value: float, high: float) -> str:
    return f"{100 * (value - 1):+.1f}% ({100 * (low - 1):+.1f}% to {100 * (high - 1):+.1f}%)"


def _kept(o: LeftOut) -> str:
    return (
        f"{o.kept} of {o.total} ({o.warmup} warm-up, {o.profiled} profiled, "
        f"{o.outliers} outliers left out)"
    )


def _rate(x: float | None) -> str:
    return MISSING if x is None or not math.isfinite(x) else f"{x:.2f}"


def parts_table(c: Comparison, p: PhaseComparison) -> str:
    """The step time, throughput and each part of the step in A and B, with the 95%
    interval of the change (ratio for the step, B - A seconds for a part)."""
    r = p.ratio
    rows = [("step (median)", _ms(p.base_median), _ms(p.new_median),
             "" if r is None else _pct(r.low, r.value, r.high), "")]  # fmt: skip
    rows.append(("step (p90)", _ms(p.base_p90), _ms(p.new_p90), "", ""))
    a, b = p.throughput
    rows.append(("steps/s", _rate(a), _rate(b), "", ""))
    sa, sb = c.samples_per_s(p)
    if sa is not None or sb is not None:
        rows.append(("samples/s", _rate(sa), _rate(sb), "", ""))
    for part in p.parts:
        i = part.change
        share = f"{100 * part.base_share:.0f}% \u2192 {100 * part.new_share:.0f}%"
        change = f"{_ms(i.value)} ({_ms(i.low)} to {_ms(i.high)})"
        rows.append((part.part, _ms(part.base_s), _ms(part.new_s), change, share))
    rows += [(m.part, "", "", f"{m.text()}, not compared", "") for m in p.missing_parts]
    if p.runs is not None and p.runs.known:
        a_runs, b_runs = (
            ", ".join(_ms(x) for x in r) for r in (p.runs.base_medians, p.runs.new_medians)
        )
        spread = f"spread between runs {p.runs.spread_pct:.1f}% ({p.runs.df} df)"
        rows.insert(2, ("run medians", a_runs, b_runs, spread, ""))
    return table(["", "A", "B", "change (95% interval)", "share of the step"], rows, cls="num")


def durations_chart(charts: Charts, base: Side, new: Side, phase: str) -> str:
    """Each run's step durations by step number (the slowest rank's), one chart."""
    chart_id = durations_spec(charts, base, new, phase)
    if chart_id is None:
        return ""
    return chart(chart_id, "Each point is a step, by its number; A is the baseline.")


def _series(runs: list[Job], label: str) -> list[tuple[str, Job]]:
    """A series label a run, ``A: name``; runs of one name (folders of several CI jobs)
    are told apart by their place in the side, ``A: name #2``."""
    names = [job.name for job in runs]
    return [
        (f"{label}: {job.name}" + (f" #{i + 1}" if names.count(job.name) > 1 else ""), job)
        for i, job in enumerate(runs)
    ]


def durations_spec(charts: Charts, base: Side, new: Side, phase: str) -> str | None:
    """The id of the chart spec (added to ``charts``) of each run's step durations by
    step number, a series "A: name" or "B: name" a run (a side: a job or a list of
    runs); None where none has a step."""
    frames = []
    for label, job in [*_series(runs_of(base), "A"), *_series(runs_of(new), "B")]:
        steps = job.steps()
        agg = per_step(steps[steps["phase"] == phase]) if len(steps) else steps
        if len(agg):
            frames.append(agg.set_index("step")["duration"].rename(label))
    if not frames:
        return None
    both = pd.concat(frames, axis=1).sort_index()
    cols = {str(c): both[c].to_numpy(np.float64) for c in both.columns}
    x = both.index.to_numpy(np.float64)
    return charts.add_timeseries(f"{phase} step duration", x, cols, "s", xAxis="step")


def comparison_charts(c: Comparison, base: Side, new: Side, buckets: int) -> dict[str, ChartSpec]:
    """Per phase of ``c``, the spec of each run's step durations by step number (at most
    ``2 * buckets`` points a series): what the dashboard's comparison draws."""
    charts = Charts(0.0, buckets)
    ids = {p.phase: durations_spec(charts, base, new, p.phase) for p in c.phases}
    return {phase: charts.specs[i] for phase, i in ids.items() if i is not None}


def _phase(
    charts: Charts, c: Comparison, p: PhaseComparison, base: list[Job], new: list[Job]
) -> str:
    head = f"<h3>{esc(p.phase.capitalize())}</h3>"
    if len(c.phases) > 1:  # the first phase's verdict is the section's: said again beside another
        head += f'<p class="cmp-verdict">{esc(p.verdict)}</p>'
    kept = note(f"Steady steps: A {_kept(p.base_left_out)}; B {_kept(p.new_left_out)}.")
    return head + kept + parts_table(c, p) + durations_chart(charts, base, new, p.phase)


def _or(value: str | None, missing: str) -> str:
    return f"({missing})" if value is None else value


def _setup(c: Comparison) -> str:
    if c.setup.facts:
        rows = [(k, _or(a, "not recorded"), _or(b, "not recorded")) for k, a, b in c.setup.facts]
        out = "<h3>Setup differences</h3>" + table(["", "A", "B"], rows)
    else:
        out = "<h3>Setup differences</h3>" + note("No difference recorded in the setup.")
    out += "<h3>Rules whose verdict changed</h3>"
    if c.setup.rules:
        rows = [(k, _or(a, "not run"), _or(b, "not run")) for k, a, b in c.setup.rules]
        out += table(["rule", "A", "B"], rows)
    else:
        out += note("None: each rule's verdict is the same in both jobs.")
    return out


def comparison_section(charts: Charts, c: Comparison, base: list[Job], new: list[Job]) -> str:
    """The section: the verdict line (the first phase's), each phase, the setup."""
    first = c.phases[0].verdict if c.phases else "no phase recorded by both jobs"
    body = f'<p class="cmp-verdict cmp-first"><b>{esc(first)}</b></p>'
    where = ", ".join(job.path for job in base)
    runs = f"{len(base)} runs: " if len(base) > 1 else ""
    body += note(f"A: {c.base} (the baseline, {runs}{where}) \u00b7 B: {c.new} (this job).")
    for p in c.phases:
        body += _phase(charts, c, p, base, new)
    if not c.phases:
        body += note("No phase has steps in both jobs: nothing to compare.")
    for m in c.missing_phases:
        body += note(f"{m.phase.capitalize()}: not recorded in {m.lacking}, not compared.")
    return section(ANCHOR, f"Comparison with {c.base}", body + _setup(c))
