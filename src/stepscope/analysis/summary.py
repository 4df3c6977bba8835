"""The one-screen summary of a job (``stepscope show``), as plain data."""

from __future__ import annotations

import math
from typing import SupportsFloat, TypedDict

import pandas as pd

from stepscope.analysis.diagnosis import diagnose_verdicts, job_facts
from stepscope.analysis.diagnosis_text import ChecksJson, EntryJson
from stepscope.analysis.host import others_cpu
from stepscope.analysis.report_data import read_rules
from stepscope.jobfolder import STEP_PARTS, JobJson, JsonObject
from stepscope.read import Job

SPLIT = (*STEP_PARTS, "other")
_ID_COLUMNS = ("time", "node", "interval_ms")


class Quantiles(TypedDict):
    """The median and 95th percentile of a series (None without values)."""

    p50: float | None
    p95: float | None


class PhaseSummary(TypedDict):
    """The steps of one phase of rank 0: how many, how long, where the time went."""

    count: int
    duration: Quantiles
    split: dict[str, float | None]
    split_p50: dict[str, float | None]


class StepsSummary(TypedDict):
    """Training steps of rank 0, steps per rank, and each phase of rank 0."""

    count: int
    by_rank: dict[str, int]
    phases: dict[str, PhaseSummary]


class NodeSummary(TypedDict):
    """One node's system samples: how many, how often, each metric's quantiles."""

    samples: int
    interval_ms: int | None
    metrics: dict[str, Quantiles]


class SystemSummary(TypedDict):
    """The first node's sample count and interval, and every node's summary."""

    samples: int
    interval_ms: int | None
    nodes: dict[str, NodeSummary]


class JobSummary(TypedDict):
    """What ``stepscope show`` prints (``--json`` prints exactly this).

    ``diagnosis`` ranks the problems of the job's verdicts (``rules/*.json``) by
    the time they cost; ``diagnosis_checks`` says what was and was not checked;
    ``warnings`` names the damaged files that were skipped (docs/format.md).
    """

    name: str | None
    path: str
    status: str
    alive: bool
    exit_code: int | None
    reason: str | None
    command: list[str] | None
    hosts: list[str] | None
    start_time: float | None
    end_time: float | None
    duration_seconds: float | None
    init_seconds: float | None
    finalization_seconds: float | None
    steps: StepsSummary
    system: SystemSummary
    faults: list[JsonObject]
    profiling: list[JsonObject]
    diagnosis: list[EntryJson]
    diagnosis_checks: ChecksJson
    warnings: list[str]


def _num(x: SupportsFloat | None) -> float | None:
    """A JSON-safe float (NaN, infinities and missing become None)."""
    if x is None:
        return None
    f = float(x)
    return round(f, 6) if math.isfinite(f) else None


def _quantiles(s: pd.Series) -> Quantiles:
    s = s.dropna()
    if s.empty:
        return {"p50": None, "p95": None}
    return {"p50": _num(s.quantile(0.5)), "p95": _num(s.quantile(0.95))}


def _phase_summary(steps: pd.DataFrame) -> PhaseSummary:
    total = float(steps["duration"].sum()) or 1.0
    return {
        "count": len(steps),
        "duration": _quantiles(steps["duration"]),
        "split": {p: _num(steps[p].sum() / total) for p in SPLIT},
        "split_p50": {p: _quantiles(steps[p])["p50"] for p in SPLIT},
    }


def steps_summary(steps: pd.DataFrame) -> StepsSummary:
    """Counts per rank and phase; duration quantiles and split (rank 0) per phase."""
    train = steps[steps["phase"] == "train"]
    rank0 = int(steps["rank"].min()) if len(steps) else 0
    mine = steps[steps["rank"] == rank0]
    by_rank = train.groupby("rank").size() if len(train) else pd.Series(dtype=int)
    return {
        "count": int((train["rank"] == rank0).sum()),
        "by_rank": {str(int(r)): int(n) for r, n in by_rank.items()},
        "phases": {ph: _phase_summary(g) for ph, g in mine.groupby("phase")},
    }


def system_summary(job: Job) -> SystemSummary:
    """Each node's samples and metric quantiles; the first node's count and interval."""
    wide = job.system()
    nodes: dict[str, NodeSummary] = {}
    for node, rows in wide.groupby("node", sort=True):
        metrics = [c for c in rows.columns if c not in _ID_COLUMNS and rows[c].notna().any()]
        quantiles = {m: _quantiles(rows[m]) for m in metrics}
        others = others_cpu(rows)
        if others is not None:
            quantiles["others_cpu"] = _quantiles(others)
        nodes[str(node)] = {
            "samples": len(rows),
            "interval_ms": int(rows["interval_ms"].iloc[-1]),
            "metrics": quantiles,
        }
    first = next(iter(nodes.values()), None)
    if first is None:
        return {"samples": 0, "interval_ms": None, "nodes": nodes}
    return {"samples": first["samples"], "interval_ms": first["interval_ms"], "nodes": nodes}


def _lifecycle(job: Job, meta: JobJson, steps: pd.DataFrame) -> tuple[float | None, float | None]:
    """Seconds of initialization and of finalization (None when not known)."""
    train = steps[steps["phase"] == "train"]
    rank0 = train[train["rank"] == train["rank"].min()] if len(train) else train
    starts = job.events(kinds=["process_start"])
    t0 = float(starts["time"].min()) if len(starts) else meta.get("start_time")
    init = float(rank0["start"].min()) - t0 if len(rank0) and t0 else None
    end = meta.get("end_time")
    last = float(steps["end"].max()) if len(steps) else None
    final = end - last if end is not None and last is not None else None
    return _num(init), _num(final)


def profiling_summary(job: Job) -> list[JsonObject]:
    """The job's profiling windows: kind, rank, steps and main artifact (docs/profiling.md)."""
    keys = ("kind", "rank", "start_step", "end_step", "path", "request")
    return [
        {**{k: r.get(k) for k in keys}, "truncated": bool(r.get("truncated"))}
        for r in job.profiling_artifacts()
    ]


def summarize(job: Job) -> JobSummary:
    """Everything ``stepscope show`` prints (``--json`` prints exactly this)."""
    meta = job.meta
    steps = job.steps()
    start, end = meta.get("start_time"), meta.get("end_time")
    now = pd.Timestamp.now().timestamp()
    duration = None if start is None else (end if end is not None else now) - start
    init, final = _lifecycle(job, meta, steps)
    diagnosis = diagnose_verdicts(read_rules(job), job_facts(meta, steps, now))
    return {
        "name": meta.get("name"),
        "path": job.path,
        "status": meta["status"],
        "alive": meta["alive"],
        "exit_code": meta.get("exit_code"),
        "reason": meta.get("reason"),
        "command": meta.get("command"),
        "hosts": meta.get("hosts"),
        "start_time": start,
        "end_time": end,
        "duration_seconds": _num(duration),
        "init_seconds": init,
        "finalization_seconds": final,
        "steps": steps_summary(steps),
        "system": system_summary(job),
        "faults": job.faults(),
        "profiling": profiling_summary(job),
        "diagnosis": diagnosis.to_list(),
        "diagnosis_checks": diagnosis.checks(),
        "warnings": job.warnings,  # last: the damage the reads above ran into
    }
