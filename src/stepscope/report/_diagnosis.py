"""The report's first section: the diagnosis, the problems ranked by the time they cost.

Each problem links to its rule's section (``#rule-<Name>``), where its findings
and the evidence chart are. The ranking is :mod:`stepscope.analysis.diagnosis`,
the one ``stepscope show`` and the dashboard use.
"""

from __future__ import annotations

from stepscope.analysis.diagnosis import Diagnosis, DiagnosisEntry, diagnose_verdicts, job_facts
from stepscope.report._context import Context
from stepscope.report._html import esc, section


def _where(e: DiagnosisEntry) -> str:
    ev = e.evidence
    parts = [f"{ev.findings} finding{'s' if ev.findings != 1 else ''}"]
    if ev.steps is not None:
        first, last = ev.steps
        parts.append(f"step {first}" if first == last else f"steps {first}\u2013{last}")
    if ev.node is not None:
        parts.append(f"node {ev.node}")
    if ev.rank is not None:
        parts.append(f"rank {ev.rank}")
    return ", ".join(parts)


def _entry(e: DiagnosisEntry) -> str:
    link = f'<a href="#{esc(e.evidence.anchor)}">Evidence: {esc(e.rule)}</a> ({esc(_where(e))})'
    fix = (
        f'<div class="diag-fix"><b>Fix:</b> {esc(e.recommendation)}</div>'
        if e.recommendation
        else ""
    )
    msg = f'<div class="diag-msg">{esc(e.message)}</div>'
    return f'<li class="diag-entry">{msg}{fix}<div class="note">{link}</div></li>'


def diagnosis_html(d: Diagnosis) -> str:
    """The section: the summary line, then each problem with its fix and evidence link,
    or what was checked; the rules that could not judge the job in a fold."""
    body = f'<p class="diag-summary">{esc(d.summary)}</p>'
    if d.entries:
        body += '<ol class="diagnosis">' + "".join(_entry(e) for e in d.entries) + "</ol>"
    if d.entries and d.not_checked:
        items = "".join(f"<li>{esc(c.rule)}: {esc(c.reason)}</li>" for c in d.not_checked)
        head = f"<summary>Not checked ({len(d.not_checked)})</summary>"
        body += f"<details>{head}<ul>{items}</ul></details>"
    return section("diagnosis", "Diagnosis", body)


def diagnosis_section(ctx: Context) -> str:
    """The diagnosis of the job's verdicts (``rules/*.json``)."""
    return diagnosis_html(diagnose_verdicts(ctx.rules, job_facts(ctx.meta, ctx.steps, ctx.now)))
