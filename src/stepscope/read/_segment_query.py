"""DuckDB plumbing behind :class:`stepscope.read._job.Job`: segment views and WHERE clauses.

A job's row streams are Parquet segments under a prefix of its store (docs/format.md).
This module turns one prefix into a DuckDB view and builds the parameterised
filters (time window, IN-lists) the reader pushes down into it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import pyarrow as pa

from stepscope.jobfolder import TIME_RANGE
from stepscope.store import TIME_COLUMNS, SegmentCheck, Store

if TYPE_CHECKING:
    import duckdb
    import pandas as pd

#: A value bound to a ``?`` of a reader query (a time bound, a rank, a node, a phase).
Param = float | int | str
#: The views a query reads: (view name, stream prefix, the stream's schema) each.
Views = Sequence[tuple[str, str, pa.Schema]]


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


def run_query(
    con: duckdb.DuckDBPyConnection,
    store: Store,
    check: SegmentCheck,
    sql: str,
    params: Sequence[object],
    views: Views,
) -> pd.DataFrame:
    """Run ``sql`` over ``views`` (name, prefix, schema) of the readable segments.

    A query that fails on a segment's data (a footer that reads over damaged
    pages) reads each of its segments whole once, leaves out those that fail,
    and runs once more.
    """
    import duckdb

    # Errors of the query itself, not of the files it read: never worth a second look.
    not_the_data = (duckdb.ParserException, duckdb.BinderException, duckdb.CatalogException)
    for attempt in (1, 2):
        keys = [k for v in views for k in register_segments(con, store, *v, check)]
        try:
            return con.execute(sql, list(params)).df()
        except not_the_data:
            raise
        except duckdb.Error:
            whole = lambda path: con.read_parquet(path).to_arrow_table()  # noqa: E731
            if attempt == 2 or not check.deep(store, keys, whole):
                raise
    raise AssertionError("unreachable")


def register_segments(
    con: duckdb.DuckDBPyConnection,
    store: Store,
    view: str,
    prefix: str,
    schema: pa.Schema,
    check: SegmentCheck,
) -> list[str]:
    """Make ``view`` the union (by column name) of the readable segments under ``prefix``.

    Local segments are scanned by DuckDB itself, so filters and column selection
    are pushed down into the Parquet files. Segments that fail ``check`` are left
    out; the view has every column of ``schema`` (NULL where no segment has it),
    NaN and infinities read as NULL, and rows with a time outside
    :data:`stepscope.jobfolder.TIME_RANGE` left out. Returns the keys in the view.
    """
    raw = f"{view}__raw"
    # Drop both kinds of earlier binding: the segments may have moved between
    # local files and an Arrow table since the last query.
    con.unregister(raw)
    con.execute(f"DROP VIEW IF EXISTS {raw}")
    keys = store.list(prefix, suffix=".parquet")
    table: pa.Table | None = None
    if store.is_local:
        keys, types = check.readable(store, keys)
        if keys:
            files = [store.path(k) for k in keys]
            con.read_parquet(files, union_by_name=True).create_view(raw, replace=True)
    elif keys:
        tables = check.read_tables(store, keys)
        table = pa.concat_tables(tables, promote_options="permissive") if tables else None
    if not store.is_local or not keys:
        # An empty stream still gets a view, so queries return typed empty frames.
        table = table if table is not None else schema.empty_table()
        types = {f.name: f.type for f in table.schema}
        con.register(raw, table)
    con.execute(f"CREATE OR REPLACE VIEW {view} AS {clean_select(raw, types, schema)}")
    return keys


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def clean_select(raw: str, types: dict[str, pa.DataType], schema: pa.Schema) -> str:
    """A SELECT over ``raw`` with every column of ``schema``, non-finite floats as
    NULL and rows whose times are outside :data:`TIME_RANGE` left out."""
    replace = [
        f"CASE WHEN isfinite({_quote(n)}) THEN {_quote(n)} END AS {_quote(n)}"
        for n, t in types.items()
        if pa.types.is_floating(t) and n not in TIME_COLUMNS
    ]
    missing = [
        f"CAST(NULL AS {_DUCK_TYPES.get(f.type, 'VARCHAR')}) AS {_quote(f.name)}"
        for f in schema
        if f.name not in types
    ]
    lo, hi = TIME_RANGE
    where = [
        # isfinite first: DuckDB prunes a BETWEEN by the Parquet statistics, which leave
        # NaN out, so a NaN time passed BETWEEN alone (DuckDB 2.0.1).
        f"isfinite({_quote(c)}) AND {_quote(c)} BETWEEN {lo!r} AND {hi!r}"
        for c in TIME_COLUMNS
        if c in types and _is_number(types[c])
    ]
    select = "*" + (f" REPLACE ({', '.join(replace)})" if replace else "")
    select += "".join(f", {m}" for m in missing)
    return f"SELECT {select} FROM {raw} WHERE " + (" AND ".join(where) or "TRUE")


def _is_number(t: pa.DataType) -> bool:
    return bool(pa.types.is_integer(t) or pa.types.is_floating(t))


_DUCK_TYPES = {
    pa.float64(): "DOUBLE",
    pa.float32(): "FLOAT",
    pa.int32(): "INTEGER",
    pa.int64(): "BIGINT",
    pa.string(): "VARCHAR",
    pa.bool_(): "BOOLEAN",
}


def read_stream(
    store: Store,
    prefix: str,
    columns: Sequence[str] | None = None,
    on_skip: Callable[[str, str], None] | None = None,
) -> pa.Table:
    """The segments under ``prefix`` as one table (union by name), only ``columns`` if
    given: read by pyarrow alone, file by file (no DuckDB, no pandas), out-of-range
    values cleaned as in :func:`register_segments`. A segment that
    cannot be read, or whose columns do not fit the others', is left out and given
    to ``on_skip`` (its key, why)."""
    import pyarrow.parquet as pq

    from stepscope.store import clean_floats

    keys = store.list(prefix, suffix=".parquet")
    sources = store.arrow_sources(keys)
    out: pa.Table | None = None
    for key, source in zip(keys, sources, strict=True):
        try:
            with pq.ParquetFile(source) as file:
                names = file.schema_arrow.names
                wanted = None if columns is None else [c for c in columns if c in names]
                table = clean_floats(file.read(wanted))  # as the DuckDB views do
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
