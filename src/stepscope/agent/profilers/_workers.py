"""Per-batch fetch times inside DataLoader worker processes.

The training process sees only how long it *waited* for a batch; with
``num_workers > 0`` the fetch itself happens in a worker. The agent wraps
torch's worker entry point (``_utils.worker._worker_loop``) at start; a worker
forked later runs the wrapper, which wraps the dataset fetchers
(``_MapDatasetFetcher.fetch``, ``_IterableDatasetFetcher.fetch``) in that worker
only: the training process's own fetches (``num_workers=0``) pay nothing. A
worker times a fetch only while a one-byte flag in an anonymous shared mapping
is set (a data-loader window is open): outside windows the cost is one byte read
per
batch. Timings go to one append-only file per worker process in a private
temporary folder (no locks, no shared ring to corrupt); the training process
reads them when the window closes. ``perf_counter`` is CLOCK_MONOTONIC on Linux,
the same clock in every process, so worker and training times compare.

Workers started with the ``spawn`` or ``forkserver`` context do not inherit the
wrapper: their fetch times are not recorded (docs/profiling.md says so).
"""

from __future__ import annotations

import contextlib
import mmap
import os
import shutil
import struct
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from time import perf_counter
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from torch.utils.data._utils.fetch import _BaseDatasetFetcher

RECORD = struct.Struct("<idd")  # worker id, fetch start, fetch end (perf_counter s)
FETCH_METRIC = "DataLoaderWorker.fetch"
MAX_ROWS = 100_000


# torch's ``_worker_loop``: its arguments pass through.
WorkerLoop = Callable[..., None]
F = TypeVar("F", bound="_BaseDatasetFetcher")

# The running timer's flag and folder, read by ``worker_loop`` in a forked worker
# (module state: a forked child inherits it; a spawned child starts without it).
_ACTIVE: tuple[mmap.mmap, str, WorkerLoop] | None = None


def worker_loop(*args: object, **kwargs: object) -> None:
    """torch's ``_worker_loop``, with the fetchers timed in this worker process.

    A module-level function: a ``spawn`` context pickles it by name, and the
    spawned worker (no ``_ACTIVE`` there) runs torch's loop untimed.
    """
    active = _ACTIVE
    if active is None:
        from torch.utils.data._utils import worker

        return worker._worker_loop(*args, **kwargs)
    flag, folder, original = active
    with contextlib.suppress(Exception):  # a worker has no fault boundary
        _time_fetchers(flag, folder)
    return original(*args, **kwargs)


def _time_fetchers(flag: mmap.mmap, folder: str) -> None:
    from torch.utils.data._utils import fetch

    for cls in (fetch._MapDatasetFetcher, fetch._IterableDatasetFetcher):
        setattr(cls, "fetch", _timed(cls.fetch, flag, folder))  # noqa: B010


class WorkerFetchTimer:
    """Installs the worker wrapper; switched on and off by data-loader windows."""

    def __init__(self) -> None:
        self._flag: mmap.mmap | None = None
        self._dir = ""
        self._original: WorkerLoop | None = None

    def install(self) -> None:
        global _ACTIVE
        from torch.utils.data._utils import worker

        self._flag = mmap.mmap(-1, 1)  # MAP_SHARED: forked workers see every change
        self._dir = tempfile.mkdtemp(prefix="stepscope-dlw-")
        self._original = worker._worker_loop
        _ACTIVE = (self._flag, self._dir, self._original)
        worker._worker_loop = worker_loop

    def remove(self) -> None:
        global _ACTIVE
        if self._original is not None:
            from torch.utils.data._utils import worker

            worker._worker_loop = self._original
            self._original = None
        _ACTIVE = None
        if self._flag is not None:
            self._flag.close()
            self._flag = None
        shutil.rmtree(self._dir, ignore_errors=True)

    def switch(self, on: bool) -> None:
        """Workers time their fetches from now on (``on``) or stop doing so."""
        if self._flag is not None and not self._flag.closed:
            self._flag[0] = 1 if on else 0

    def collect(self, t0: float, t1: float) -> list[tuple[int, int, float, float]]:
        """``(pid, worker_id, start, end)`` of the fetches that started in ``[t0, t1]``."""
        rows: list[tuple[int, int, float, float]] = []
        for name in sorted(os.listdir(self._dir)) if os.path.isdir(self._dir) else []:
            pid = int(name.split(".")[0])
            with open(os.path.join(self._dir, name), "rb") as f:
                data = f.read()
            usable = len(data) - len(data) % RECORD.size  # a worker may be mid-write
            for wid, start, end in RECORD.iter_unpack(data[:usable]):
                if t0 <= start <= t1 and len(rows) < MAX_ROWS:
                    rows.append((pid, wid, start, end))
            os.unlink(os.path.join(self._dir, name))  # each window reads its own
        return sorted(rows, key=lambda r: r[2])


@dataclass
class _Output:
    """A worker process's file of records, opened at its first timed fetch."""

    pid: int | None = None  # the process that opened ``fd`` (a fork inherits both)
    fd: int = -1


def _timed(
    original: Callable[[F, object], object], flag: mmap.mmap, folder: str
) -> Callable[[F, object], object]:
    out = _Output()

    def fetch(fetcher: F, index: object) -> object:
        if flag.closed or not flag[0]:
            return original(fetcher, index)
        t0 = perf_counter()
        batch = original(fetcher, index)
        _write(out, folder, t0, perf_counter())
        return batch

    return fetch


def _write(out: _Output, folder: str, t0: float, t1: float) -> None:
    """One record, unbuffered: a worker may end with ``os._exit`` (no flush)."""
    try:
        from torch.utils.data import get_worker_info

        info = get_worker_info()
        if info is None:  # num_workers=0: the training thread's wait is the fetch
            return
        if out.pid != os.getpid():  # first fetch in this (forked) process
            path = os.path.join(folder, f"{os.getpid()}.bin")
            out.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
            out.pid = os.getpid()
        os.write(out.fd, RECORD.pack(info.id, t0, t1))
    except Exception:  # a worker has no fault boundary: never break a batch
        return
