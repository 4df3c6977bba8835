"""The per-node rule API: :class:`NodeRule` and the :class:`Part` each node yields.

A :class:`NodeRule` is judged node by node, then the parts are combined into one
:class:`~stepscope.rules.RuleResult`, so memory stays bounded on jobs of many nodes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar

from stepscope.analysis.profiled import LEFT_OUT, profiled_count, profiled_text
from stepscope.jobfolder import JsonObject
from stepscope.rules._base import Rule
from stepscope.rules._cost import on_cost, within_evidence
from stepscope.rules._input import RuleInput
from stepscope.rules._types import Finding, RuleResult, Status

if TYPE_CHECKING:
    import pandas as pd


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

    # Reads the node's shared training steps (``rules._train_frame``): the evaluator
    # judges such rules first and drops the frame after them.
    reads_train_frame: ClassVar[bool] = False

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
        if status is Status.ISSUES_FOUND and (least := self.too_little(cost)) is not None:
            status, details["below_min_cost_s"] = Status.NO_ISSUES_FOUND, True
            message = f"{message.rstrip('.')}; but in all it costs {cost:.2f} s (< {least:g} s)."
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
