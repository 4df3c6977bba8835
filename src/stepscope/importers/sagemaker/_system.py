"""System metrics: the predecessor's long lines grouped into stepscope's wide rows.

Each node's minute files are read in order, a few MB at a time, by Arrow's JSON
reader (C++, no Python object per line). Lines are binned on a grid of the inferred
interval (the median gap between one metric's samples), anchored at that metric's
first sample, so the lines of one sample (a few ms apart) share a row. The last two
bins of a chunk wait for the next chunk: a sample split across minute (or hour)
files is still one row. Memory is bounded by the chunk size, not the job's length.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pajson

from stepscope.importers.sagemaker._metrics import SEP, Placement, describe, place
from stepscope.importers.sagemaker._rows import wide_table
from stepscope.importers.sagemaker._source import SystemFile
from stepscope.importers.sagemaker._tally import Tally
from stepscope.store import Store, arrow_reader

CHUNK_BYTES = 32 << 20
_FIELDS = ("Type", "Name", "Dimension")
_SCHEMA = pa.schema(
    [*(pa.field(f, pa.string()) for f in _FIELDS), ("Value", pa.float64()),
     ("Timestamp", pa.float64())]
)  # fmt: skip

Floats = npt.NDArray[np.float64]
Ints = npt.NDArray[np.int64]


@dataclass
class Grid:
    """The keys seen so far (global ids), the sampling grid, and the bins held back."""

    keys: dict[str, int] = field(default_factory=dict)
    placements: list[Placement] = field(default_factory=list)
    interval: float = 0.0
    anchor: float = 0.0
    held: tuple[Ints, Ints, Floats] | None = None
    emitted: int = -(2**62)


def node_rows(
    store: Store, files: list[SystemFile], grid: Grid, tally: Tally
) -> Iterator[pa.Table]:
    """The wide rows of one node's minute files (sorted by minute), chunk by chunk."""
    node = files[0].node
    for data, last in _chunks(store, files):
        table = _parse(data, tally)
        if table.num_rows:
            bins, keys, values = _placed(table, grid, tally)
            late = int((bins <= grid.emitted).sum())
            if late:  # out of order by more than two samples: an extra row at their time
                tally.no_place("system lines after their sample was written (extra rows)",
                               "out of order", late)  # fmt: skip
            yield from _emit(grid, node, bins, keys, values, last)
        elif last and grid.held is not None:
            yield from _emit(grid, node, *_empty(), last=True)
    tally.read("system files", len(files))


def interval_ms(grid: Grid) -> int:
    return round(grid.interval * 1000)


def _empty() -> tuple[Ints, Ints, Floats]:
    return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.float64)


def _chunks(store: Store, files: list[SystemFile]) -> Iterator[tuple[bytes, bool]]:
    """The files' bytes joined into chunks of about CHUNK_BYTES (each line whole)."""
    parts: list[bytes] = []
    size = 0
    for i, f in enumerate(files):
        data = store.read_bytes(f.key)
        parts.append(data if data.endswith(b"\n") or not data else data + b"\n")
        size += len(data)
        if size >= CHUNK_BYTES or i == len(files) - 1:
            yield b"".join(parts), i == len(files) - 1
            parts, size = [], 0


def _parse(data: bytes, tally: Tally) -> pa.Table:
    """The lines as a table; a chunk with a damaged line is read line by line."""
    block = 1 << 20
    while True:
        try:
            opts = pajson.ReadOptions(block_size=block)
            parse = pajson.ParseOptions(explicit_schema=_SCHEMA, unexpected_field_behavior="ignore")
            # Arrow's memory, not a Python file: its threads may free it at exit
            table = pajson.read_json(arrow_reader(data), read_options=opts, parse_options=parse)
            break
        except pa.ArrowInvalid as exc:
            if "straddling" in str(exc) and block < len(data):
                block = min(block * 8, len(data) + 1)  # a line longer than a block
                continue
            table = _parse_slowly(data, tally)
            break
    tally.read("system lines", table.num_rows)
    return table


