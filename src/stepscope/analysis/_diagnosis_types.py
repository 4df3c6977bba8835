"""The parts of a diagnosis: a problem's entry, its evidence, a rule's check.

Re-exported by :mod:`stepscope.analysis.diagnosis`, which builds them from the
rule verdicts.
"""

from __future__ import annotations

from dataclasses import dataclass

from stepscope.analysis.diagnosis_text import CheckJson, EntryJson, EvidenceJson
from stepscope.analysis.profiled import profiled_text


@dataclass(frozen=True)
class Evidence:
    """Where to look: the rule's report section, its findings, the worst one's place."""

    anchor: str
    findings: int = 0
    steps: tuple[int, int] | None = None
    start: float | None = None
    end: float | None = None
    node: str | None = None
    rank: int | None = None

    def to_dict(self) -> EvidenceJson:
        steps = list(self.steps) if self.steps is not None else None
        return {"anchor": self.anchor, "findings": self.findings, "steps": steps,
                "start": self.start, "end": self.end,
                "node": self.node, "rank": self.rank}  # fmt: skip


@dataclass(frozen=True)
class DiagnosisEntry:
    """One problem: its rule, what it cost the job, what was found, the fix, the evidence.

    ``cost_share`` is ``cost_seconds`` over the job's wall time (0-1; None when
    either is unknown). ``saving_seconds`` is what the fix would save of the cost, at
    most it (None: unknown); ``also`` the rules whose findings of the same time this
    entry counts (folded into it: :mod:`.diagnosis_overlap`).
    """

    rule: str
    status: str
    cost_seconds: float | None
    cost_share: float | None
    severity: float
    message: str
    recommendation: str
    evidence: Evidence
    saving_seconds: float | None = None
    also: tuple[str, ...] = ()

    def to_dict(self) -> EntryJson:
        return {"rule": self.rule, "status": self.status, "cost_seconds": self.cost_seconds,
                "cost_share": self.cost_share, "saving_seconds": self.saving_seconds,
                "severity": self.severity, "message": self.message,
                "recommendation": self.recommendation, "evidence": self.evidence.to_dict(),
                "also": list(self.also)}  # fmt: skip


@dataclass(frozen=True)
class Check:
    """A rule that judged the job (``reason`` None) or could not (the reason)."""

    rule: str
    datapoints: int
    reason: str | None = None
    profiled: int = 0  # steps it left out as profiled (stepscope.analysis.profiled)

    @property
    def text(self) -> str:
        """``StepOutlier (90 datapoints)``, with the steps left out when many."""
        points = f"{self.datapoints} datapoint{'s' if self.datapoints != 1 else ''}"
        more = profiled_text(self.profiled)
        return f"{self.rule} ({points}{'; ' + more if more else ''})"

    def to_dict(self) -> CheckJson:
        return {"rule": self.rule, "datapoints": self.datapoints, "reason": self.reason}
