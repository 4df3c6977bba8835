"""Rules: a summary table, most severe first, then each rule with its evidence."""

from __future__ import annotations

import numpy as np

from stepscope.analysis.diagnosis import rule_anchor
from stepscope.analysis.pagescale import column_label
from stepscope.analysis.report_data import GPU_RE, finite, numbered, per_step, rank_rules
from stepscope.jobfolder import FindingJson, RuleVerdict
from stepscope.report._charts import Band
from stepscope.report._context import Context
from stepscope.report._html import (
    badge,
    chart,
    esc,
    fmt_duration,
    fmt_number,
    fmt_time,
    note,
    section,
    table,
)

MAX_FINDINGS = 50

# The data each rule looks at, so its evidence is plotted where it fired:
# ("system", columns or "gpu:<suffix>") or ("steps", step column). Unknown rules
# get the training step duration.
EVIDENCE: dict[str, tuple[str, list[str]]] = {
    "LowGPUUtilization": ("system", ["gpu:util"]),
    "GPUMemoryIncrease": ("system", ["gpu:mem_util"]),
    "LoadBalancing": ("system", ["gpu:util"]),
    "CPUBottleneck": ("system", ["cpu", "gpu:util"]),
    "IOBottleneck": ("system", ["proc_io_wait", "cpu_iowait", "gpu:util"]),
    "OverallSystemUsage": ("system", ["cpu", "mem_percent", "gpu:util"]),
    "BatchSize": ("system", ["cpu", "mem_percent", "gpu:util", "gpu:mem_util"]),
    "DataLoading": ("steps", ["data_wait", "duration"]),
    "GPUIdleBetweenSteps": ("system", ["gpu:util"]),
    "Straggler": ("steps", ["duration", "data_wait"]),
    "OverallFrameworkMetrics": ("steps", ["forward", "backward", "optimizer"]),
    "StepOutlier": ("steps", ["duration"]),
    "MaxInitializationTime": ("steps", ["duration"]),
}


def _params(params: object) -> str:
    if not isinstance(params, dict) or not params:
        return ""
    return ", ".join(f"{k}={fmt_number(v)}" for k, v in sorted(params.items()))


def _summary_table(results: list[RuleVerdict]) -> str:
    """The rules that fired; the others (no issue, could not judge) folded under them."""
    fired = [r for r in results if r.get("status") == "IssuesFound"]
    rest = [r for r in results if r.get("status") != "IssuesFound"]
    out = _rules_table(fired, "rules fired") if fired else note("No rule found an issue.")
    if rest:
        more = f"{len(rest)} more: no issue found, or could not judge"
        head = f"<summary>Show all {len(results)} rules ({more})</summary>"
        out += f'<details class="rules-more">{head}{_rules_table(rest, "rules quiet")}</details>'
    return out


def _rules_table(results: list[RuleVerdict], cls: str) -> str:
    rows = [
        (
            f'<a href="#{esc(rule_anchor(str(r.get("rule"))))}">{esc(r.get("rule"))}</a>',
            esc(r.get("description")),
            badge(str(r.get("status"))),
            esc(r.get("triggers", 0)),
            esc(r.get("datapoints", 0)),
            esc(_params(r.get("parameters"))),
            esc(r.get("recommendation") if r.get("status") == "IssuesFound" else ""),
        )
        for r in results
    ]
    head = [
        "Rule",
        "What it checks",
        "Status",
        "Triggers",
        "Datapoints",
        "Parameters",
        "Recommendation",
    ]
    return table(head, rows, cls=cls, raw_cols=tuple(range(7)))


def _steps_text(f: FindingJson) -> str:
    steps = f.get("steps")
    if isinstance(steps, list | tuple) and len(steps) == 2:
        return f"{steps[0]}\u2013{steps[1]}"
    return "" if steps is None else str(steps)


def _findings_table(findings: list[FindingJson]) -> str:
    findings = sorted(findings, key=lambda f: -(finite(f.get("severity")) or 0))
    rows = [
        (
            f.get("message"),
            f"{finite(f.get('severity')) or 0:.2f}",
            f.get("node"),
            f.get("rank"),
            fmt_time(finite(f.get("start"))),
            fmt_duration(_span(f)),
            _steps_text(f),
            f.get("value"),
            f.get("threshold"),
            f.get("recommendation"),
        )
        for f in findings[:MAX_FINDINGS]
    ]
    head = [
        "Finding",
        "Severity",
        "Node",
        "Rank",
        "Start",
        "Lasted",
        "Steps",
        "Value",
        "Threshold",
        "Recommendation",
    ]
    more = (
        f"<p>… and {len(findings) - MAX_FINDINGS} more.</p>" if len(findings) > MAX_FINDINGS else ""
    )
    return table(head, rows, cls="findings") + more


