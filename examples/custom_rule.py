"""A custom stepscope rule: fires when training steps get too slow.

Use it in a stepscope TOML configuration::

    [[rules]]
    name = "SlowSteps"
    source = "examples/custom_rule.py"
    rule_to_invoke = "SlowSteps"
    parameters = { max_seconds = 0.5 }
    actions = ["stop"]

or offline: ``stepscope rules JOB`` once the job's config names it.
"""

from __future__ import annotations

from stepscope.rules import Finding, Param, Rule, RuleInput, RuleResult, Status


class SlowSteps(Rule):
    """Training steps whose median duration exceeds ``max_seconds``, per rank."""

    description = "Median training step duration above a limit, per rank."
    recommendation = "Profile a slow step (stepscope's profiling windows) to see where it goes."
    params = (
        Param("max_seconds", 1.0, "median step duration that fires the rule, seconds"),
        Param("skip_steps", 5, "first steps of each rank ignored", int),
    )

    def evaluate(self, data: RuleInput) -> RuleResult:
        steps = data.steps
        steps = steps[(steps["phase"] == "train") & (steps["step"] >= self.p_int("skip_steps"))]
        if not len(steps):
            return self.not_applicable(data, "no training steps yet")
        findings = []
        limit = self.p_float("max_seconds")
        for rank, group in steps.groupby("rank"):
            median = float(group["duration"].median())
            if median > limit:
                findings.append(
                    Finding(
                        f"rank {rank}: median step {median:.3f} s > {limit} s",
                        self.recommendation,
                        severity=min(1.0, median / limit / 4),
                        rank=int(rank),
                        value=median,
                        threshold=limit,
                        steps=(int(group["step"].min()), int(group["step"].max())),
                    )
                )
        status = Status.ISSUES_FOUND if findings else Status.NO_ISSUES_FOUND
        message = f"{len(findings)} slow rank(s)" if findings else "Steps are fast enough."
        return self.result(status, data, findings=findings, datapoints=len(steps), message=message)
