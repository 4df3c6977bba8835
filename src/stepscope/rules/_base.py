"""The rule API: :class:`Rule` for rule authors, :class:`NodeRule` for per-node rules.

A rule is a pure function of a job's data (:class:`RuleInput`) and of its
parameters, returning a :class:`RuleResult`. It never plots, prints, reads the
clock or raises to report a finding; an exception is a bug in the rule, and
the caller turns it into status ``Error``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar

from stepscope.analysis.profiled import LEFT_OUT, profiled_count, profiled_text
from stepscope.jobfolder import JsonObject
from stepscope.rules._cost import on_cost, within_evidence
from stepscope.rules._input import RuleInput
from stepscope.rules._params import (
    MIN_COST_SHARE,
    SCAN_INTERVAL,
    Param,
    ParamValue,
    resolve_params,
)
from stepscope.rules._types import Finding, RuleResult, Status

if TYPE_CHECKING:
    import pandas as pd


class Rule:
    """Base of every rule. Subclass it, declare ``params`` and implement ``evaluate``.

    ``Rule(**parameters)`` validates the parameters: unknown names and bad
    values raise :class:`~stepscope.rules.RuleConfigError`. Every rule also has
    ``scan_interval_us``. Read a parameter with ``self.p("name")``, or, typed, with
    ``self.p_float("name")``, ``p_int``, ``p_str`` or ``p_bool``.
    """

    name: ClassVar[str] = ""
    description: ClassVar[str] = ""
    recommendation: ClassVar[str] = ""
    params: ClassVar[tuple[Param, ...]] = ()
    #: The frames ``evaluate`` reads when judging a whole job (``steps``, ``system``,
    #: ``events``); the evaluator loads only these. The wide ``system`` frame of a
    #: job of many nodes is large: leave it out if unused, or write a NodeRule.
    frames: ClassVar[tuple[str, ...]] = ("steps", "system", "events")

    def __init__(self, name: str | None = None, **parameters: object) -> None:
        self.rule_name = name or self.name or type(self).__name__
        self.parameters = resolve_params(self.rule_name, self.declared(), parameters)

    @classmethod
    def declared(cls) -> tuple[Param, ...]:
        """The rule's parameters, ``scan_interval_us`` included."""
        names = {p.name for p in cls.params}
        return (*cls.params, *([] if SCAN_INTERVAL.name in names else [SCAN_INTERVAL]))

    def p(self, name: str) -> ParamValue:
        """The value of parameter ``name``."""
        return self.parameters[name]

    def p_float(self, name: str) -> float:
        """The value of the number parameter ``name`` (an int default stays an int)."""
        value = self.parameters[name]
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self._not_a(name, "number")
        return value

    def p_int(self, name: str) -> int:
        """The value of the whole-number parameter ``name``."""
        value = self.parameters[name]
        if isinstance(value, bool) or not isinstance(value, int):
            raise self._not_a(name, "whole number")
        return value

    def p_str(self, name: str) -> str:
        """The value of the string parameter ``name``."""
        value = self.parameters[name]
        if not isinstance(value, str):
            raise self._not_a(name, "string")
        return value

    def p_bool(self, name: str) -> bool:
        """The value of the flag parameter ``name``."""
        value = self.parameters[name]
        if not isinstance(value, bool):
            raise self._not_a(name, "flag")
        return value

    def _not_a(self, name: str, kind: str) -> TypeError:
        value = self.parameters[name]
        return TypeError(f"parameter {name!r} of {self.rule_name} is {value!r}, not a {kind}")

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.rule_name!r}, {self.parameters})"

    def evaluate(self, data: RuleInput) -> RuleResult:
        """Judge ``data``; return a result, never raise to report a problem."""
        raise NotImplementedError(f"{type(self).__name__} does not implement evaluate()")

    def cost_share(
        self, cost: float | None, step_seconds: float | None
    ) -> tuple[float, float] | None:
        """The findings' cost as % of the job's step time and ``min_cost_share``; None for
        a rule without the parameter, or with the cost or the step time unknown."""
        if MIN_COST_SHARE not in self.parameters or cost is None or not step_seconds:
            return None
        return 100.0 * cost / step_seconds, float(self.p_float(MIN_COST_SHARE))

    # -- helpers to build results --------------------------------------------------
    def result(
        self,
        status: Status,
        data: RuleInput,
        *,
        findings: Iterable[Finding] = (),
        triggers: int | None = None,
        datapoints: int = 0,
        message: str = "",
        reason: str | None = None,
        details: Mapping[str, object] | None = None,
        cost_seconds: float | None = None,
        saving_seconds: float | None = None,
    ) -> RuleResult:
        """A result of this rule with its name, parameters and description filled in.

        ``cost_seconds``: the job time the findings cost, when the rule can tell, held
        to the time the findings span; ``saving_seconds``: what the recommendation
        would save, at most the cost (None: all of it).
        """
        found = tuple(sorted(findings, key=lambda f: (-f.severity, f.start or 0.0)))
        cost = within_evidence(cost_seconds, found)
        saving = cost if saving_seconds is None or cost is None else min(saving_seconds, cost)
        return RuleResult(
            rule=self.rule_name,
            status=status,
            datapoints=int(datapoints),
            triggers=len(found) if triggers is None else int(triggers),
            message=message or reason or "",
            recommendation=self.recommendation,
            parameters=dict(self.parameters),
            findings=found,
            description=self.description,
            reason=reason,
            updated=data.now,
            details=dict(details or {}),
            cost_seconds=cost,
            saving_seconds=saving,
        )

    def not_applicable(self, data: RuleInput, reason: str) -> RuleResult:
        """Status ``NotApplicable`` with ``reason`` (e.g. no GPU in this job)."""
        return self.result(Status.NOT_APPLICABLE, data, reason=reason)


