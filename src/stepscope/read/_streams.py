"""The row streams of a job as DataFrames: :class:`RowStreams`, the query methods of
:class:`stepscope.read.Job` (``steps``, ``events``, ``system``, ``others``, ``sql``).

Each builds its WHERE clause (time window, rank/node selection, pushed down to
DuckDB) and leaves running it to the job's ``_run_query``. DuckDB, pandas and
pyarrow are imported on first query, as in :mod:`stepscope.read._job`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd
    import pyarrow as pa

    from stepscope.read._segment_query import Param, Views


class RowStreams:
    """The query methods of a job's row streams; the job runs the SQL (``_run_query``)."""

    def _run_query(self, sql: str, params: Sequence[object], views: Views) -> pd.DataFrame:
        raise NotImplementedError  # Job runs it over its store and connection

    def _query(
        self, prefix: str, schema: pa.Schema, where: str, params: list[Param], order: str
    ) -> pd.DataFrame:
        view = prefix.replace("/", "_")
        sql = f"SELECT * FROM {view} WHERE {where} ORDER BY {order}"
        return self._run_query(sql, params, [(view, prefix, schema)])

    def sql(self, query: str, params: Sequence[object] = ()) -> pd.DataFrame:
        """Run SQL over the views ``steps``, ``events``, ``system`` and ``others`` of this job."""
        return self._run_query(query, list(params), _views())

    def steps(
        self,
        phase: str | None = None,
        ranks: Sequence[int] | None = None,
        nodes: Sequence[str] | None = None,
        start: float | None = None,
        end: float | None = None,
    ) -> pd.DataFrame:
        """One row per step (columns of docs/format.md), ordered by rank, phase, step.

        ``start``/``end`` select steps that began in ``[start, end)`` (unix seconds).
        """
        from stepscope.jobfolder import STEPS_SCHEMA
        from stepscope.read._segment_query import where_clause

        phases = None if phase is None else [phase]
        where, params = where_clause("start", start, end, rank=ranks, node=nodes, phase=phases)
        return self._query("steps", STEPS_SCHEMA, where, params, "rank, phase, step")

    def events(
        self,
        kinds: Sequence[str] | None = None,
        ranks: Sequence[int] | None = None,
        start: float | None = None,
        end: float | None = None,
    ) -> pd.DataFrame:
        """Lifecycle events of every rank, ordered by time."""
        from stepscope.jobfolder import EVENTS_SCHEMA
        from stepscope.read._segment_query import where_clause

        where, params = where_clause("time", start, end, rank=ranks, kind=kinds)
        return self._query("events", EVENTS_SCHEMA, where, params, "time")

    def system(
        self,
        nodes: Sequence[str] | None = None,
        start: float | None = None,
        end: float | None = None,
    ) -> pd.DataFrame:
        """System samples, wide (one row per node and sample), ordered by node, time."""
        from stepscope.jobfolder import SYSTEM_BASE_SCHEMA
        from stepscope.read._segment_query import where_clause

        where, params = where_clause("time", start, end, node=nodes)
        return self._query("system", SYSTEM_BASE_SCHEMA, where, params, "node, time")

    def others(
        self,
        nodes: Sequence[str] | None = None,
        start: float | None = None,
        end: float | None = None,
    ) -> pd.DataFrame:
        """The busiest processes outside the job (``others/<node>/``), ordered by node,
        time, CPU (highest first): ``time``, ``node``, ``pid``, ``name``, ``command``,
        ``cpu`` (% of one core). Empty for jobs older than the stream."""
        from stepscope.jobfolder import OTHERS_SCHEMA
        from stepscope.read._segment_query import where_clause

        where, params = where_clause("time", start, end, node=nodes)
        return self._query("others", OTHERS_SCHEMA, where, params, "node, time, cpu DESC")

    def system_long(
        self,
        nodes: Sequence[str] | None = None,
        start: float | None = None,
        end: float | None = None,
    ) -> pd.DataFrame:
        """System samples, long: columns ``time``, ``node``, ``metric``, ``value``."""
        wide = self.system(nodes, start, end)
        value_cols = [c for c in wide.columns if c not in ("time", "node", "interval_ms")]
        long = wide.melt(id_vars=["time", "node"], value_vars=value_cols, var_name="metric")
        return long.dropna(subset=["value"]).reset_index(drop=True)


def _views() -> Views:
    """The views of :meth:`Job.sql` (name, stream prefix, schema)."""
    from stepscope.jobfolder import EVENTS_SCHEMA, OTHERS_SCHEMA, STEPS_SCHEMA, SYSTEM_BASE_SCHEMA

    return (
        ("others", "others", OTHERS_SCHEMA),
        ("steps", "steps", STEPS_SCHEMA),
        ("events", "events", EVENTS_SCHEMA),
        ("system", "system", SYSTEM_BASE_SCHEMA),
    )
