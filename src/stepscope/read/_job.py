"""Reader API: ``stepscope.open(path)`` returns a :class:`Job` with DataFrames.

Reads exactly what docs/format.md describes, from any store (local folder,
``memory://``, ``s3://``), while the job runs or after it ended. Queries run
in DuckDB over the job's Parquet segments, with time-window and rank/node
selection pushed down. DuckDB, pandas and pyarrow are imported on first query, so
that listing jobs and reading their metadata costs none of them.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from stepscope.jobfolder import (
    FAULT_SPEC,
    NODE_SPEC,
    WINDOW_SPEC,
    JobJson,
    JsonObject,
    NodeInfo,
    as_json_object,
    as_node_info,
    heartbeats,
    is_job,
    liveness,
    paths,
    read_all,
    read_meta,
    record_problem,
    without_bad_keys,
)
from stepscope.read._streams import RowStreams
from stepscope.read._trace_frames import EfficiencyViews, KernelViews
from stepscope.read._trace_views import TraceMemo
from stepscope.store import Store, open_store

if TYPE_CHECKING:
    import duckdb
    import pandas as pd
    import pyarrow as pa

    from stepscope.read._segment_query import Views
    from stepscope.read._tensors import Tensors
    from stepscope.store import SegmentCheck


class Job(RowStreams, KernelViews, EfficiencyViews):
    """One job folder. Cheap to create; every accessor reads the folder anew."""

    def __init__(self, store: Store, now: Callable[[], float] = time.time) -> None:
        self.store = store
        self._now = now
        self.path = store.url
        # job.json as opened (no job.json, or a newer format: a clear error now)
        self._opened = read_meta(store)
        self._db: duckdb.DuckDBPyConnection | None = None
        self._check: SegmentCheck | None = None
        self._skipped: dict[str, str] = {}  # damaged JSON records: key -> why
        self._traces = TraceMemo()  # parsed PyTorch traces (read/_trace_views.py)

    def __repr__(self) -> str:
        return f"<Job {self.name!r} {self.status} at {self.path}>"

    # -- metadata -------------------------------------------------------------
    @property
    def meta(self) -> JobJson:
        """job.json, with ``status`` corrected for a launcher that died (and ``alive``)."""
        return liveness(read_meta(self.store), heartbeats(self.store), self._now())

    @property
    def name(self) -> str:
        return str(read_meta(self.store).get("name", ""))

    @property
    def status(self) -> str:
        return str(self.meta["status"])

    def nodes(self) -> list[str]:
        """Node ids that wrote system metrics or node facts."""
        names = {k.split("/")[1][: -len(".json")] for k in self.store.list(paths.NODES, paths.JSON)}
        return sorted(names | set(self.store.listdir(paths.SYSTEM)))

    def node_info(self, node: str) -> NodeInfo:
        """``nodes/<node>.json``: the node's cores, memory, GPUs and clock offset."""
        key = paths.node_key(node)
        body = as_json_object(self.store.read_json(key), f"{self.path}/{key}")
        clean, problem = without_bad_keys(body, NODE_SPEC)
        if problem is not None:  # the facts of the right types are still worth showing
            self.note_skipped(key, f"{problem} (left out)")
        return as_node_info(clean, key)

    def ranks(self) -> list[int]:
        dirs = self.store.listdir(paths.STEPS) + self.store.listdir(paths.EVENTS)
        return sorted({r for r in map(paths.rank_of, dirs) if r is not None})

    @property
    def tensors(self) -> Tensors:
        """The output tensors of rank 0 (a :class:`stepscope.read._tensors.Tensors`;
        ``job.tensors.rank(r)`` for another rank). See docs/tensors.md."""
        from stepscope.read._tensors import Tensors

        return Tensors(self.store, check=self.segment_check, skipped=self._skipped)

    def faults(self) -> list[JsonObject]:
        """Faults recorded at the fault boundaries of the agent, the sampler, the rule
        runner and the launcher, with those the launcher could only put in ``job.json``
        (a full disk). Damaged records are skipped and named in ``warnings``."""
        kept: object = read_meta(self.store).get("faults")
        extra: list[JsonObject] = []
        if isinstance(kept, list):  # job.json is typed, not validated: narrow each
            extra = [dict(f) for f in kept if isinstance(f, dict)]
        faults = read_all(self.store, paths.FAULTS, skipped=self._skipped, problem=_fault_problem)
        return [*faults, *extra]

    def profiling_artifacts(self) -> list[JsonObject]:
        """Every finished profiling window of every rank, oldest first (docs/profiling.md).

        Each is the window's record ``profiling/rank-<r>/<base>.window.json``: ``kind``
        (detailed, python, dataloader, deep), ``rank``, ``start_step``, ``end_step``
        (inclusive), ``start_time``, ``end_time``, ``path`` (the main artifact, relative
        to the job folder), ``files`` (all of them), ``window`` (the settings),
        ``request`` (the control request, for live windows), and ``truncated``.
        """
        out = read_all(
            self.store, paths.PROFILING, paths.WINDOW_JSON, self._skipped, _window_problem
        )
        return sorted(out, key=_window_order)

    @property
    def warnings(self) -> list[str]:
        """What readers skip as damaged, one line each naming the file: segments that
        cannot be read or hold out-of-range values, damaged records (docs/format.md,
        "Damaged job folders"). Checks every local segment (each once); on object
        stores, what the reads so far found."""
        if self.store.is_local:
            for prefix in ("steps", "events", "system", "others", "tensors"):
                self.segment_check.readable(self.store, self.store.list(prefix, ".parquet"))
        records = [f"skipped {k}: {why}" for k, why in sorted(self._skipped.items())]
        return self.segment_check.warnings() + records

    def note_skipped(self, key: str, why: str) -> None:
        """Record that the file ``key`` was skipped as damaged (it joins ``warnings``)."""
        self._skipped[key] = why

    # -- row streams (the query methods: RowStreams, read/_streams.py) ---------
    @property
    def _con(self) -> duckdb.DuckDBPyConnection:
        """The job's DuckDB connection, opened by the first query."""
        if self._db is None:
            import duckdb

            self._db = duckdb.connect()
        return self._db

    def arrow(
        self,
        prefix: str,
        columns: Sequence[str] | None = None,
        on_skip: Callable[[str, str], None] | None = None,
    ) -> pa.Table:
        """The segments under ``prefix`` (``steps/rank-0``, ``system``...) as one Arrow
        table, union by column name; only ``columns`` when given (those a segment lacks
        are left out). No DuckDB nor pandas: for answers that need a few columns. A
        segment that cannot be read is left out and given to ``on_skip`` (key, why)."""
        from stepscope.read._segment_query import read_stream

        def skipped(key: str, why: str) -> None:
            self.note_skipped(key, why)
            if on_skip is not None:
                on_skip(key, why)

        return read_stream(self.store, prefix, columns, skipped)

    @property
    def segment_check(self) -> SegmentCheck:
        """Each segment is checked once; damaged ones are skipped and named in warnings."""
        if self._check is None:
            from stepscope.store import SegmentCheck

            self._check = SegmentCheck()
        return self._check

    def _run_query(self, sql: str, params: Sequence[object], views: Views) -> pd.DataFrame:
        from stepscope.read._segment_query import run_query

        return run_query(self._con, self.store, self.segment_check, sql, params, views)


def _fault_problem(record: JsonObject) -> str | None:
    return record_problem(record, FAULT_SPEC)


def _window_problem(record: JsonObject) -> str | None:
    return record_problem(record, WINDOW_SPEC, ("kind",))


def _window_order(record: JsonObject) -> tuple[float, int]:
    """A window record's place: by start time (none first), then rank."""
    start, rank = record.get("start_time"), record.get("rank", 0)
    return (
        start if isinstance(start, int | float) and start else 0.0,
        rank if isinstance(rank, int) else 0,
    )


def open(path: str | os.PathLike[str]) -> Job:
    """Open the job folder at ``path`` (a local path or a URL such as ``s3://b/runs/job``)."""
    return Job(open_store(path))


def list_jobs(out: str | os.PathLike[str]) -> list[Job]:
    """Every job directly under the output folder ``out``, oldest first."""
    store = open_store(out)
    started: list[tuple[float, Job]] = []
    for name in store.listdir():
        if is_job(store, name):
            job = Job(store.sub(name))
            started.append((float(job._opened.get("start_time", 0)), job))
    return [job for _, job in sorted(started, key=lambda s: s[0])]
