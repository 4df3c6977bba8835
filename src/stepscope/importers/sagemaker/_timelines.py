"""Timeline files -> steps/ and events/ of each rank, the files themselves kept."""

from __future__ import annotations

import gzip
from collections.abc import Callable

import numpy as np
import pyarrow as pa

from stepscope.importers.sagemaker._ranks import RankOf, assign
from stepscope.importers.sagemaker._segments import write_table
from stepscope.importers.sagemaker._steps import events_table, steps_table
from stepscope.importers.sagemaker._tally import Tally
from stepscope.importers.sagemaker._trace import (
    Span,
    Stream,
    load_events,
    node_id_of,
    read_timeline,
)
from stepscope.importers.sagemaker._windows import write_window
from stepscope.jobfolder import paths
from stepscope.store import Store


def import_timelines(
    src: Store,
    keys: list[str],
    out: Store,
    tally: Tally,
    seen: Callable[[float, float], None],
) -> dict[str, RankOf]:
    """Read every model timeline, write each rank's steps and events; returns the ranks.

    One node id (one rank) at a time: its files are read, converted, written and
    kept, then dropped before the next rank's, so memory holds one rank's events,
    never the node's (a day of 8 ranks is ~14 million events)."""
    by_id: dict[str, list[str]] = {}
    for key in keys:
        by_id.setdefault(node_id_of(key), []).append(key)
    ranks, how = assign(sorted(by_id))
    if ranks:
        tally.read(f"ranks from {how}", len(ranks))
    for nid, files in sorted(by_id.items()):
        stream = Stream(nid)
        spans: dict[str, tuple[list[int], Span | None]] = {}  # per file: its steps, its time
        for key in files:
            before = len(stream.steps)
            span = read_timeline(load_events(src.read_bytes(key), key, tally), stream, tally)
            spans[key] = (stream.steps.steps[before:].tolist(), span)
            stream.files.append(key)
            tally.read("timeline files")
        _write_rank(src, out, stream, ranks[nid], spans, tally, seen)
    return ranks


def _write_rank(
    src: Store,
    out: Store,
    stream: Stream,
    where: RankOf,
    spans: dict[str, tuple[list[int], Span | None]],
    tally: Tally,
    seen: Callable[[float, float], None],
) -> None:
    """One rank's steps and events, and its files kept."""
    pid = where.pid or (min(stream.pids) if stream.pids else 0)
    steps = steps_table(stream, where.rank, where.local_rank, where.node, pid)
    if steps.num_rows:
        write_table(out, paths.steps_stream(where.rank), steps, "start")
        seen(float(steps.column("start")[0].as_py()), float(max(steps.column("end").to_pylist())))
        tally.read("steps", steps.num_rows)
    events = events_table(stream, where.rank, where.local_rank, where.node, pid)
    if events.num_rows:
        write_table(out, paths.events_stream(where.rank), events, "time")
    _keep(src, out, stream, where, steps, spans)


def _keep(
    src: Store,
    out: Store,
    stream: Stream,
    where: RankOf,
    steps: pa.Table,
    spans: dict[str, tuple[list[int], Span | None]],
) -> None:
    """Each timeline file, gzipped as a Chrome trace Perfetto opens, with a window record
    labelled by its own steps (:func:`file_steps`)."""
    seen: dict[tuple[int, int], int] = {}
    for key in stream.files:
        label = file_steps(*spans[key], steps)
        index = seen[label] = seen.get(label, -1) + 1  # two files of one range: -2, -3, ...
        data = gzip.compress(src.read_bytes(key), mtime=0)  # mtime 0: the same bytes each time
        write_window(out, where.rank, "detailed", label, index,
                     {".pt.trace.json.gz": data}, key)  # fmt: skip


def file_steps(own: list[int], span: Span | None, steps: pa.Table) -> tuple[int, int]:
    """The step range of one timeline file: the steps it records; without any, the
    rank's steps its events overlap in time; without those, the rank's whole range
    (0-0 for a rank without steps)."""
    if own:
        return min(own), max(own)
    numbers = steps.column("step").to_numpy() if steps.num_rows else np.empty(0, np.int64)
    if span is not None and len(numbers):
        start = steps.column("start").to_numpy()
        end = steps.column("end").to_numpy()
        inside = numbers[(start < span[1]) & (end > span[0])]
        if len(inside):
            return int(inside.min()), int(inside.max())
    return (int(numbers.min()), int(numbers.max())) if len(numbers) else (0, 0)
