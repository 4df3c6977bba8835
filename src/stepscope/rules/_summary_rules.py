"""Informational rules: OverallSystemUsage and OverallFrameworkMetrics.

They never fire; their figures are in the result's ``details`` (per node) and
summarised in its message.
"""

from __future__ import annotations

import re

import numpy as np

from stepscope.jobfolder import STEP_PARTS, JsonObject
from stepscope.rules._input import RuleInput
from stepscope.rules._node_rule import NodeRule, Part
from stepscope.rules._types import Finding, Status

SUMMARY_METRICS = re.compile(
    r"^(cpu|cpu_iowait|mem_percent|proc_cpu|gpu\d+_(util|mem_util|power_w|temp_c))$"
)
QUANTILES = (0.5, 0.95, 0.99)
PERCENTS = [100 * x for x in QUANTILES]


class OverallSystemUsage(NodeRule):
    name = "OverallSystemUsage"
    description = "Percentiles of CPU, memory and GPU usage, per node."
    recommendation = "Informational: compare the usage with what the instance offers."

    def check(self, data: RuleInput) -> Part:
        system = data.system
        if not len(system):
            return Part(na_reason="no system samples")
        node = str(system["node"].iloc[0])
        stats = {}
        # One column at a time (the numbers of DataFrame.quantile and max): a matrix of
        # every column was a copy of a day of samples (about 80 MB).
        for c in (c for c in system.columns if SUMMARY_METRICS.match(str(c))):
            values = system[c].to_numpy(np.float64)
            nan = np.isnan(values)
            if nan.all():
                continue  # never measured: no figures
            q = (np.nanpercentile if nan.any() else np.percentile)(values, PERCENTS)
            stats[c] = {"p50": q[0], "p95": q[1], "p99": q[2], "max": np.nanmax(values)}
        return Part(datapoints=len(system), details={node: _clean(stats)})

    def summarize(
        self,
        status: Status,
        findings: list[Finding],
        triggers: int,
        datapoints: int,
        details: JsonObject,
    ) -> str:
        lines = []
        for node, stats in sorted(details.items()):
            if not isinstance(stats, dict):
                continue  # every part's details are {node: {metric: quantiles}}
            gpus = [s["p95"] for c, s in stats.items() if c.endswith("_util") and "mem" not in c]
            gpu = f", GPU p95 {np.mean(gpus):.0f}% (mean of {len(gpus)})" if gpus else ""
            cpu, mem = stats.get("cpu", {}).get("p95"), stats.get("mem_percent", {}).get("p95")
            lines.append(f"{node}: CPU p95 {_pct(cpu)}, memory p95 {_pct(mem)}{gpu}")
        return "; ".join(lines) or "No system samples."


class OverallFrameworkMetrics(NodeRule):
    name = "OverallFrameworkMetrics"
    description = "Where step time goes: data wait, forward, backward, optimizer, other."
    recommendation = "Informational: the largest share of step time is where to optimize first."

    def check(self, data: RuleInput) -> Part:
        steps = data.steps
        if not len(steps):
            return Part(na_reason="no steps recorded yet")
        details: JsonObject = {}
        for phase, group in steps.groupby("phase"):
            sums = {  # a part never measured (an imported job's optimizer) is left out: unknown
                p: float(group[p].sum())
                for p in (*STEP_PARTS, "other")
                if p in group and group[p].notna().any()
            }
            details[str(phase)] = {
                "steps": len(group),
                "duration": float(group["duration"].sum()),
                **sums,
            }
        node = str(steps["node"].iloc[0])
        return Part(datapoints=len(steps), details={node: details})

    def summarize(
        self,
        status: Status,
        findings: list[Finding],
        triggers: int,
        datapoints: int,
        details: JsonObject,
    ) -> str:
        totals: dict[str, dict[str, float]] = {}
        for per_phase in details.values():
            if not isinstance(per_phase, dict):
                continue  # every part's details are {node: {phase: sums}}
            for phase, sums in per_phase.items():
                acc = totals.setdefault(phase, {})
                for k, v in sums.items():
                    acc[k] = acc.get(k, 0.0) + float(v or 0.0)
        parts = []
        for phase, acc in sorted(totals.items(), reverse=True):
            total = acc.get("duration") or 0.0
            shares = ", ".join(
                f"{k} {acc[k] / total:.0%}" if k in acc else f"{k} unknown"
                for k in (*STEP_PARTS, "other")
                if total
            )
            parts.append(f"{phase}: {int(acc['steps'])} steps, {total:.1f} s ({shares})")
        return "; ".join(parts) or "No steps."


def _pct(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.0f}%"


def _clean(stats: dict[str, dict[str, float]]) -> dict[str, dict[str, float | None]]:
    return {
        c: {k: (None if v is None or np.isnan(v) else round(float(v), 3)) for k, v in s.items()}
        for c, s in stats.items()
    }
