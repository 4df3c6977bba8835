"""Reading a job's segments for the rules: per node (offline) or per file (live)."""

from __future__ import annotations

import os
from collections.abc import Sequence

import duckdb
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from stepscope.store import TMP_MARKER, SegmentCheck, Store, read_tables


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
    con = duckdb.connect() if con is None else con
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


# The node rules never read per-core CPU, disk or network columns: skip them offline.
RULE_SYSTEM_COLUMNS = "COLUMNS(lambda c: NOT regexp_matches(c, '^(cpu[0-9]+|disk_.*|net_.*)$'))"


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
    table = pq.read_table(store.path(keys[0]), columns=["node"], filesystem=store.fs)
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
    order: str,
    con: duckdb.DuckDBPyConnection | None = None,
    columns: str = "*",
    check: SegmentCheck | None = None,
) -> pd.DataFrame | None:
    """All rows of the streams ``prefixes`` (``columns``: a DuckDB select list), without
    the segments ``check`` finds damaged."""
    keys = readable(store, [k for p in prefixes for k in store.list(p, suffix=".parquet")], check)
    return read_segments(store, keys, order=order, con=con, columns=columns)
