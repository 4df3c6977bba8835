"""The records of the jobs list and of a job page's header, from a job's metadata.

:class:`~stepscope.dashboard._data.Source` reads the job (its rules, its steps) and
hands the values here; these only shape them (:class:`JobRow`, :class:`JobDetail`).
"""

from __future__ import annotations

from stepscope.dashboard._openapi import JobDetail, JobRow
from stepscope.errors import StepscopeError
from stepscope.jobfolder import JobJson, JsonObject, NodeInfo, RuleVerdict
from stepscope.read import Job

ISSUE = "IssuesFound"
TOP_KERNELS = 10
_WINDOW_KEYS = ("kind", "rank", "start_step", "end_step", "path")


def job_row(name: str, meta: JobJson, rules: list[RuleVerdict], now: float, steps: int) -> JobRow:
    """One row of the jobs list: ``now`` ends a running job's duration; ``steps`` are its
    first rank's training steps."""
    start, end = meta.get("start_time"), meta.get("end_time")
    return {
        "name": name,
        "status": meta.get("status"),
        "alive": meta.get("alive"),
        "reason": meta.get("reason"),
        "start_time": start,
        "end_time": end,
        "duration_s": ((end or now) - start) if start else None,
        "steps": steps,
        "rule_issues": sum(1 for r in rules if ISSUE in (r.get("status"), r.get("verdict"))),
        "rules": len(rules),
    }


def job_detail(name: str, job: Job, now: float, steps: int) -> JobDetail:
    """The job page's header: metadata, nodes, ranks, profiling artifacts."""
    meta = job.meta
    nodes: dict[str, NodeInfo] = {}
    for node in job.nodes():
        try:
            nodes[node] = job.node_info(node)
        except (OSError, ValueError, StepscopeError):
            nodes[node] = {"node": node}
    return {
        "name": name,
        "status": meta.get("status"),
        "alive": meta.get("alive"),
        "reason": meta.get("reason"),
        "exit_code": meta.get("exit_code"),
        "command": meta.get("command"),
        "hosts": meta.get("hosts"),
        "start_time": meta.get("start_time"),
        "end_time": meta.get("end_time"),
        "stepscope_version": meta.get("stepscope_version"),
        "now": now,
        "nodes": nodes,
        "ranks": job.ranks(),
        "steps": steps,
        "artifacts": job.profiling_artifacts(),
        "faults": job.faults(),
        "warnings": job.warnings,
    }


def kernel_windows(job: Job) -> list[JsonObject]:
    """The kernel panel: each window with a PyTorch trace, its host operators (the
    record's ``top``) beside its kernel breakdown (``Job.window_kernels``: by kind, the
    top kernels, each device's busy share and gaps; ``{"not_applicable": why}``
    without device activity)."""
    out: list[JsonObject] = []
    for record in job.profiling_artifacts():
        result = job.window_kernels(record, TOP_KERNELS)
        if result is None:  # a python, dataloader or TensorFlow window
            continue
        top = record.get("top")
        window: JsonObject = {k: record.get(k) for k in _WINDOW_KEYS}
        window["operators"] = top if isinstance(top, list) else []
        window["kernels"] = result.to_json()
        out.append(window)
    return out
