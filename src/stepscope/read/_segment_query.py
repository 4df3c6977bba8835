"""DuckDB plumbing behind :class:`stepscope.read._job.Job`: segment views and WHERE clauses.

A job's row streams are Parquet segments under a prefix of its store (docs/format.md).
This module turns one prefix into a DuckDB view and builds the parameterised
filters (time window, IN-lists) the reader pushes down into it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import pyarrow as pa

from stepscope.store import Store, read_tables

if TYPE_CHECKING:
    import duckdb

#: A value bound to a ``?`` of a reader query (a time bound, a rank, a node, a phase).
Param = float | int | str


def where_clause(
    time_col: str,
    start: float | None,
    end: float | None,
    **members: Sequence[Param] | None,
) -> tuple[str, list[Param]]:
    """A WHERE clause and its parameters for a time window and IN-lists."""
    clauses: list[str] = ["TRUE"]
    params: list[Param] = []
    if start is not None:
        clauses.append(f"{time_col} >= ?")
        params.append(start)
    if end is not None:
        clauses.append(f"{time_col} < ?")
        params.append(end)
    for col, values in members.items():
        if values is not None:
            values = list(values)
            clauses.append(f"{col} IN ({', '.join('?' * len(values))})" if values else "FALSE")
            params.extend(values)
    return " AND ".join(clauses), params


def register_segments(
    con: duckdb.DuckDBPyConnection, store: Store, view: str, prefix: str, schema: pa.Schema
) -> None:
    """Make ``view`` the union (by column name) of all segments under ``prefix``.

    Local segments are scanned by DuckDB itself, so filters and column
    selection are pushed down into the Parquet files.
    """
    keys = store.list(prefix, suffix=".parquet")
    # Drop both kinds of earlier binding: the segments may have moved between
    # local files and an Arrow table since the last query.
    con.unregister(view)
    con.execute(f"DROP VIEW IF EXISTS {view}")
    if keys and store.is_local:
        files = [store.path(k) for k in keys]
        con.read_parquet(files, union_by_name=True).create_view(view, replace=True)
        return
    if keys:
        table = pa.concat_tables(read_tables(store, keys), promote_options="default")
    else:
        # An empty job still gets a view, so queries return typed empty frames.
        table = schema.empty_table()
    con.register(view, table)


def read_stream(
    store: Store,
    prefix: str,
    columns: Sequence[str] | None = None,
    on_skip: Callable[[str, str], None] | None = None,
) -> pa.Table:
    """The segments under ``prefix`` as one table (union by name), only ``columns`` if
    given: read by pyarrow alone, file by file (no DuckDB, no pandas). A segment that
    cannot be read, or whose columns do not fit the others', is left out and given
    to ``on_skip`` (its key, why)."""
    import pyarrow.parquet as pq

    keys = store.list(prefix, suffix=".parquet")
    if store.is_local:
        sources: list[str | pa.BufferReader] = [store.path(k) for k in keys]
    else:
        sources = [pa.BufferReader(b) for b in store.read_many(keys)]
    out: pa.Table | None = None
    for key, source in zip(keys, sources, strict=True):
        try:
            with pq.ParquetFile(source) as file:
                names = file.schema_arrow.names
                wanted = None if columns is None else [c for c in columns if c in names]
                table = file.read(wanted)
            out = (
                table
                if out is None
                else pa.concat_tables([out, table], promote_options="permissive")
            )
        except (OSError, pa.ArrowException) as exc:  # damaged, or its types do not fit
            if on_skip is not None:
                on_skip(key, f"{type(exc).__name__}: {exc}")
    if out is None:
        return pa.table({c: pa.array([], pa.null()) for c in columns or ()})
    return out
