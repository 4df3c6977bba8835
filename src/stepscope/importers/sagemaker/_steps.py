"""The predecessor's steps converted to stepscope's (docs/sagemaker.md, "Steps").

Its step runs from the first forward to the last backward hook: no optimizer, no
fetch of the next batch. Ours is a whole optimizer step: from where the previous
step ended to the end of ``optimizer.step()``. Converted, step k starts at the
fetch of its batch (the first ``GetNext`` after step k-1's end; the step's own start
without one) and ends where step k+1 starts (the last step: at its own end), so the
steps tile the loop as ours do. The predecessor's own span is kept in ``source_start``
and ``source_end``. Parts never measured are null: ``data_wait`` without fetch events,
``forward``/``backward`` without their events, ``optimizer`` always.
"""

from __future__ import annotations

import json
import math

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from stepscope.importers.sagemaker._trace import NONE, Spans, Stream, Workers
from stepscope.jobfolder import EVENTS_SCHEMA, IMPORTED_STEPS_SCHEMA

Floats = npt.NDArray[np.float64]
# An imported process_start: the real start is unknown, so the initialization measured
# from it is a lower bound (MaxInitializationTime says so).
START_DETAIL = {"source": "sagemaker", "estimated_from": "the earliest time of the timeline"}


def steps_table(stream: Stream, rank: int, local_rank: int, node: str, pid: int) -> pa.Table:
    """The rank's steps in stepscope's definition, sorted by start."""
    log = stream.steps
    order = np.lexsort((np.array(log.ends), np.array(log.starts)))  # by start, then end
    n = len(order)
    starts = np.array(log.starts, np.float64)[order]
    ends = np.array(log.ends, np.float64)[order]
    begin = _begins(starts, ends, np.sort(np.array(stream.fetches.starts, np.float64)))
    end = np.append(begin[1:], ends[-1:]) if n else ends
    end = np.maximum(end, ends)  # overlapping source steps: never shorter than recorded
    duration = end - begin
    parts = {
        "data_wait": _inside(stream.fetches, begin, end),
        "forward": _inside(stream.forward, begin, end),
        "backward": _inside(stream.backward, begin, end),
        "optimizer": None,
    }
    known = sum((p for p in parts.values() if p is not None), np.zeros(n))
    cols: dict[str, object] = {
        "rank": np.full(n, rank, np.int32),
        "local_rank": np.full(n, local_rank, np.int32),
        "node": [node] * n,
        "pid": np.full(n, pid, np.int32),
        "phase": [log.phases[i] for i in order],
        "step": np.array(log.steps, np.int64)[order],
        "start": begin,
        "end": end,
        "duration": duration.astype(np.float32),
    }
    for name, values in parts.items():
        cols[name] = pa.nulls(n, pa.float32()) if values is None else values.astype(np.float32)
    cols["other"] = np.maximum(duration - known, 0.0).astype(np.float32)
    cols["profiled"] = np.zeros(n, bool)
    for name in ("gpu_forward", "gpu_backward", "gpu_optimizer"):
        cols[name] = pa.nulls(n, pa.float32())
    cols["source_start"], cols["source_end"] = starts, ends
    return pa.table(cols, schema=IMPORTED_STEPS_SCHEMA)


def _begins(starts: Floats, ends: Floats, fs: Floats) -> Floats:
    """Each step's start: the first fetch (``fs``: their sorted starts) after the
    previous step's end, if any."""
    begin = starts.copy()
    if not len(fs):
        return begin
    prev_end = np.append(-np.inf, ends[:-1])
    first = np.searchsorted(fs, prev_end, side="right")  # first fetch after the previous end
    has = (first < len(fs)) & (fs[np.minimum(first, len(fs) - 1)] <= starts)
    begin[has] = fs[first[has]]
    return begin


def _inside(spans: Spans, begin: Floats, end: Floats) -> Floats | None:
    """Per step, the time covered by ``spans`` inside it (nested spans counted once);
    None when the stream has no such span at all (never measured, not zero)."""
    if not len(spans):
        return None
    arr = _union(*spans.columns())
    out = np.zeros(len(begin))
    lo = np.searchsorted(arr[:, 1], begin, side="right")
    hi = np.searchsorted(arr[:, 0], end, side="left")
    for i in range(len(begin)):  # a step holds few spans: the loop is over steps only
        seg = arr[lo[i] : hi[i]]
        if len(seg):
            out[i] = float(
                (np.minimum(seg[:, 1], end[i]) - np.maximum(seg[:, 0], begin[i])).clip(0).sum()
            )
    return out