@dataclass
class Part:
    """What a :class:`NodeRule` found on one node, before the nodes are combined.

    ``cost_seconds`` is the job time this node's findings cost (``None``: unknown);
    the result's ``cost_seconds`` combines the nodes' with :meth:`NodeRule.cost`.
    ``saving_seconds`` is what the rule's recommendation would save on the node, at
    most its cost (None: the whole cost); :meth:`NodeRule.saving` combines the nodes'.
    ``step_seconds`` is the step time the cost is a share of (the slowest rank's sum of
    step durations); a rule with ``min_cost_share`` fires when the share reaches it.
    """

    findings: list[Finding] = field(default_factory=list)
    triggers: int = 0
    datapoints: int = 0
    details: JsonObject = field(default_factory=dict)
    na_reason: str | None = None
    cost_seconds: float | None = None
    step_seconds: float | None = None
    saving_seconds: float | None = None


def _joined(parts: list[Part]) -> JsonObject:
    """The nodes' details in one: lists (one entry per node's device) are joined."""
    out: JsonObject = {}
    for p in parts:
        for key, value in p.details.items():
            kept = out.get(key)
            if isinstance(kept, list) and isinstance(value, list):
                out[key] = kept + value
            else:
                out[key] = value
    return out


class NodeRule(Rule):
    """A rule judged node by node (``check``), then combined (``combine``).

    The offline evaluator loads one node at a time, so memory stays bounded on
    jobs of many nodes. ``tolerated`` triggers do not make the rule fire.
    """

    def check(self, data: RuleInput) -> Part:
        """Judge one node's data (``data`` holds only that node)."""
        raise NotImplementedError

    def forget(self) -> None:
        """Drop what the rule kept of the node it checked last: called after each
        ``check``, so no rule holds one node's frames while the next is judged."""

    def summary(self, data: RuleInput) -> pd.DataFrame | None:
        """A compact summary of one node's data, kept by the live runner when the data
        leaves its buffer and handed back as ``data.history[rule_name]`` (see
        ``_trend``); None (the default) keeps nothing."""
        return None

    def tolerated(self) -> int:
        """Triggers allowed before the status becomes ``IssuesFound``."""
        return 0

    def cost(self, parts: list[Part]) -> float | None:
        """The job time the findings of all nodes cost: by default the worst node's,
        since the nodes of a job run side by side; ``None`` when no node knows."""
        known = [p.cost_seconds for p in parts if p.cost_seconds is not None]
        return max(known) if known else None

    def saving(self, parts: list[Part]) -> float | None:
        """What the recommendation would save the job, as :meth:`cost` combines costs:
        the nodes' savings (a node without one saves its whole cost); None when no node
        knows its cost."""
        known = [
            p.cost_seconds if p.saving_seconds is None else p.saving_seconds
            for p in parts
            if p.cost_seconds is not None
        ]
        return max(known) if known else None

    def evaluate(self, data: RuleInput) -> RuleResult:
        parts = [self.check(data.for_node(node)) for node in data.node_names()]
        self.forget()
        return self.combine(parts, data)

    def combine(self, parts: list[Part], data: RuleInput) -> RuleResult:
        """One result from the parts of all nodes."""
        judged = [p for p in parts if p.na_reason is None]
        if not judged:
            reasons = sorted({p.na_reason or "" for p in parts}) or ["no data in this job"]
            reason = "; ".join(r for r in reasons if r)
            return self.result(Status.NOT_APPLICABLE, data, reason=reason, details=_joined(parts))
        findings = [f for p in judged for f in p.findings]
        triggers = sum(p.triggers for p in judged)
        datapoints = sum(p.datapoints for p in judged)
        details: JsonObject = {}
        for p in judged:
            details.update(p.details)
        if profiled := sum(profiled_count(p.details) for p in judged):
            details[LEFT_OUT] = profiled
        cost = within_evidence(self.cost(judged), findings)
        steps = [p.step_seconds for p in judged if p.step_seconds]
        if steps:
            details["step_seconds"] = max(steps)
        status = Status.ISSUES_FOUND if triggers > self.tolerated() else Status.NO_ISSUES_FOUND
        share = self.cost_share(cost, max(steps, default=None)) if findings else None
        if status is Status.NO_ISSUES_FOUND and share is not None and cost:
            # below the count or the floor: the cost decides (min_cost_share)
            left = profiled_text(profiled_count(details))
            below = self.below_text(triggers, findings) + (f" ({left})" if left else "")
            fired, message = on_cost(below, cost, share, findings)
            if fired:
                status, details["fired_on_cost"] = Status.ISSUES_FOUND, True
        else:
            message = self.summarize(status, findings, triggers, datapoints, details)
        return self.result(
            status,
            data,
            findings=findings,
            triggers=triggers,
            datapoints=datapoints,
            message=message,
            details=details,
            cost_seconds=cost,
            saving_seconds=self.saving(judged),
        )

    def below_text(self, triggers: int, findings: list[Finding]) -> str:
        """What was found below the count threshold (the start of a message that fired on
        cost)."""
        return f"{triggers} trigger(s), within the {self.tolerated()} tolerated"

    def summarize(
        self,
        status: Status,
        findings: list[Finding],
        triggers: int,
        datapoints: int,
        details: JsonObject,
    ) -> str:
        """The result's one-line message."""
        profiled = profiled_text(profiled_count(details))
        more = f" ({profiled})" if profiled else ""
        if status is Status.ISSUES_FOUND and findings:
            worst = max(findings, key=lambda f: f.severity)
            found = f"{triggers} trigger(s) in {len(findings)} finding(s){more}"
            return f"{found}; worst: {worst.message}"
        if triggers:
            return f"{triggers} trigger(s), within the {self.tolerated()} tolerated{more}."
        return f"No issue found in {datapoints} datapoints{more}."
