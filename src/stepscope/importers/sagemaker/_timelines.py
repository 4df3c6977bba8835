"""Timeline files -> steps/ and events/ of each rank, the files themselves kept."""

from __future__ import annotations

import gzip
from collections.abc import Callable

from stepscope.importers.sagemaker._ranks import RankOf, assign
from stepscope.importers.sagemaker._segments import write_table
from stepscope.importers.sagemaker._steps import events_table, steps_table
from stepscope.importers.sagemaker._tally import Tally
from stepscope.importers.sagemaker._trace import Stream, load_events, node_id_of, read_timeline
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
    """Read every model timeline, write each rank's steps and events; returns the ranks."""
    streams: dict[str, Stream] = {}
    for key in keys:
        stream = streams.setdefault(node_id_of(key), Stream(node_id_of(key)))
        data = src.read_bytes(key)
        read_timeline(load_events(data, key, tally), stream, tally)
        stream.files.append(key)
        tally.read("timeline files")
    ranks, how = assign(sorted(streams))
    if ranks:
        tally.read(f"ranks from {how}", len(ranks))
    for nid, stream in sorted(streams.items()):
        where = ranks[nid]
        pid = where.pid or (min(stream.pids) if stream.pids else 0)
        steps = steps_table(stream, where.rank, where.local_rank, where.node, pid)
        if steps.num_rows:
            write_table(out, paths.steps_stream(where.rank), steps, "start")
            seen(
                float(steps.column("start")[0].as_py()), float(max(steps.column("end").to_pylist()))
            )
            tally.read("steps", steps.num_rows)
        events = events_table(stream, where.rank, where.local_rank, where.node, pid)
        if events.num_rows:
            write_table(out, paths.events_stream(where.rank), events, "time")
        _keep(src, out, stream, where, steps.column("step").to_pylist() if steps.num_rows else [])
    return ranks


def _keep(src: Store, out: Store, stream: Stream, where: RankOf, steps: list[int]) -> None:
    """Each timeline file, gzipped as a Chrome trace Perfetto opens, with a window record."""
    first, last = (min(steps), max(steps)) if steps else (0, 0)
    for i, key in enumerate(stream.files):
        data = gzip.compress(src.read_bytes(key), mtime=0)  # mtime 0: the same bytes each time
        write_window(out, where.rank, "detailed", (first, last), i,
                     {".pt.trace.json.gz": data}, key)  # fmt: skip
