"""The diagnosis: a job's rule verdicts as one ranked answer to "why is it slow".

:func:`diagnose_verdicts` ranks the problems found (rules whose status, or
provisional verdict, is ``IssuesFound``) by the job time they cost
(``cost_seconds``, estimated by each rule), most costly first; problems whose
rule cannot tell its cost follow, most severe first. With no problem it says
what was checked (rules that judged datapoints) and what could not be
(``NotApplicable``, ``Error``, with their reasons): never "no problem found" on
nothing, on verdicts the rule runner did not finish (:mod:`.diagnosis_stale`), or on
a job whose data is incomplete (:mod:`.diagnosis_incomplete`). It reads the verdicts
as ``rules/*.json`` holds them (docs/format.md), so ``stepscope show``, the report
and the dashboard give the same answer; ``stepscope.rules.diagnose`` takes
:class:`~stepscope.rules.RuleResult` objects.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from stepscope.analysis._diagnosis_facts import JobFacts, job_facts, wall_seconds
from stepscope.analysis._diagnosis_types import Check, DiagnosisEntry, Evidence
from stepscope.analysis._plain import finite
from stepscope.analysis.diagnosis_gpu import gpu_notes
from stepscope.analysis.diagnosis_incomplete import RECORDED_PART, incomplete_text
from stepscope.analysis.diagnosis_overlap import Counted, counted_costs, left_out_text
from stepscope.analysis.diagnosis_saving import saving_bound, saving_text
from stepscope.analysis.diagnosis_stale import stale_text
from stepscope.analysis.diagnosis_text import (
    ChecksJson,
    EntryJson,
    duration_text,
    label,
    percent_text,
)
from stepscope.analysis.profiled import profiled_count, profiled_text
from stepscope.jobfolder import FindingJson, RuleVerdict

__all__ = [
    "ISSUE",
    "Check",
    "Diagnosis",
    "DiagnosisEntry",
    "Evidence",
    "JobFacts",
    "diagnose_verdicts",
    "job_facts",
    "rule_anchor",
    "wall_seconds",
]

ISSUE = "IssuesFound"


def rule_anchor(name: str) -> str:
    """The id of a rule's section in the report (``rule-DataLoading``)."""
    return "rule-" + "".join(c if c.isalnum() else "-" for c in name)


@dataclass(frozen=True)
class Diagnosis:
    """The ranked problems, the rules that found none, and those that could not judge."""

    entries: tuple[DiagnosisEntry, ...] = ()
    checked: tuple[Check, ...] = ()
    not_checked: tuple[Check, ...] = ()
    facts: JobFacts = field(default_factory=JobFacts)
    notes: tuple[str, ...] = ()  # what the samples show that no rule could judge
    stale: str | None = None  # the rule runner did not finish (.diagnosis_stale)

    @property
    def summary(self) -> str:
        """One line: how many problems, or what was checked when none was found; then
        the notes (a GPU job too short for the GPU rules' patience: what its samples show)."""
        return "; ".join((self._found(), *self.notes))

    def _found(self) -> str:
        found = self._judged()
        found = found if self.stale is None else f"{self.stale}; {found}"
        lost = incomplete_text(self.facts.incomplete)  # (.diagnosis_incomplete)
        return found if lost is None else f"{lost}; {found}"

    def _judged(self) -> str:
        wall = self.facts.wall_seconds
        job = f"this {duration_text(wall)} job" if wall is not None else "this job"
        if self.facts.incomplete is not None:  # what was lost was never judged
            job = f"{RECORDED_PART} {job}"
        if self.entries:
            n = len(self.entries)
            costed = any(e.cost_seconds is not None for e in self.entries)
            order = "most costly first" if costed else "most severe first (no cost known)"
            return f"{n} problem{'s' if n > 1 else ''} found in {job}, {order}"
        if not self.checked:
            return "nothing checked yet: " + (self._why_not() or "no rule results in this job")
        done = ", ".join(c.text for c in self.checked)
        if self.stale is not None:  # the final evaluation never ran: not "no problem"
            text = f"none had found a problem by then in {job}: checked {done}"
        elif self.facts.incomplete is not None:  # steps were lost: not "no problem"
            text = f"nothing found in {job}: checked {done}"
        else:
            text = f"no problem found in {job}: checked {done}"
        return text + (f"; not checked: {self._why_not()}" if self.not_checked else "")

    def _why_not(self) -> str:
        """The rules not checked, grouped by reason (on a CPU-only job most share one)."""
        by_reason: dict[str, list[str]] = {}
        for c in self.not_checked:
            by_reason.setdefault(str(c.reason), []).append(c.rule)
        return ", ".join(f"{', '.join(rules)} ({why})" for why, rules in by_reason.items())

    def to_list(self) -> list[EntryJson]:
        """The entries as JSON objects (``show --json``'s ``diagnosis``)."""
        return [e.to_dict() for e in self.entries]

    def checks(self) -> ChecksJson:
        """The summary and what was and was not checked (``diagnosis_checks``)."""
        return {"summary": self.summary, "problems": len(self.entries),
                "checked": [c.to_dict() for c in self.checked],
                "not_checked": [c.to_dict() for c in self.not_checked],
                "notes": list(self.notes)}  # fmt: skip


