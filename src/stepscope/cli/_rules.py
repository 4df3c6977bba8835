"""``stepscope rules JOB [--json] [--save] [--rule NAME ...] [--param NAME.key=value ...]``.

Evaluates the job's rules now and prints their results; ``--save`` also records
them as the job's verdicts (``rules/<Rule>.json``, as the live runner's final
evaluation writes them), so ``show``, the report and the dashboard open with
them. A running job's verdicts belong to its live runner: ``--save`` refuses.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace

from stepscope.config import suggest
from stepscope.errors import UsageError
from stepscope.read import Job
from stepscope.read import open as open_job
from stepscope.rules import (
    BUILTIN,
    RuleConfigError,
    RuleResult,
    RuleSpec,
    Status,
    evaluate_rules,
    job_rules,
)

ORDER = ("IssuesFound", "Error", "InProgress", "NoIssuesFound", "NotApplicable")
FINDINGS_SHOWN = 5


def parse_params(params: Sequence[str]) -> dict[str, dict[str, str]]:
    """``["StepOutlier.stddev=3"]`` -> ``{"StepOutlier": {"stddev": "3"}}``."""
    out: dict[str, dict[str, str]] = {}
    for item in params:
        name, dot, rest = item.partition(".")
        key, eq, value = rest.partition("=")
        if not (dot and eq and name and key):
            raise RuleConfigError(
                f"Bad --param {item!r}: expected NAME.key=value, e.g. StepOutlier.stddev=3."
            )
        out.setdefault(name, {})[key.strip()] = value.strip()
    return out


def select(specs: list[RuleSpec], names: Sequence[str]) -> list[RuleSpec]:
    """The rules named ``names`` (a built-in not in the job's set runs with defaults)."""
    if not names:
        return specs
    by_name = {s.rule.rule_name: s for s in specs}
    out = []
    for name in names:
        if name in by_name:
            out.append(by_name[name])
        elif name in BUILTIN:
            out.append(RuleSpec(BUILTIN[name]()))
        else:
            valid = sorted(set(by_name) | set(BUILTIN))
            close = suggest(name, valid)
            hint = f" Did you mean {close!r}?" if close else ""
            raise RuleConfigError(f"Unknown rule {name!r}.{hint} Valid rules: {', '.join(valid)}.")
    return out


def rank(results: Sequence[RuleResult]) -> list[RuleResult]:
    """Most severe first: by (provisional) status, worst finding, triggers, name."""

    def key(r: RuleResult) -> tuple[int, float, int, str]:
        status = (r.verdict or r.status).value
        return ORDER.index(status), -r.max_severity, -r.triggers, r.rule

    return sorted(results, key=key)


def _status_text(r: RuleResult) -> str:
    return f"{r.status.value} ({r.verdict.value})" if r.verdict else r.status.value


def render_table(results: Sequence[RuleResult]) -> str:
    """A readable table, most severe first, with the worst findings of firing rules."""
    rows = [
        (r.rule, _status_text(r), str(r.triggers), str(r.datapoints), r.message) for r in results
    ]
    head = ("Rule", "Status", "Triggers", "Datapoints", "Message")
    widths = [max(len(x[i]) for x in [head, *rows]) for i in range(4)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(head[:4], widths, strict=True)) + "  " + head[4]]
    for row in rows:
        cells = [c.ljust(w) for c, w in zip(row[:4], widths, strict=True)]
        lines.append("  ".join(cells) + "  " + row[4])
    for r in results:
        if (r.verdict or r.status) is Status.ISSUES_FOUND and r.findings:
            lines += ["", f"{r.rule}: {r.recommendation}"]
            lines += [f"  [{f.severity:.2f}] {f.message}" for f in r.findings[:FINDINGS_SHOWN]]
            if len(r.findings) > FINDINGS_SHOWN:
                lines.append(f"  ... and {len(r.findings) - FINDINGS_SHOWN} more")
    return "\n".join(lines)


def rules_results(job: Job, rule_names: Sequence[str], params: Sequence[str]) -> list[RuleResult]:
    """Evaluate the job's rules (or ``rule_names``) now, with ``params`` overrides."""
    overrides = parse_params(params)
    specs = select(job_rules(job), rule_names)
    named = {s.rule.rule_name for s in specs}
    specs = [_with(s, overrides.pop(s.rule.rule_name, None)) for s in specs]
    if overrides:
        raise RuleConfigError(
            f"--param for rule {next(iter(overrides))!r}, which is not evaluated. "
            f"Rules: {', '.join(sorted(named))}."
        )
    results = evaluate_rules(job, [s.rule for s in specs], time.time())
    if job.meta.get("status") == "Running":
        results = [replace(r, status=Status.IN_PROGRESS, verdict=r.status) for r in results]
    return rank(results)


def _with(spec: RuleSpec, given: Mapping[str, object] | None) -> RuleSpec:
    if not given:
        return spec
    rule = spec.rule
    return RuleSpec(
        type(rule)(name=rule.rule_name, **{**rule.parameters, **given}), spec.actions, spec.notify
    )


def rules_text(
    job_path: str, rule_names: list[str], params: list[str], as_json: bool, save: bool = False
) -> str:
    """The output of ``stepscope rules``; bad input raises a ``StepscopeError``."""
    job = open_job(job_path)
    if save and job.meta.get("status") == "Running":
        raise UsageError(
            f"{job_path!r} is running: its live rule runner writes its verdicts (rules/), "
            "and writes the final ones when it ends. Run 'stepscope rules JOB --save' "
            "after the job has ended, or leave out --save to see the verdicts now."
        )
    results = rules_results(job, rule_names, params)
    saved = []
    if save:
        from stepscope.rules.runner import write_results

        write_results(job.store, results)
        saved = [f"saved {len(results)} verdict(s) to {job_path.rstrip('/')}/rules/"]
    # Damaged files the rules skipped: on stderr with --json (stdout stays one document).
    for w in job.warnings if as_json else ():
        print(f"stepscope: warning: {w}", file=sys.stderr)
    if as_json:
        for line in saved:
            print(f"stepscope: {line}", file=sys.stderr)
        return json.dumps([r.to_dict() for r in results], indent=1)
    lines = [render_table(results), *(f"WARNING  {w}" for w in job.warnings)]
    return "\n".join(lines + saved)
