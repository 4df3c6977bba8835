"""Tensors: what the job saved, losses and scalars over its steps, and the norms of
weights and gradients; with links to the debugging rules' results (docs/tensors.md)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from stepscope.analysis.diagnosis import rule_anchor
from stepscope.analysis.downsample import FloatArray
from stepscope.analysis.report_data import rank_rules
from stepscope.report import _tensor_data as td
from stepscope.report._context import Context
from stepscope.report._html import badge, chart, esc, note, section, table

MAX_CHARTS = 12
MAX_SERIES = 10
MAX_TABLE = 200  # tensors listed; open when at most OPEN_TABLE
OPEN_TABLE = 30


def _finite(values: pd.Series) -> tuple[FloatArray, int]:
    """Values with NaN and infinities as gaps (the chart layer draws no infinity)."""
    v = values.to_numpy(np.float64)
    ok = np.isfinite(v)
    return np.where(ok, v, np.nan), int((~ok).sum())


def _chart(ctx: Context, title: str, rows: pd.DataFrame) -> str:
    """One chart of several tensors that were saved at the same steps."""
    rows = rows.drop_duplicates(["step", "name"], keep="last")
    wide = rows.pivot(index="step", columns="name", values="value").sort_index()
    names = list(wide.columns)[:MAX_SERIES]
    cols, bad = {}, 0
    for name in names:
        cols[str(name)], n_bad = _finite(wide[name])
        bad += n_bad
    phase, key = str(rows["phase"].iloc[0]), str(rows["key"].iloc[0])
    cid = ctx.charts.add_timeseries(
        title,
        wide.index.to_numpy(np.float64),
        cols,
        "",
        xAxis="step",
        xLabel=f"{phase} step",
        tensor_phase=phase,
        tensor_key=key,
        tensors=[str(n) for n in names],
    )
    steps = wide.index
    caption = f"{len(steps)} saved {phase} steps ({int(steps.min())}\u2013{int(steps.max())})."
    if len(wide.columns) > MAX_SERIES:
        caption += f" The first {MAX_SERIES} of {len(wide.columns)} tensors are drawn."
    if bad:
        caption += f" {bad} values are NaN or infinite: drawn as gaps."
    if key == td.RAW_L2:
        caption += f" Computed from the raw tensors (at most {td.RAW_STEPS} steps each)."
    return chart(cid, caption)


def _charts(ctx: Context, rows: pd.DataFrame, fams: dict[str, str]) -> str:
    if rows.empty:
        return ""
    groups = td.chart_groups(rows, fams)
    html = "".join(_chart(ctx, title, sub) for title, sub in groups[:MAX_CHARTS])
    if len(groups) > MAX_CHARTS:
        html += note(f"{len(groups) - MAX_CHARTS} more charts are not shown.")
    return "<h3>Over the steps</h3>" + html


def _table(rows: list[td.SummaryRow]) -> str:
    head = ["Tensor", "Kind", "Train steps saved", "Eval steps saved", "Stored"]
    body = table(head, rows[:MAX_TABLE], cls="tensors")
    if len(rows) > MAX_TABLE:
        body += note(f"{len(rows) - MAX_TABLE} more tensors are not listed.")
    if len(rows) <= OPEN_TABLE:
        return body
    return f"<details><summary>All {len(rows)} saved tensors</summary>{body}</details>"


def _rule_links(ctx: Context) -> str:
    from stepscope.rules import DEBUGGING_RULES

    found = rank_rules([r for r in ctx.rules if r.get("rule") in DEBUGGING_RULES])
    if not found:
        return note("No debugging rule ran on these tensors (see docs/tensors.md).")
    items = [
        f'<a href="#{esc(rule_anchor(str(r.get("rule"))))}">{esc(r.get("rule"))}</a> '
        f"{badge(str(r.get('status')))} {esc(r.get('triggers', 0))} triggers"
        for r in found
    ]
    return "<p><b>Debugging rules:</b> " + " · ".join(items) + "</p>"


def tensors_section(ctx: Context) -> str:
    """The saved tensors of the first rank that saved any, or "" when none were."""
    if not ctx.job.store.isdir("tensors"):
        return ""
    ranks = ctx.job.tensors.ranks()
    if not ranks:
        return ""
    t = ctx.job.tensors.rank(ranks[0])
    scalars, index = t.scalars(), t.index()
    if scalars.empty and index.empty:
        return ""
    names = sorted(set(scalars["name"]) | set(index["name"]))
    fams = td.families(names, t.collections())
    raw = td.raw_l2(t, index, scalars, fams)
    rows = pd.concat([scalars, raw], ignore_index=True) if len(raw) else scalars
    others = f" (ranks {', '.join(map(str, ranks))} saved tensors)" if len(ranks) > 1 else ""
    intro = note(
        f"{len(names)} tensors saved by rank {ranks[0]}{others}. Read them with "
        "stepscope.open(path).tensors, or export them for TensorBoard."
    )
    body = intro + _rule_links(ctx) + _table(td.summary_rows(scalars, index, fams))
    return section("tensors", "Tensors", body + _charts(ctx, rows, fams))
