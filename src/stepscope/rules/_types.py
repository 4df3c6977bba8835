"""What a rule returns: a :class:`RuleResult` with typed :class:`Finding` objects.

A result round-trips through JSON (``to_dict``/``from_dict``): it is what the
runner writes to ``rules/<RuleName>.json`` and what ``stepscope rules --json``
prints, the contract with the report and the dashboard (docs/format.md).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Hashable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, cast

from stepscope.jobfolder import FindingJson, JsonObject, RuleVerdict


class Status(StrEnum):
    """The verdict of a rule on a job."""

    ISSUES_FOUND = "IssuesFound"
    NO_ISSUES_FOUND = "NoIssuesFound"
    NOT_APPLICABLE = "NotApplicable"
    ERROR = "Error"
    IN_PROGRESS = "InProgress"


def _clean(value: object) -> object:
    """JSON-safe: numpy scalars become Python numbers, NaN becomes None."""
    item = getattr(value, "item", None)
    if item is not None and not isinstance(value, list | tuple | dict):
        value = item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, list | tuple):
        return [_clean(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    return value


@dataclass(frozen=True)
class Finding:
    """One problem: where (node, device, rank), when (start, end, steps), how bad.

    ``severity`` is 0 (harmless) to 1 (as bad as it gets); ``steps`` is the
    ``(first, last)`` step numbers concerned; ``value`` is what was measured and
    ``threshold`` what it was compared with, in the rule's units.
    """

    message: str
    recommendation: str
    severity: float
    node: str | None = None
    device: str | None = None
    rank: int | None = None
    start: float | None = None
    end: float | None = None
    steps: tuple[int, int] | None = None
    value: float | None = None
    threshold: float | None = None

    def __post_init__(self) -> None:
        severity = float(self.severity)
        object.__setattr__(self, "severity", min(1.0, max(0.0, severity)))
        if self.steps is not None:
            first, last = self.steps
            object.__setattr__(self, "steps", (int(first), int(last)))

    def key(self) -> tuple[Hashable, ...]:
        """Identity of a finding: the same problem found again has the same key."""
        return (self.node, self.device, self.rank, self.start, self.steps, self.message[:40])

    def to_dict(self) -> FindingJson:
        """The finding as a JSON-serialisable dict."""
        out = {f.name: _clean(getattr(self, f.name)) for f in dataclasses.fields(self)}
        return cast(FindingJson, out)  # the fields, each made JSON-safe by _clean

    @classmethod
    def from_dict(cls, data: Mapping[str, object]) -> Finding:
        """A finding from ``to_dict()`` output; unknown keys are ignored."""
        names = {f.name for f in dataclasses.fields(cls)}
        # The values of to_dict(), taken back as they are (__post_init__ checks the rest).
        kwargs: dict[str, Any] = {k: v for k, v in data.items() if k in names}
        if kwargs.get("steps") is not None:
            kwargs["steps"] = tuple(kwargs["steps"])
        return cls(**kwargs)


@dataclass(frozen=True)
class RuleResult:
    """The verdict of one rule: status, counts, findings and what to do.

    ``triggers`` counts the times the rule's condition held (windows, steps, ...);
    ``datapoints`` counts what it evaluated (samples, steps), so a silent rule
    that saw no data can be told from one that found nothing. ``reason`` says
    why a rule is ``NotApplicable`` or ``Error``. ``verdict`` is, while a job
    runs (status ``InProgress``), the status the rule would have if it ended now.
    ``details`` holds rule-specific figures (e.g. per-node percentiles).
    ``cost_seconds`` estimates the job time the findings cost (what the job would
    have saved without the problem), ``None`` when the rule cannot tell; the
    diagnosis ranks findings by it. ``saving_seconds`` is what the rule's
    recommendation would save, bounded by what the machine allows (more workers only
    use idle cores): at most ``cost_seconds``; ``details.saving_bound`` says which
    bound applied when it is less.
    """

    rule: str
    status: Status
    triggers: int = 0
    datapoints: int = 0
    message: str = ""
    recommendation: str = ""
    parameters: JsonObject = field(default_factory=dict)
    findings: tuple[Finding, ...] = ()
    description: str = ""
    reason: str | None = None
    updated: float = 0.0
    verdict: Status | None = None
    details: JsonObject = field(default_factory=dict)
    cost_seconds: float | None = None
    saving_seconds: float | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "status", Status(self.status))
        if self.verdict is not None:
            object.__setattr__(self, "verdict", Status(self.verdict))
        object.__setattr__(self, "findings", tuple(self.findings))

    @property
    def max_severity(self) -> float:
        """The severity of the worst finding (0 without findings)."""
        return max((f.severity for f in self.findings), default=0.0)

    def to_dict(self) -> RuleVerdict:
        """The result as a JSON-serialisable dict (the ``rules/<Rule>.json`` layout)."""
        out: JsonObject = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.name == "findings":
                value = [x.to_dict() for x in value]
            elif isinstance(value, Status):
                value = value.value
            out[f.name] = _clean(value)
        return cast(RuleVerdict, out)  # the fields, each made JSON-safe by _clean

    @classmethod
    def from_dict(cls, data: Mapping[str, object]) -> RuleResult:
        """A result from ``to_dict()`` output; unknown keys are ignored."""
        names = {f.name for f in dataclasses.fields(cls)}
        # The values of to_dict(), taken back as they are (__post_init__ checks the statuses).
        kwargs: dict[str, Any] = {k: v for k, v in data.items() if k in names}
        findings = data.get("findings") or ()
        if not isinstance(findings, list | tuple):
            raise TypeError(f"findings must be a list, not {type(findings).__name__}")
        kwargs["findings"] = tuple(Finding.from_dict(f) for f in findings)
        return cls(**kwargs)
