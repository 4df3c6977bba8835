"""Debugger tensors: event files + index -> ``tensors/rank-<r>/`` (docs/format.md).

The index (``index/<n>/<step>_<worker>.json``: ``meta.mode``, ``meta.mode_step``,
``meta.event_file_name``, ``tensor_payload[].tensorname``) says each event file's
phase and step; a tensor of one value becomes a scalar (``key`` ``value``), any other
a raw tensor in a blob. ``worker_<r>`` is rank r. ``collections/<n>/<worker>_collections.json``
gives the collections (``collections.<name>.tensor_names``). Blobs are cut at
:data:`BLOB_BYTES` so memory stays bounded.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from stepscope.importers.sagemaker._segments import IMPORT_PID, write_table
from stepscope.importers.sagemaker._source import Listing, worker_of
from stepscope.importers.sagemaker._tally import Tally
from stepscope.importers.sagemaker._tfevents import event_tensors, records
from stepscope.jobfolder import INDEX_SCHEMA, SCALARS_SCHEMA, VALUE_KEY, blob_name, rank_prefix
from stepscope.store import Store

BLOB_BYTES = 64 << 20
_PHASES = {"TRAIN": "train", "GLOBAL": "train", "EVAL": "eval", "PREDICT": "eval"}
Meta = tuple[str, int]  # phase, step


@dataclass
class RankTensors:
    """One rank's rows and the blob being filled."""

    rank: int
    scalars: list[tuple[object, ...]] = field(default_factory=list)
    index: list[tuple[object, ...]] = field(default_factory=list)
    chunks: list[bytes] = field(default_factory=list)
    size: int = 0
    blob: str = ""
    seq: int = 0
    members: dict[str, set[str]] = field(default_factory=dict)


def rank_of_worker(worker: str) -> int:
    """``worker_3`` -> 3 (the debugger's worker name of rank 3); 0 for any other name."""
    tail = worker.rsplit("_", 1)[-1]
    return int(tail) if tail.isdigit() else 0


def import_tensors(
    src: Store, listing: Listing, out: Store, tally: Tally, seen: Callable[[float, float], None]
) -> None:
    """Read every event file (with its index meta) and write each rank's tensors."""
    metas, expected = _index(src, listing.index, tally)
    ranks: dict[int, RankTensors] = {}
    for key in listing.events:
        worker = worker_of(key) or "worker_0"
        state = ranks.setdefault(rank_of_worker(worker), RankTensors(rank_of_worker(worker)))
        meta = metas.get(_tail(key))
        if meta is None:
            tally.no_place("tensor event files without an index entry (phase: train)", key)
        found = _read_events(src.read_bytes(key), key, meta, state, out, tally)
        for name in sorted(expected.get(_tail(key), set()) - found):
            tally.no_place("indexed tensors missing from their event file", name)
    for coll_key in listing.collections:
        state = ranks.setdefault(rank_of_worker(worker_of(coll_key) or ""), RankTensors(0))
        _collections(src, coll_key, state, tally)
    for state in ranks.values():
        _finish(out, state, seen)


def _tail(key: str) -> str:
    """``events/<n>/<file>``: how an index names an event file, whatever the prefix."""
    return "/".join(key.split("/")[-3:])


def _index(
    src: Store, keys: list[str], tally: Tally
) -> tuple[dict[str, Meta], dict[str, set[str]]]:
    """Event file name (as the index writes it) -> (phase, step), and its tensors."""
    metas: dict[str, Meta] = {}
    expected: dict[str, set[str]] = {}
    for key in keys:
        try:
            body = src.read_json(key)
            assert isinstance(body, dict)
            meta = body["meta"]
            name = _tail(str(meta["event_file_name"]))
            metas[name] = (_PHASES.get(str(meta.get("mode", "TRAIN")), "eval"),
                           int(meta["mode_step"]))  # fmt: skip
        except (ValueError, KeyError, TypeError, AssertionError):
            tally.no_place("unreadable tensor index files", key)
            continue
        payload = body.get("tensor_payload") or []
        names = {str(p.get("tensorname")) for p in payload if isinstance(p, dict)}
        expected.setdefault(name, set()).update(names)
        tally.read("tensor index files")
    return metas, expected


def _read_events(
    data: bytes, key: str, meta: Meta | None, state: RankTensors, out: Store, tally: Tally
) -> set[str]:
    found: set[str] = set()
    try:
        for record in records(data):
            wall, step, tensors = event_tensors(record)
            phase, at = meta if meta is not None else ("train", step)
            for t in tensors:
                found.add(t.name)
                _add(state, out, wall, phase, at, t.name, t.dtype, t.shape, t.array)
                tally.read("tensor values")
    except (ValueError, IndexError) as exc:
        tally.no_place("damaged tensor event files (read up to the damage)", f"{key}: {exc}")
    return found


def _add(state: RankTensors, out: Store, wall: float, phase: str, step: int, name: str,
         dtype: str, shape: list[int], array: np.ndarray) -> None:  # fmt: skip
    if array.size == 1 and dtype != "bool":
        state.scalars.append(
            (wall, state.rank, phase, step, name, VALUE_KEY, float(array.ravel()[0]))
        )
        return
    data = np.ascontiguousarray(array).tobytes()
    if not state.blob:
        state.blob = blob_name(wall, IMPORT_PID, state.seq)
    state.index.append(
        (wall, state.rank, phase, step, name, dtype, shape, state.blob, state.size, len(data))
    )
    state.chunks.append(data)
    state.size += len(data)
    if state.size >= BLOB_BYTES:
        _write_blob(out, state)


def _write_blob(out: Store, state: RankTensors) -> None:
    if state.chunks:
        out.write_bytes(f"{rank_prefix(state.rank)}/blobs/{state.blob}", b"".join(state.chunks))
        state.seq += 1
    state.chunks, state.size, state.blob = [], 0, ""


def _collections(src: Store, key: str, state: RankTensors, tally: Tally) -> None:
    try:
        body = src.read_json(key)
        colls = body.get("collections", {}) if isinstance(body, dict) else {}
    except ValueError:
        tally.no_place("unreadable collection files", key)
        return
    for name, spec in colls.items() if isinstance(colls, dict) else []:
        names = spec.get("tensor_names", []) if isinstance(spec, dict) else []
        state.members.setdefault(str(name), set()).update(str(n) for n in names)
    tally.read("tensor collection files")


def _finish(out: Store, state: RankTensors, seen: Callable[[float, float], None]) -> None:
    _write_blob(out, state)
    prefix = rank_prefix(state.rank)
    for rows, schema, stream in ((state.scalars, SCALARS_SCHEMA, "scalars"),
                                 (state.index, INDEX_SCHEMA, "index")):  # fmt: skip
        if rows:
            cols = list(zip(*rows, strict=True))
            table = pa.table({f.name: c for f, c in zip(schema, cols, strict=True)}, schema=schema)
            table = table.sort_by([("time", "ascending"), ("name", "ascending")])
            write_table(out, f"{prefix}/{stream}", table, "time")
            times = [float(t) for t in cols[0] if isinstance(t, float)]
            seen(min(times), max(times))
    if state.members:
        body = {k: sorted(v) for k, v in sorted(state.members.items())}
        out.write_bytes(f"{prefix}/collections.json", json.dumps(body).encode())
