"""What the API answers, read straight from the job folders under one root.

:class:`Source` holds one :class:`~stepscope.read.Job` per job (its metadata
methods read the folder anew on every call) and the caches of :mod:`._cache`.
Local jobs' row streams come from :class:`._streams.Streams`, one part per
segment; jobs on object stores are read through the Job's DuckDB queries
(serialised per job) as one part, cached for one second. Chart answers are
cached by the data's signature, so a finished job is computed once and a
running one once per flush, from the cached summaries of its old segments.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Hashable

import numpy as np
import pandas as pd
import pyarrow as pa

from stepscope.analysis.diagnosis import JobFacts, wall_seconds
from stepscope.analysis.diagnosis_incomplete import incomplete_reason
from stepscope.analysis.outliers import Definition
from stepscope.analysis.profiled import KINDS as PROFILING_EVENTS
from stepscope.analysis.profiled import Spans, profiling_spans
from stepscope.analysis.report_data import rank_rules, read_rules
from stepscope.dashboard._answers import node_answer, steps_answer
from stepscope.dashboard._cache import Answers, Sized
from stepscope.dashboard._job_pages import ISSUE, job_detail, job_row, kernel_windows
from stepscope.dashboard._json import clean, encode
from stepscope.dashboard._openapi import JobDetail, JobRow
from stepscope.dashboard._paths import JOB_NAME, Boundary
from stepscope.dashboard._streams import Part, Streams, signature
from stepscope.errors import StepscopeError
from stepscope.jobfolder import RuleVerdict
from stepscope.read import Job
from stepscope.store import Store

__all__ = [
    "DEFAULT_BUCKETS",
    "ISSUE",
    "LIVE_CHECK_S",
    "MAX_BUCKETS",
    "Source",
    "Stream",
    "clean",
    "encode",
]

DEFAULT_BUCKETS = 1000
MAX_BUCKETS = 4000
LIVE_CHECK_S = 0.25

#: A stream's parts and what identifies their content (a signature, or a time slot).
Stream = tuple[Hashable, tuple[Part, ...]]


class Source:
    """The job folders under ``root``, as plain data for the API.

    Only jobs inside ``root`` are served (:class:`._paths.Boundary`; ``follow_links``
    serves those that lead elsewhere too).
    """

    def __init__(
        self, root: Store, now: Callable[[], float] = time.time, follow_links: bool = False
    ) -> None:
        self.root, self._now = root, now
        self.boundary = Boundary(root, follow_links)
        self.streams, self.answers, self.summaries = Streams(), Answers(), Sized()
        self._jobs: dict[str, Job] = {}
        self._locks: dict[str, threading.Lock] = {}
        self._lock = threading.Lock()

    def job(self, name: str) -> Job:
        """The Job named ``name`` (NotServed when there is none)."""
        store = self.boundary.job_store(name)
        with self._lock:
            if name not in self._jobs:
                self._jobs[name] = Job(store, now=self._now)
                self._locks[name] = threading.Lock()
            return self._jobs[name]

    def names(self) -> list[str]:
        return self.boundary.names()

    # -- row streams ---------------------------------------------------------------
    def _stream(self, job: Job, prefix: str, sort: str, read: Callable[[], pd.DataFrame]) -> Stream:
        """(signature, parts) of a stream: by segment on local disks, else one part per second.

        A running job's files are listed at most every :data:`LIVE_CHECK_S` (its
        writers flush every 2 s); a finished job's again only when its status or
        end time, or the stream's folder, changed: its helpers (the system sampler)
        flush after the job's end is recorded, and a listing taken while it ran
        must not stand for the finished job.
        """
        if job.store.is_local:
            meta = job.meta
            status = meta.get("status")
            age = LIVE_CHECK_S if status == "Running" else math.inf
            state = (status, meta.get("end_time"))
            return self.streams.parts(job.store, prefix, sort, max_age=age, state=state)
        key = ("remote", job.path, prefix, int(self._now()))
        lock = self._locks[job.name]

        def locked() -> Stream:
            with lock:
                frame = read()
            part = Part(None, pa.Table.from_pandas(frame, preserve_index=False), sort)
            return key, (part,) if len(part) else ()

        return self.answers.get(key, locked)

    def system_parts(self, job: Job, node: str) -> Stream:
        return self._stream(job, f"system/{node}", "time", lambda: job.system(nodes=[node]))

    def steps_parts(self, job: Job, rank: int) -> Stream:
        return self._stream(job, f"steps/rank-{rank}", "start", lambda: job.steps(ranks=[rank]))

    def profiling_spans(self, job: Job, rank: int) -> Spans:
        """What a rank's windows could have slowed (analysis.profiled), cached by its
        events' signature: the outlier marks leave out only those steps."""
        prefix = f"events/rank-{rank}"
        sig = signature(job.store, prefix) if job.store.is_local else int(self._now())

        def read() -> Spans:
            with self._locks[job.name]:  # the job's DuckDB connection, one thread at a time
                return profiling_spans(job.events(kinds=PROFILING_EVENTS, ranks=[rank]))

        return self.answers.get(("spans", job.name, rank, sig), read)

    # -- answers -----------------------------------------------------------------------
    def jobs(self) -> list[JobRow]:
        """One row per job for the jobs list, oldest first."""
        rows: list[JobRow] = []
        for name in self.names():
            try:
                rows.append(self.job_row(name))
            except (OSError, ValueError, LookupError, StepscopeError):
                continue  # a job that cannot be read (its page says why)
        return sorted(rows, key=lambda r: r.get("start_time") or 0.0)

    def job_row(self, name: str) -> JobRow:
        job = self.job(name)
        meta = job.meta
        rules = self.rules(name)
        return job_row(name, meta, rules, self._now(), self._train_steps(job))

    def _train_parts(self, job: Job) -> list[Part]:
        """The training steps of the job's first rank, one part per segment."""
        ranks = job.ranks()
        return (
            [p.only("phase", "train") for p in self.steps_parts(job, ranks[0])[1]] if ranks else []
        )

    def _train_steps(self, job: Job) -> int:
        return sum(len(p) for p in self._train_parts(job))

    def facts(self, name: str) -> JobFacts:
        """What the diagnosis needs: the job's wall time, its first rank's step time, and
        why its data is incomplete (None: whole)."""
        job = self.job(name)
        parts = self._train_parts(job)
        steps = float(sum(np.nansum(p.column("duration")) for p in parts)) if parts else None
        return JobFacts(wall_seconds(job.meta, self._now()), steps, incomplete_reason(job.meta))

    def detail(self, name: str) -> JobDetail:
        """The job page's header: metadata, nodes, ranks, profiling artifacts."""
        job = self.job(name)
        return job_detail(name, job, self._now(), self._train_steps(job))

    def kernels(self, name: str) -> bytes:
        """The kernel panel's windows, as JSON; cached by the window records' signature
        (a trace's breakdown is itself kept beside it: read/_kernel_cache.py)."""
        job = self.job(name)
        local = job.store.is_local
        sig = signature(job.store, "profiling", ".window.json") if local else int(self._now())
        return self.answers.get(
            ("kernels", name, sig), lambda: encode({"windows": kernel_windows(job)})
        )

    def rules(self, name: str) -> list[RuleVerdict]:
        """Rule statuses, most severe first (``rules/*.json``), cached by file signature."""
        job = self.job(name)
        sig = signature(job.store, "rules", ".json") if job.store.is_local else int(self._now())
        return self.answers.get(("rules", name, sig), lambda: rank_rules(read_rules(job)))

    def system(
        self, name: str, node: str, start: float | None, end: float | None, buckets: int
    ) -> bytes:
        """Chart specs of one node's samples in ``[start, end)``, as JSON."""
        job = self.job(name)
        if not JOB_NAME.match(node) or not job.store.isdir(f"system/{node}"):
            nodes = ", ".join(job.nodes()) or "none yet"
            raise LookupError(f"job {name!r} has no node {node!r}; its node(s): {nodes}")
        sig, parts = self.system_parts(job, node)
        t0 = float(job.meta.get("start_time") or 0.0)
        key = ("system", name, node, sig, start, end, buckets)
        return self.answers.get(
            key,
            lambda: encode(
                node_answer(job, node, parts, (t0, start, end), buckets, self.summaries)
            ),
        )

    def steps(self, name: str, rank: int, phase: str, start: float | None, end: float | None,
              buckets: int) -> bytes:  # fmt: skip
        """Chart specs of one rank's steps of ``phase`` that began in ``[start, end)``, as JSON."""
        job = self.job(name)
        sig, parts = self.steps_parts(job, rank)
        t0 = float(job.meta.get("start_time") or 0.0)

        definition = Definition.of_job(self.rules(name))  # the job's StepOutlier parameters
        spans = self.profiling_spans(job, rank)

        def compute() -> bytes:
            window = (t0, start, end)
            answer = steps_answer(
                parts, rank, phase, window, buckets, self.summaries, definition, spans
            )
            return encode(answer)

        key = ("steps", name, rank, phase, sig, start, end, buckets, definition, spans)
        return self.answers.get(key, compute)