def _union(starts: Floats, ends: Floats) -> Floats:
    """The union of the spans as disjoint (start, end) rows, sorted: a span that starts
    at or before the furthest end so far joins its run."""
    order = np.lexsort((ends, starts))
    s, e = starts[order], ends[order]
    reach = np.maximum.accumulate(e)
    new = np.ones(len(s), bool)
    new[1:] = s[1:] > reach[:-1]
    first = np.flatnonzero(new)
    return np.column_stack([s[first], np.maximum.reduceat(e, first)])


def events_table(stream: Stream, rank: int, local_rank: int, node: str, pid: int) -> pa.Table:
    """The rank's ``process_start`` (its timeline's earliest time: the process started
    at or before it), data loader settings (``dataloader``) and worker events
    (``dataloader_worker``), with the loader's settings under our names."""
    rows: list[tuple[float, str, str]] = []
    if math.isfinite(stream.first):
        rows.append((stream.first, "process_start", json.dumps(START_DETAIL, sort_keys=True)))
    settings = [loader_detail(args) for _, args in stream.loaders]
    for (time, _), detail in zip(stream.loaders, settings, strict=True):
        rows.append((time, "dataloader", json.dumps(detail, sort_keys=True)))
    workers = stream.workers
    if len(workers) and not any(isinstance(d["num_workers"], int) for d in settings):
        detail = workers_seen(workers)
        rows.append((min(workers.times), "dataloader", json.dumps(detail, sort_keys=True)))
    for time, detail in worker_lives(workers):
        rows.append((time, "dataloader_worker", json.dumps(detail, sort_keys=True)))
    rows.sort()
    n = len(rows)
    return pa.table(
        {
            "time": [r[0] for r in rows],
            "rank": [rank] * n,
            "local_rank": [local_rank] * n,
            "node": [node] * n,
            "pid": [pid] * n,
            "kind": [r[1] for r in rows],
            "detail": [r[2] for r in rows],
        },
        schema=EVENTS_SCHEMA,
    )


def loader_detail(args: dict[str, object]) -> dict[str, object]:
    """A ``dataloader`` event's detail from the predecessor's iterator arguments."""
    keys = ("num_workers", "batch_size", "prefetch_factor", "persistent_workers", "pin_memory")
    detail: dict[str, object] = {k: _plain(args.get(k)) for k in keys}
    detail["iterator"] = args.get("iterator")
    detail["source"] = "sagemaker"
    return detail


def worker_lives(workers: Workers) -> list[tuple[float, dict[str, object]]]:
    """One ``dataloader_worker`` event per worker (``worker_id`` and ``pid``): from its
    first event's start to its last event's end, with the number of its events and
    the seconds they span (``busy``). A trace that records a worker event per batch
    (a day: a quarter of a million a rank) gives a few events, not one per batch."""
    if not len(workers):
        return []
    ids, pids = np.array(workers.ids), np.array(workers.pids)
    start = np.array(workers.times, np.float64)
    dur = np.array(workers.durations, np.float64)
    keys, which = np.unique(np.column_stack([ids, pids]), axis=0, return_inverse=True)
    which = which.ravel()
    first = np.full(len(keys), np.inf)
    last = np.full(len(keys), -np.inf)
    np.minimum.at(first, which, start)
    np.maximum.at(last, which, start + dur)
    count = np.bincount(which, minlength=len(keys))
    busy = np.bincount(which, weights=dur, minlength=len(keys))
    out = []
    for k, (wid, pid) in enumerate(keys.tolist()):
        detail: dict[str, object] = {
            "worker_id": None if wid == NONE else wid,
            "pid": None if pid == NONE else pid,
            "duration": float(last[k] - first[k]),
            "events": int(count[k]),
            "busy": float(busy[k]),
            "source": "sagemaker",
        }
        out.append((float(first[k]), detail))
    return out


def workers_seen(workers: Workers) -> dict[str, object]:
    """A ``dataloader`` event's detail when no settings event gave ``num_workers``: the
    number of workers the worker events name (distinct ``worker_id``, else ``pid``),
    marked ``inferred``. A worker that never recorded an event is not counted."""
    ids, pids = set(workers.ids) - {NONE}, set(workers.pids) - {NONE}
    keys = ("num_workers", "batch_size", "prefetch_factor", "persistent_workers", "pin_memory")
    detail: dict[str, object] = dict.fromkeys(keys)
    detail["num_workers"] = len(ids or pids) or None
    detail["iterator"] = None
    detail["inferred"] = "num_workers: the distinct workers of the DataLoaderWorker events"
    detail["source"] = "sagemaker"
    return detail


def _plain(value: object) -> object:
    """The predecessor writes settings as strings ("4", "True"): back to numbers/bools."""
    if isinstance(value, str):
        low = value.strip().lower()
        if low in ("true", "false"):
            return low == "true"
        return _int(value)
    return value


def _int(value: object) -> int | None:
    try:
        return int(str(value)) if value is not None else None
    except ValueError:
        return None
