"""``stepscope ls [OUT] [--json]``: the jobs of an output folder, at once.

The folder is OUT (or ``-o``), else ``$STEPSCOPE_OUTPUT``, else ``./stepscope-runs``
(:func:`stepscope.cli._jobs.output_folder`, where the other commands look a job name
up); the text starts with the line "Jobs in FOLDER".

It reads each job's ``job.json`` and heartbeats, and of its steps only the
``phase`` column of rank 0's segments (pyarrow alone: no DuckDB, no pandas), so
that listing a folder of jobs answers in a fraction of a second. A job whose
``job.json`` cannot be read is listed as ``Damaged`` with the reason, after the
others, and so is a folder of job records without a ``job.json``; it never stops
the listing.
"""

from __future__ import annotations

import json
import sys
import time
from typing import TYPE_CHECKING, TypedDict

from stepscope.errors import JobFolderError, UsageError

if TYPE_CHECKING:
    from stepscope.jobfolder import JobJson
    from stepscope.read import Job
    from stepscope.store import Store

#: The status of a job whose job.json cannot be read (``problem`` says why).
DAMAGED = "Damaged"


class LsRow(TypedDict):
    """One job of ``stepscope ls`` (``--json`` prints a list of these)."""

    name: str
    path: str
    status: str
    start_time: float | None
    duration_seconds: float
    steps: int
    incomplete: str | None  # why the job's data is incomplete (a rank ended abruptly)
    problem: str | None


def train_steps(job: Job) -> int:
    """Training steps of rank 0 (the count ``show`` prints), from the phase column only."""
    from stepscope.jobfolder import paths

    phases = job.arrow(paths.steps_stream(0), ["phase"])
    if "phase" not in phases.column_names:
        return 0
    return sum(1 for p in phases.column("phase").to_pylist() if p == "train")


def ls_rows(output: str) -> list[LsRow]:
    """One row per job under ``output``, oldest first; a clear error when ``output``
    is not an output folder (missing, a file, or a job folder itself)."""
    from stepscope.jobfolder import is_job, missing_job_json
    from stepscope.store import open_store

    store = open_store(output)
    if is_job(store):
        raise UsageError(
            f"{output!r} is a job folder, not an output folder: "
            f"`stepscope show {output}` summarizes it; `stepscope ls` takes the folder "
            "that holds the jobs (stepscope run -o FOLDER)."
        )
    if store.is_local and not store.isdir():
        raise UsageError(
            f"no folder {output!r}: give the output folder of your jobs "
            "(stepscope run -o FOLDER, default ./stepscope-runs), or run one first."
        )
    rows = [
        _row(store, name)
        for name in store.listdir()
        if is_job(store, name) or missing_job_json(store.sub(name)) is not None
    ]
    # oldest first; the damaged ones (no start time to trust) after the others
    return sorted(rows, key=lambda r: (r["problem"] is not None, r["start_time"] or 0.0))


def _row(store: Store, name: str) -> LsRow:
    """The row of the job ``name`` of ``store``; a Damaged one when it cannot be read."""
    from stepscope.jobfolder import job_seconds
    from stepscope.read import Job

    try:
        job = Job(store.sub(name))
        meta = job.meta
        return {
            "name": meta["name"],
            "path": job.path,
            "status": meta["status"],
            "start_time": meta.get("start_time"),
            "duration_seconds": job_seconds(meta, time.time()) or 0.0,
            "steps": train_steps(job),
            "incomplete": _incomplete(meta),
            "problem": None,
        }
    except (JobFolderError, OSError) as exc:  # a store error is an OSError too
        return {
            "name": name,
            "path": store.sub(name).url,
            "status": DAMAGED,
            "start_time": None,
            "duration_seconds": 0.0,
            "steps": 0,
            "incomplete": None,
            "problem": str(exc),
        }


def ls_text(output: str, why: str, as_json: bool) -> str:
    """The output of ``stepscope ls``: where the folder is (``why`` it is that one: "" when
    given), then the table; a folder without jobs says so on stderr."""
    from stepscope.cli._jobs import shown
    from stepscope.cli._text import render_ls

    rows = ls_rows(output)
    if not rows:
        print(
            f"stepscope: no jobs in {output!r}: an output folder holds one folder per job "
            "(each with a job.json), as written by `stepscope run -o FOLDER`.",
            file=sys.stderr,
        )
    if as_json:
        return json.dumps(rows, indent=1)
    return f"Jobs in {shown(output)}{f' ({why})' if why else ''}\n{render_ls(rows)}"


def _incomplete(meta: JobJson) -> str | None:
    """Why the job's data is incomplete (job.json's ``incomplete``), or None."""
    return (meta.get("incomplete_reason") or "incomplete") if meta.get("incomplete") else None
