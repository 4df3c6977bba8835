"""The one path from a window's PyTorch trace to what is read of it: :class:`TraceViews`,
the base of the kernel and efficiency views of :class:`stepscope.read.Job` and what
the kernel rules read (``Job.window_trace``).

A trace is parsed once per process: the parsed trace is kept by its path and its
stamp (size and modification time; a trace written again is parsed again) while
anything still holds it (the kernel rules hold their windows' traces), and the last
one parsed is held besides, so a window's kernels and efficiency asked one after the
other share one parse. Nothing more is held: a dashboard serving many jobs keeps no
trace it is not using. The kernel breakdown is kept on disk beside the trace
(read/_kernel_cache.py), so that a later process does not parse the trace for it.
"""

from __future__ import annotations

import gzip
import weakref
import zlib
from collections.abc import Callable

from stepscope.errors import ConfigError
from stepscope.jobfolder import JsonObject
from stepscope.read._kernel_cache import cache_key
from stepscope.read._trace import Trace, load_trace
from stepscope.store import Store

TRACE_ENDINGS = (".pt.trace.json.gz", ".pt.trace.json")
WINDOW_COLUMNS = ("window", "window_kind", "rank", "start_step", "end_step")
_Key = tuple[str, tuple[int, ...] | None]


class TraceMemo:
    """Parsed traces by (path, stamp): those still held elsewhere, and the last one."""

    def __init__(self) -> None:
        self._held: weakref.WeakValueDictionary[_Key, Trace] = weakref.WeakValueDictionary()
        self._last: tuple[_Key, Trace] | None = None

    def get(self, key: _Key) -> Trace | None:
        if self._last is not None and self._last[0] == key:
            return self._last[1]
        return self._held.get(key)

    def put(self, key: _Key, trace: Trace) -> None:
        self._held[key] = trace
        self._last = (key, trace)


class TraceViews:
    """The windows that kept a PyTorch trace, each parsed once per process."""

    store: Store
    _traces: TraceMemo

    def profiling_artifacts(self) -> list[JsonObject]:
        raise NotImplementedError  # Job lists them

    def note_skipped(self, key: str, why: str) -> None:
        raise NotImplementedError  # Job records them

    def window_trace(self, record: JsonObject) -> Trace | str | None:
        """The parsed trace of one window record; None for a window without a PyTorch
        trace; a trace that cannot be read: why (and the file joins ``warnings``)."""
        path = record.get("path")
        if not isinstance(path, str) or not path.endswith(TRACE_ENDINGS):
            return None
        return self.trace_at(path)

    def trace_at(self, path: str) -> Trace | str:
        """The parsed trace at ``path`` (the parse of this process where one is held);
        a trace that cannot be read: why (and the file joins ``warnings``)."""
        keyed = cache_key(self.store, path)
        key: _Key = (path, None if keyed is None else tuple(keyed[1]))
        if (held := self._traces.get(key)) is not None:
            return held
        try:
            trace = load_trace(self.store.read_bytes(path))
        except (OSError, EOFError, ValueError, zlib.error, gzip.BadGzipFile) as exc:
            why = f"trace unreadable: {type(exc).__name__}: {exc}"
            self.note_skipped(path, why)
            return why  # not kept: a trace still being written may heal
        self._traces.put(key, trace)
        return trace

    def window_rows(
        self, rank: int | None, rows: Callable[[JsonObject], list[dict[str, object]]]
    ) -> list[dict[str, object]]:
        """The ``rows`` of each window record (of ``rank``; None: every rank)."""
        out: list[dict[str, object]] = []
        for record in self.profiling_artifacts():
            if rank is None or record.get("rank") == rank:
                out.extend(rows(record))
        return out


def check_top(method: str, top: int | None) -> None:
    """A clear error unless ``top`` is a positive integer or None."""
    if top is not None and (isinstance(top, bool) or not isinstance(top, int) or top < 1):
        raise ConfigError(f"{method}(top={top!r}) must be a positive integer, or None for all.")


def window_of(record: JsonObject) -> dict[str, object]:
    """The columns that name a window record's row: its trace's name, kind, rank, steps."""
    base = str(record.get("path", "")).rsplit("/", 1)[-1]
    name = next((base[: -len(e)] for e in TRACE_ENDINGS if base.endswith(e)), base)
    return {
        "window": name,
        "window_kind": record.get("kind"),
        "rank": record.get("rank"),
        "start_step": record.get("start_step"),
        "end_step": record.get("end_step"),
    }