def _parse_slowly(data: bytes, tally: Tally) -> pa.Table:
    rows: dict[str, list[object]] = {f.name: [] for f in _SCHEMA}
    for line in data.splitlines():
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
            value, stamp = float(obj["Value"]), float(obj["Timestamp"])
        except (ValueError, KeyError, TypeError):
            tally.no_place("unreadable system lines", line[:120].decode("utf-8", "replace"))
            continue
        for f in _FIELDS:
            rows[f].append(str(obj.get(f) or ""))
        rows["Value"].append(value)
        rows["Timestamp"].append(stamp)
    return pa.table(rows, schema=_SCHEMA)


def _placed(table: pa.Table, grid: Grid, tally: Tally) -> tuple[Ints, Ints, Floats]:
    """Bins, global key ids and values of the lines that have a place."""
    cols = [pc.fill_null(table.column(f), "") for f in _FIELDS]
    key = pc.binary_join_element_wise(*cols, SEP)
    enc = pc.dictionary_encode(key).combine_chunks()
    local = enc.indices.to_numpy(zero_copy_only=False).astype(np.int64)
    to_global = np.array([_key_id(str(k), grid) for k in enc.dictionary.to_pylist()], np.int64)
    gid = to_global[local]
    values = table.column("Value").to_numpy().astype(np.float64)
    stamps = table.column("Timestamp").to_numpy().astype(np.float64)
    bad = np.isnan(values) | np.isnan(stamps)
    counts = np.bincount(local, minlength=len(to_global))
    for i, k in enumerate(enc.dictionary.to_pylist()):
        if to_global[i] < 0 and counts[i]:
            tally.no_place(f"system metric {describe(str(k))}", "no column", int(counts[i]))
    if bad.any():
        tally.no_place("system lines without a value or time", "null", int(bad.sum()))
    keep = (gid >= 0) & ~bad
    gid, values, stamps = gid[keep], values[keep], stamps[keep]
    if grid.interval == 0.0 and len(stamps):
        _infer(grid, gid, stamps)
    bins = np.floor((stamps - grid.anchor) / grid.interval + 0.5).astype(np.int64)
    return bins, gid, values


def _key_id(key: str, grid: Grid) -> int:
    if key not in grid.keys:
        placement = place(key)
        grid.keys[key] = len(grid.placements) if placement else -1
        if placement:
            grid.placements.append(placement)
    return grid.keys[key]


def _infer(grid: Grid, gid: Ints, stamps: Floats) -> None:
    """The interval: the median gap of the most frequent metric (1 s with one sample)."""
    top = int(np.bincount(gid).argmax())
    own = np.unique(stamps[gid == top])
    gaps = np.diff(own)
    grid.interval = round(float(np.median(gaps)), 3) if len(gaps) else 1.0
    grid.interval = grid.interval or 1.0
    grid.anchor = float(own[0])


def _emit(
    grid: Grid, node: str, bins: Ints, keys: Ints, values: Floats, last: bool
) -> Iterator[pa.Table]:
    if grid.held is not None:
        hb, hk, hv = grid.held
        bins, keys = np.concatenate([hb, bins]), np.concatenate([hk, keys])
        values = np.concatenate([hv, values])
        grid.held = None
    if not len(bins):
        return
    if not last:
        cut = int(bins.max()) - 1
        hold = bins >= cut
        grid.held = (bins[hold], keys[hold], values[hold])
        bins, keys, values = bins[~hold], keys[~hold], values[~hold]
    if len(bins):
        grid.emitted = max(grid.emitted, int(bins.max()))
        times = (grid.anchor + np.unique(bins) * grid.interval).astype(np.float64)
        yield wide_table(node, interval_ms(grid), times, bins, keys, values, grid.placements)