def _worst(findings: list[FindingJson]) -> FindingJson | None:
    return max(findings, key=lambda f: finite(f.get("severity")) or 0.0, default=None)


def _evidence(rule: str, findings: list[FindingJson]) -> Evidence:
    worst = _worst(findings)
    spans = [f.get("steps") for f in findings]
    steps = [s for s in spans if isinstance(s, list | tuple) and len(s) == 2]
    span = (int(min(s[0] for s in steps)), int(max(s[1] for s in steps))) if steps else None
    if worst is None:
        return Evidence(rule_anchor(rule), 0, span)
    rank = worst.get("rank")
    return Evidence(rule_anchor(rule), len(findings), span, finite(worst.get("start")),
                    finite(worst.get("end")), worst.get("node"),
                    int(rank) if isinstance(rank, int | float) else None)  # fmt: skip


def _entry(
    v: RuleVerdict, facts: JobFacts, counted: Counted, bounds: Mapping[str, tuple[float, str]]
) -> DiagnosisEntry:
    rule = str(v.get("rule") or "")
    findings = [f for f in v.get("findings") or [] if isinstance(f, Mapping)]
    worst = _worst(findings)
    cost = counted.cost
    wall = facts.wall_seconds
    share = min(1.0, max(0.0, cost / wall)) if cost is not None and wall else None
    what = str(worst.get("message") if worst else v.get("message") or "")
    if len(findings) > 1:
        what += f" (and {len(findings) - 1} more)"
    if cost is None:
        message = f"{label(rule)} (cost unknown): {what}"
    else:
        of = f" of {'this ' + duration_text(wall) + ' job' if wall else 'the job'}"
        pct = f" ({percent_text(share)})" if share is not None else ""
        message = f"{label(rule)}: about {duration_text(cost)}{of}{pct}{left_out_text(counted)}"
        message += saving_text(cost, counted.saving, (rule, *counted.folded), bounds)
        message += f"; {what}"
    if more := profiled_text(profiled_count(v.get("details"))):
        message += f" ({more})"
    fix = str(v.get("recommendation") or (worst.get("recommendation") if worst else "") or "")
    severity = max((finite(f.get("severity")) or 0.0 for f in findings), default=0.0)
    return DiagnosisEntry(rule, str(v.get("status")), cost, share, severity, message, fix,
                          _evidence(rule, findings), counted.saving, counted.folded)  # fmt: skip


def _check(v: RuleVerdict) -> Check:
    rule, status = str(v.get("rule") or ""), str(v.get("verdict") or v.get("status"))
    points = int(finite(v.get("datapoints")) or 0)
    if status == "Error":
        return Check(rule, points, f"error: {v.get('reason') or v.get('message')}")
    if status == "NotApplicable" or not points:
        return Check(rule, points, str(v.get("reason") or v.get("message") or "no datapoints"))
    return Check(rule, points, profiled=profiled_count(v.get("details")))


def diagnose_verdicts(verdicts: Iterable[RuleVerdict], facts: JobFacts) -> Diagnosis:
    """The diagnosis of a job from its rule verdicts (``rules/*.json`` dicts) and facts.

    Problems are ranked by ``cost_seconds`` (most first; ties by severity, then
    rule name), those without a cost after, by severity: by the measured cost, not
    the modelled saving (docs/rules.md, "Diagnosis", says why). Costs are counted once
    (:mod:`.diagnosis_overlap`): they never add up to more than the job; a rule that
    prices next to nothing beyond its cause is folded into the cause's entry. Each
    entry says what its fix would save when that is less than its cost
    (:mod:`.diagnosis_saving`). A GPU job
    too short for the GPU rules' patience gets a note on what its samples show
    (:mod:`.diagnosis_gpu`).
    """
    verdicts = list(verdicts)
    issues: list[RuleVerdict] = []
    checked: list[Check] = []
    not_checked: list[Check] = []
    for v in verdicts:
        if ISSUE in (v.get("status"), v.get("verdict")):
            issues.append(v)
        else:
            c = _check(v)
            (checked if c.reason is None else not_checked).append(c)
    names = [str(v.get("rule") or "") for v in issues]
    own = {r: finite(v.get("cost_seconds")) for r, v in zip(names, issues, strict=True)}
    saved = {r: finite(v.get("saving_seconds")) for r, v in zip(names, issues, strict=True)}
    counted = counted_costs(own, facts.wall_seconds, saved)
    bounds = {r: (saved.get(r) or 0.0, why)
              for r, v in zip(names, issues, strict=True) if (why := saving_bound(v))}  # fmt: skip
    entries = [
        _entry(v, facts, counted[r], bounds)
        for r, v in zip(names, issues, strict=True)
        if counted[r].into is None  # folded: its cause's entry counts and names it
    ]

    def key(e: DiagnosisEntry) -> tuple[bool, float, float, str]:
        return e.cost_seconds is None, -(e.cost_seconds or 0.0), -e.severity, e.rule

    return Diagnosis(
        tuple(sorted(entries, key=key)),
        tuple(sorted(checked, key=lambda c: c.rule)),
        tuple(sorted(not_checked, key=lambda c: c.rule)),
        facts,
        gpu_notes(verdicts),
        stale_text(verdicts),
    )
