"""The rule API: :class:`Rule` for rule authors (per-node rules: ``_node_rule``).

A rule is a pure function of a job's data (:class:`RuleInput`) and of its
parameters, returning a :class:`RuleResult`. It never plots, prints, reads the
clock or raises to report a finding; an exception is a bug in the rule, and
the caller turns it into status ``Error``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import ClassVar

from stepscope.rules._cost import within_evidence
from stepscope.rules._input import RuleInput
from stepscope.rules._params import (
    MIN_COST_S,
    MIN_COST_SHARE,
    SCAN_INTERVAL,
    Param,
    ParamValue,
    resolve_params,
)
from stepscope.rules._types import Finding, RuleResult, Status


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
    #: Whether the verdict can change with no new rows: the rule reads ``data.now``
    #: (time since the last step, a start still waiting) or the output tensors, which
    #: the live runner does not stream. A live scan that read no new rows evaluates only
    #: these rules and keeps the others' verdicts (docs/custom-rules.md).
    judges_now: ClassVar[bool] = False

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

    def too_little(self, cost: float | None) -> float | None:
        """The rule's ``min_cost_s`` when its findings cost less: too little to act on
        (docs/rules.md); None for a rule without the parameter or an unknown cost."""
        if MIN_COST_S not in self.parameters or cost is None:
            return None
        least = float(self.p_float(MIN_COST_S))
        return least if cost < least else None

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
