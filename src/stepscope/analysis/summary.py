"""The one-screen summary of a job (``stepscope show``), as plain data.

``show`` must answer at once: it reads only the columns it summarizes, with
pyarrow alone, and computes with numpy (no DuckDB, no pandas: importing them
took most of a second).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, TypedDict

import numpy as np

from stepscope.analysis._arrow import Columns
from stepscope.analysis._plain import read_rules
from stepscope.analysis._summary_parts import (
    SPLIT,
    NodeSummary,
    PhaseSummary,
    Quantiles,
    StepsSummary,
    SystemSummary,
    _num,
    steps_summary,
    system_summary,
)
from stepscope.analysis.device import DEVICE_COLUMNS
from stepscope.analysis.diagnosis import JobFacts, diagnose_verdicts, wall_seconds
from stepscope.analysis.diagnosis_incomplete import incomplete_reason
from stepscope.analysis.diagnosis_text import ChecksJson, EntryJson
from stepscope.jobfolder import JobJson, JsonObject

if TYPE_CHECKING:
    import numpy.typing as npt

    from stepscope.read import Job

__all__ = [
    "SPLIT",
    "JobSummary",
    "NodeSummary",
    "PhaseSummary",
    "Quantiles",
    "StepsSummary",
    "SystemSummary",
    "profiling_summary",
    "steps_summary",
    "summarize",
    "system_summary",
]

# `stepscope run` records the job's start around when it spawns the command (the process
# may start a little before it); a process older than this began before its job.
_SPAWN_SLACK_S = 1.0
_STEP_COLUMNS = ("rank", "phase", "start", "end", "duration", *SPLIT, *DEVICE_COLUMNS.values())


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
    incomplete: str | None
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
    """The job's profiling windows: kind, rank, steps and main artifact (docs/profiling.md),
    or the ``note`` saying why a window kept none (a memory window without CUDA),
    and ``kernels``: the kernel breakdown of a window with a PyTorch trace (its 10 top
    kernels; ``{"not_applicable": why}`` without device activity), None for others, and
    ``efficiency``: its operators against the card's peaks (``Job.window_efficiency``)."""
    keys = ("kind", "rank", "start_step", "end_step", "path", "request", "note")
    out: list[JsonObject] = []
    for r in job.profiling_artifacts():
        kernels, eff = job.window_kernels(r), job.window_efficiency(r)
        out.append(
            {
                **{k: r.get(k) for k in keys},
                "truncated": bool(r.get("truncated")),
                "kernels": None if kernels is None else kernels.to_json(),
                "efficiency": None if eff is None else eff.to_json(),
            }
        )
    return out


def summarize(job: Job) -> JobSummary:
    """Everything ``stepscope show`` prints (``--json`` prints exactly this)."""
    meta = job.meta
    steps = Columns(job.arrow("steps", _STEP_COLUMNS))
    now = time.time()
    init, final = _lifecycle(job, meta, steps)
    train = _first_rank_train(steps)
    step_seconds = float(np.nansum(steps.floats("duration")[train])) if train.any() else None
    facts = JobFacts(wall_seconds(meta, now), step_seconds, incomplete_reason(meta))
    diagnosis = diagnose_verdicts(read_rules(job), facts)
    return {
        "name": meta.get("name"),
        "path": job.path,
        "status": meta["status"],
        "alive": meta["alive"],
        "exit_code": meta.get("exit_code"),
        "reason": meta.get("reason"),
        "incomplete": facts.incomplete,
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