def _span(f: FindingJson) -> float | None:
    start, end = finite(f.get("start")), finite(f.get("end"))
    return end - start if start is not None and end is not None else None


def _evidence_columns(ctx: Context, node: str, wanted: list[str]) -> dict[str, str]:
    cols = list(ctx.system(node).columns)
    out: dict[str, str] = {}
    for w in wanted:
        if w.startswith("gpu:"):
            for c in numbered(cols, GPU_RE, w[4:]):
                out[column_label(c)] = c
        elif w in cols:
            out[column_label(w)] = w
    return out


def _evidence(ctx: Context, name: str, findings: list[FindingJson]) -> str:
    """The rule's data over the whole job, with its findings shaded where they fired."""
    kind, wanted = EVIDENCE.get(name, ("steps", ["duration"]))
    bands = [
        ctx.charts.band(
            finite(f.get("start")),
            finite(f.get("end")),
            str(f.get("message", "")),
            finite(f.get("severity")) or 0.5,
        )
        for f in findings
    ]
    nodes = [str(f["node"]) for f in findings if f.get("node")] or ctx.job.nodes()
    if kind == "system" and nodes:
        wide = ctx.system(nodes[0])
        cols = _evidence_columns(ctx, nodes[0], wanted)
        if cols and len(wide):
            series = {k: wide[c].to_numpy(np.float64) for k, c in cols.items()}
            cid = ctx.charts.add_timeseries(
                f"{name}: evidence on {nodes[0]}",
                wide["time"],
                series,
                "%",
                bands=bands,
                rule=name,
                node=nodes[0],
                metrics=list(cols.values()),
                yRange=[0, 100],
            )
            return chart(cid, "Shaded: where the rule fired (darker: more severe).")
    return _steps_evidence(ctx, name, wanted, bands)


def _steps_evidence(ctx: Context, name: str, wanted: list[str], bands: list[Band]) -> str:
    train = ctx.steps[ctx.steps["phase"] == "train"]
    if train.empty:
        return note("No training steps to plot the evidence on.")
    agg = per_step(train)
    series = {column_label(w): agg[w].to_numpy(np.float64) for w in wanted if w in agg}
    cid = ctx.charts.add_timeseries(
        f"{name}: evidence (training steps)",
        agg["start"],
        series,
        "s",
        bands=bands,
        rule=name,
        phase="train",
    )
    return chart(cid, "Shaded: where the rule fired (darker: more severe).")


def _rule_block(ctx: Context, r: RuleVerdict) -> str:
    name = str(r.get("rule"))
    findings = [f for f in r.get("findings") or [] if isinstance(f, dict)]
    body = f"<p>{badge(str(r.get('status')))} {esc(r.get('description'))}</p>"
    for label, key in (("Result", "message"), ("Recommendation", "recommendation")):
        if r.get(key):
            body += f"<p><b>{label}:</b> {esc(r.get(key))}</p>"
    if _params(r.get("parameters")):
        body += f"<p><b>Parameters:</b> <code>{esc(_params(r.get('parameters')))}</code></p>"
    if r.get("updated"):
        body += f'<p class="note">Evaluated up to {esc(fmt_time(finite(r.get("updated"))))}</p>'
    if findings:
        body += _findings_table(findings) + _evidence(ctx, name, findings)
    return section(rule_anchor(name), name, body, level=3)


def rules_section(ctx: Context) -> str:
    """The rules' results, or a note that there are none."""
    if not ctx.rules:
        text = "No rule results in this job (no rules/*.json): no rule ran on it yet."
        return section("rules", "Rules", note(text))
    results = rank_rules(ctx.rules)
    issues = sum(1 for r in results if r.get("status") == "IssuesFound")
    intro = f"<p>{issues} of {len(results)} rules found issues. Most severe first.</p>"
    blocks = "".join(_rule_block(ctx, r) for r in results)
    return section("rules", "Rules", intro + _summary_table(results) + blocks)
