"""Reading a job's segments for the rules: per node (offline) or per file (live)."""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from stepscope.store import TMP_MARKER, SegmentCheck, Store, clean_floats, read_tables

if TYPE_CHECKING:  # the live reader's (rules/_live.py); the final evaluation reads by pyarrow
    import duckdb


def read_segments(
    store: Store,
    keys: Sequence[str],
    where: str = "TRUE",
    params: Sequence[object] = (),
    order: str = "",
    con: duckdb.DuckDBPyConnection | None = None,
    filename: bool = False,
    columns: str = "*",
) -> pd.DataFrame | None:
    """The rows of the segment files ``keys`` (union by column name) matching ``where``.

    Pass ``con`` to reuse a connection (opening one costs tens of ms); with
    ``filename`` the rows carry the key of their file in a ``filename`` column.
    """
    if not keys:
        return None
    own = con is None
    if con is None:
        import duckdb

        con = duckdb.connect()
    try:
        con.unregister("segments")
        if store.is_local:
            files = [store.path(k) for k in keys]
            rel = con.read_parquet(files, union_by_name=True, filename=filename)
            rel.create_view("segments", replace=True)
        else:
            con.execute("DROP VIEW IF EXISTS segments")
            con.register("segments", _remote_table(store, keys, filename))
        sql = f"SELECT {columns} FROM segments WHERE {where}" + (
            f" ORDER BY {order}" if order else ""
        )
        return con.execute(sql, list(params)).df()
    finally:
        if own:
            con.close()


def _remote_table(store: Store, keys: Sequence[str], filename: bool) -> pa.Table:
    tables = []
    for key, table in zip(keys, read_tables(store, list(keys)), strict=True):
        if filename:
            table = table.append_column("filename", pa.array([store.path(key)] * table.num_rows))
        tables.append(table)
    return pa.concat_tables(tables, promote_options="default")


# The node rules never read per-core CPU, disk or network columns: skip them.
SKIPPED_SYSTEM_COLUMNS = "^(cpu[0-9]+|disk_.*|net_.*)$"
RULE_SYSTEM_COLUMNS = f"COLUMNS(lambda c: NOT regexp_matches(c, '{SKIPPED_SYSTEM_COLUMNS}'))"


def stream_prefixes(store: Store, kind: str) -> list[str]:
    """The streams of ``kind`` (``system``, ``steps``, ``events``): one folder each."""
    return [f"{kind}/{name}" for name in store.listdir(kind) if store.isdir(f"{kind}/{name}")]


def list_names(store: Store, prefix: str) -> list[str]:
    """``store.listdir(prefix)``, read straight from the disk on local stores: a live
    scan lists every stream's folder, and fsspec's listing costs ~5x more."""
    if not store.is_local:
        return store.listdir(prefix)
    try:
        names = os.listdir(store.path(prefix))
    except (FileNotFoundError, NotADirectoryError):
        return []
    return sorted(n for n in names if TMP_MARKER not in n)


def readable(store: Store, keys: list[str], check: SegmentCheck | None) -> list[str]:
    """``keys`` without the segments ``check`` finds damaged (local stores; docs/format.md)."""
    if check is None or not store.is_local:
        return keys
    return check.readable(store, keys)[0]


def stream_node(store: Store, prefix: str, check: SegmentCheck | None = None) -> str | None:
    """The node that wrote the stream ``prefix`` (read from its first segment)."""
    if prefix.startswith(("system/", "others/")):  # named after their node
        return prefix.split("/", 1)[1]
    keys = readable(store, store.list(prefix, suffix=".parquet"), check)
    if not keys:
        return None
    with pq.ParquetFile(store.arrow_sources(keys[:1])[0]) as segment:  # not a dataset
        table = segment.read(columns=["node"])
    return str(table.column("node")[0]) if table.num_rows else None


def node_streams(
    store: Store, kind: str, check: SegmentCheck | None = None
) -> dict[str, list[str]]:
    """Node -> the streams of ``kind`` it wrote."""
    out: dict[str, list[str]] = {}
    for prefix in stream_prefixes(store, kind):
        node = stream_node(store, prefix, check)
        if node is not None:
            out.setdefault(node, []).append(prefix)
    return out


def read_streams(
    store: Store,
    prefixes: Sequence[str],
    order: Sequence[str],
    skip: str | None = None,
    check: SegmentCheck | None = None,
    schema: pa.Schema | None = None,
) -> pd.DataFrame | None:
    """All rows of the streams ``prefixes`` ordered by the columns ``order``, without the
    columns matching the pattern ``skip`` nor the segments ``check`` finds damaged.

    With ``schema``, the rows as the reader's ``Job.steps()`` gives them: every column
    of ``schema`` (null where no segment has it), non-finite floats as null, rows with
    times out of range left out. Read by pyarrow one file at a time, union by column
    name as DuckDB's ``union_by_name``: its peak is about three times the frame;
    DuckDB's scan, sort and conversion took six (390 MB for a day of two ranks' steps).
    """
    keys = readable(store, [k for p in prefixes for k in store.list(p, suffix=".parquet")], check)
    if not keys:
        return None
    dropped = re.compile(skip) if skip else None
    tables = []
    for source in store.arrow_sources(keys):
        with pq.ParquetFile(source) as file:
            names = file.schema_arrow.names
            table = file.read([n for n in names if not (dropped and dropped.match(n))])
        tables.append(table if schema is None else clean_floats(table))
    table = pa.concat_tables(tables, promote_options="permissive")
    del tables
    for f in schema or ():
        if f.name not in table.column_names:
            table = table.append_column(f.name, pa.nulls(table.num_rows, f.type))
    # Sorted by Arrow (stable, nulls and NaN last, as pandas' stable sort), copied only
    # when out of order (segments are written in order); the pool keeps freed blocks.
    at = pc.sort_indices(table, [(c, "ascending") for c in order])
    if len(at) and not pc.all(pc.equal(at, pa.array(np.arange(len(at)))), skip_nulls=True).as_py():
        table = table.take(at)
    del at
    # Column by column, each Arrow buffer freed once converted: the peak is about the
    # frame, not the frame and the table (a day of a node's steps: 67 MB less).
    frame = table.to_pandas(split_blocks=True, self_destruct=True)
    del table
    pa.default_memory_pool().release_unused()
    return frame
