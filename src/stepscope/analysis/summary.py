"""The one-screen summary of a job (``stepscope show``), as plain data.

``show`` must answer at once: it reads only the columns it summarizes, with
pyarrow alone, and computes with numpy (no DuckDB, no pandas: importing them
took most of a second).
"""

from __future__ import annotations

import math
import time
from typing import TYPE_CHECKING, SupportsFloat, TypedDict

import numpy as np

from stepscope.analysis._arrow import Columns
from stepscope.analysis._plain import read_rules
from stepscope.analysis.diagnosis import JobFacts, diagnose_verdicts, wall_seconds
from stepscope.analysis.diagnosis_text import ChecksJson, EntryJson
from stepscope.analysis.downsample import FloatArray
from stepscope.analysis.host import others_cpu_values, per_core_columns
from stepscope.jobfolder import STEP_PARTS, JobJson, JsonObject

if TYPE_CHECKING:
    import numpy.typing as npt

    from stepscope.read import Job

SPLIT = (*STEP_PARTS, "other")
_ID_COLUMNS = ("time", "node", "interval_ms")
# `stepscope run` records the job's start around when it spawns the command (the process
# may start a little before it); a process older than this began before its job.
_SPAWN_SLACK_S = 1.0
_STEP_COLUMNS = ("rank", "phase", "start", "end", "duration", *SPLIT)


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


def _quantiles(values: FloatArray) -> Quantiles:
    values = values[~np.isnan(values)]
    if not len(values):
        return {"p50": None, "p95": None}
    p50, p95 = np.quantile(values, [0.5, 0.95])
    return {"p50": _num(p50), "p95": _num(p95)}


def _phase_summary(steps: Columns, rows: npt.NDArray[np.bool_]) -> PhaseSummary:
    total = float(np.nansum(steps.floats("duration")[rows])) or 1.0
    split: dict[str, float | None] = {}
    split_p50: dict[str, float | None] = {}
    for part in SPLIT:  # a part the job did not record is unknown, not zero
        values = steps.floats(part)[rows]
        # a part never measured (an imported job's optimizer) is None, not 0 %
        known = part in steps.names and not np.isnan(values).all()
        split[part] = _num(np.nansum(values) / total) if known else None
        split_p50[part] = _quantiles(values)["p50"] if known else None
    return {
        "count": int(rows.sum()),
        "duration": _quantiles(steps.floats("duration")[rows]),
        "split": split,
        "split_p50": split_p50,
    }


def steps_summary(steps: Columns) -> StepsSummary:
    """Counts per rank and phase; duration quantiles and split (rank 0) per phase."""
    phase, rank = steps.strings("phase"), steps.floats("rank")
    train = phase == "train"
    rank0 = float(np.nanmin(rank)) if steps.rows and not np.isnan(rank).all() else 0.0
    mine = rank == rank0
    ranks, counts = np.unique(rank[train & ~np.isnan(rank)], return_counts=True)
    phases = sorted({p for p in phase[mine] if isinstance(p, str)})
    return {
        "count": int((train & mine).sum()),
        "by_rank": {str(int(r)): int(n) for r, n in zip(ranks, counts, strict=True)},
        "phases": {ph: _phase_summary(steps, mine & (phase == ph)) for ph in phases},
    }


def _node_summary(system: Columns, rows: npt.NDArray[np.bool_]) -> NodeSummary:
    metrics = {}
    for name in system.names:
        if name not in _ID_COLUMNS:
            values = system.floats(name)[rows]
            if not np.isnan(values).all():
                metrics[name] = _quantiles(values)
    cores = per_core_columns(system.names)
    if cores and "cpu" in system.names and "proc_cpu" in system.names:
        cpu, job = system.floats("cpu")[rows], system.floats("proc_cpu")[rows]
        others = others_cpu_values(cpu, job, cores)
        if not np.isnan(others).all():
            metrics["others_cpu"] = _quantiles(others)
    times, intervals = system.floats("time")[rows], system.floats("interval_ms")[rows]
    last = intervals[np.argmax(times)] if len(times) else math.nan  # the newest sample's
    return {
        "samples": int(rows.sum()),
        "interval_ms": None if math.isnan(last) else int(last),
        "metrics": metrics,
    }


def system_summary(job: Job) -> SystemSummary:
    """Each node's samples and metric quantiles; the first node's count and interval."""
    system = Columns(job.arrow("system"))
    node = system.strings("node")
    nodes: dict[str, NodeSummary] = {
        str(n): _node_summary(system, node == n)
        for n in sorted({n for n in node if isinstance(n, str)})
    }
    first = next(iter(nodes.values()), None)
    if first is None:
        return {"samples": 0, "interval_ms": None, "nodes": nodes}
    return {"samples": first["samples"], "interval_ms": first["interval_ms"], "nodes": nodes}


def _first_rank_train(steps: Columns) -> npt.NDArray[np.bool_]:
    """The training steps of the lowest rank that has any."""
    train: npt.NDArray[np.bool_] = np.asarray(steps.strings("phase") == "train", dtype=bool)
    rank = steps.floats("rank")
    if not train.any():
        return train
    first: npt.NDArray[np.bool_] = train & (rank == np.nanmin(rank[train]))
    return first


def _lifecycle(job: Job, meta: JobJson, steps: Columns) -> tuple[float | None, float | None]:
    """Seconds of initialization and of finalization (None when not known).

    Initialization counts from the training process's start, unless the process began
    well before the job: a job started by ``stepscope.init()`` inside a process that had
    run for a while begins at that call, so its initialization never exceeds the job.
    """
    events = Columns(job.arrow("events", ["kind", "time"]))
    starts = events.floats("time")[events.strings("kind") == "process_start"]
    # An imported job's start and end are those of its data, not of its processes: unknown.
    imported = meta.get("status") == "Imported"
    begin = None if imported else _num(meta.get("start_time"))
    if len(starts) and not np.isnan(starts).all():
        process = float(np.nanmin(starts))
        if begin is None or process > begin - _SPAWN_SLACK_S:
            begin = process
    first = steps.floats("start")[_first_rank_train(steps)]
    init = float(np.min(first)) - begin if len(first) and begin else None
    end = None if imported else meta.get("end_time")
    ends = steps.floats("end")
    last = float(np.nanmax(ends)) if steps.rows and not np.isnan(ends).all() else None
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
    steps = Columns(job.arrow("steps", _STEP_COLUMNS))
    now = time.time()
    init, final = _lifecycle(job, meta, steps)
    train = _first_rank_train(steps)
    step_seconds = float(np.nansum(steps.floats("duration")[train])) if train.any() else None
    facts = JobFacts(wall_seconds(meta, now), step_seconds)
    diagnosis = diagnose_verdicts(read_rules(job), facts)
    return {
        "name": meta.get("name"),
        "path": job.path,
        "status": meta["status"],
        "alive": meta["alive"],
        "exit_code": meta.get("exit_code"),
        "reason": meta.get("reason"),
        "command": meta.get("command"),
        "hosts": meta.get("hosts"),
        "start_time": meta.get("start_time"),
        "end_time": meta.get("end_time"),
        "duration_seconds": _num(facts.wall_seconds),
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
