"""What a rule returns: a :class:`RuleResult` with typed :class:`Finding` objects.

A result round-trips through JSON (``to_dict``/``from_dict``): it is what the
runner writes to ``rules/<RuleName>.json`` and what ``stepscope rules --json``
prints, the contract with the report and the dashboard (docs/format.md).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any


class Status(StrEnum):
    """The verdict of a rule on a job."""

    ISSUES_FOUND = "IssuesFound"
    NO_ISSUES_FOUND = "NoIssuesFound"
    NOT_APPLICABLE = "NotApplicable"
    ERROR = "Error"
    IN_PROGRESS = "InProgress"


def _clean(value: Any) -> Any:
    """JSON-safe: numpy scalars become Python numbers, NaN becomes None."""
    if hasattr(value, "item") and not isinstance(value, list | tuple | dict):
        value = value.item()
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

    def key(self) -> tuple[Any, ...]:
        """Identity of a finding: the same problem found again has the same key."""
        return (self.node, self.device, self.rank, self.start, self.steps, self.message[:40])

    def to_dict(self) -> dict[str, Any]:
        """The finding as a JSON-serialisable dict."""
        out = {f.name: _clean(getattr(self, f.name)) for f in dataclasses.fields(self)}
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Finding:
        """A finding from ``to_dict()`` output; unknown keys are ignored."""
        names = {f.name for f in dataclasses.fields(cls)}
        kwargs = {k: v for k, v in data.items() if k in names}
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
    """

    rule: str
    status: Status
    triggers: int = 0
    datapoints: int = 0
    message: str = ""
    recommendation: str = ""
    parameters: dict[str, Any] = field(default_factory=dict)
    findings: tuple[Finding, ...] = ()
    description: str = ""
    reason: str | None = None
    updated: float = 0.0
    verdict: Status | None = None
    details: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "status", Status(self.status))
        if self.verdict is not None:
            object.__setattr__(self, "verdict", Status(self.verdict))
        object.__setattr__(self, "findings", tuple(self.findings))

    @property
    def max_severity(self) -> float:
        """The severity of the worst finding (0 without findings)."""
        return max((f.severity for f in self.findings), default=0.0)

    def to_dict(self) -> dict[str, Any]:
        """The result as a JSON-serialisable dict (the ``rules/<Rule>.json`` layout)."""
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.name == "findings":
                value = [x.to_dict() for x in value]
            elif isinstance(value, Status):
                value = value.value
            out[f.name] = _clean(value)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RuleResult:
        """A result from ``to_dict()`` output; unknown keys are ignored."""
        names = {f.name for f in dataclasses.fields(cls)}
        kwargs = {k: v for k, v in data.items() if k in names}
        kwargs["findings"] = tuple(Finding.from_dict(f) for f in data.get("findings") or ())
        return cls(**kwargs)
