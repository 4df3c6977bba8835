"""Data-loader profiling: every batch's fetch and the wait it caused, and the workers.

The agent's hook on ``_BaseDataLoaderIter.__next__`` already times every batch
(``StepRecorder.on_data``); during a window the recorder also hands each batch
to :meth:`DataloaderProfiler.on_batch`. With ``num_workers=0`` the training
thread fetches the batch itself, so the wait *is* the fetch time; with workers
the wait is what the workers did not hide; each worker's fetch of each batch is
timed inside the worker (``_workers.py``), and the workers' CPU time over the
window is measured from the process's multiprocessing children.

Metric names, filtered by ``metrics_regex`` (``re.search``):
``DataLoader.wait`` (one row per batch), ``DataLoaderWorker.fetch`` (one row
per batch fetched by a worker) and ``DataLoaderWorker.cpu`` (one row per
worker process).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from stepscope.agent.profilers._sink import JSON, ArtifactSink, Export, Finish
from stepscope.agent.profilers._workers import FETCH_METRIC
from stepscope.config import ProfilingWindow

if TYPE_CHECKING:
    from stepscope.agent._recorder import StepRecorder

BATCH_METRIC = "DataLoader.wait"
WORKER_METRIC = "DataLoaderWorker.cpu"
MAX_BATCHES = 100_000  # a bound on the rows one window keeps


# The rows of the window's file (``<base>.dataloader.json``), one class per metric.
@dataclass(frozen=True)
class BatchWait:
    """The training process's wait for one batch (its start and end: wall time)."""

    step: int
    batch: int  # within the step
    start: float
    end: float
    wait_s: float
    metric: str = BATCH_METRIC


@dataclass(frozen=True)
class WorkerFetch:
    """One batch fetched by a DataLoader worker (its start and end: wall time)."""

    pid: int
    worker: int
    start: float
    end: float
    fetch_s: float
    metric: str = FETCH_METRIC


@dataclass(frozen=True)
class WorkerCPU:
    """A worker process's CPU over the window."""

    pid: int
    name: str
    cpu_s: float
    cpu_percent: float | None
    metric: str = WORKER_METRIC


# What a window collected: its batches, worker fetches, worker CPU, and its length (s).
Collected = tuple[list[BatchWait], list[WorkerFetch], list[WorkerCPU], float]


def _children_cpu() -> dict[int, tuple[float, float, str]]:
    """CPU seconds, creation time and name of each worker process of this process.

    ``multiprocessing.active_children()`` knows the DataLoader workers without a scan
    of every process on the machine (what ``psutil.Process().children()`` does).
    """
    import multiprocessing

    import psutil

    out = {}
    for child in multiprocessing.active_children():
        try:
            proc = psutil.Process(child.pid)
            cpu = proc.cpu_times()
            out[proc.pid] = (cpu.user + cpu.system, proc.create_time(), child.name)
        except (psutil.Error, TypeError):
            continue
    return out


class DataloaderProfiler:
    """Collects batch timings from the recorder while the window is open."""

    kind = "dataloader"

    def __init__(
        self, window: ProfilingWindow, recorder: StepRecorder, wall: Callable[[float], float]
    ) -> None:
        self.regex = re.compile(window.metrics_regex or ".*")
        self.recorder, self.wall = recorder, wall
        self.batches: list[tuple[int, float, float]] = []
        self._workers0: dict[int, tuple[float, float, str]] = {}
        self._t0 = 0.0

    def on_batch(self, t0: float, t1: float) -> None:
        """One batch left ``__next__`` (training thread; O(1))."""
        if len(self.batches) < MAX_BATCHES:
            self.batches.append((self.recorder.train_steps, t0, t1))

    def start(self) -> None:
        import time

        self._t0 = time.perf_counter()
        if self.regex.search(WORKER_METRIC):
            self._workers0 = _children_cpu()
        self.recorder.on_batch = self.on_batch
        self._fetch_timer(True)

    def stop(self) -> Finish:
        rows = self.collect()
        return lambda sink, base: _export(sink, base, *rows)

    def collect(self) -> Collected:
        """Stop collecting: the window's rows and its length (training thread)."""
        import time

        self.recorder.on_batch = None
        self._fetch_timer(False)
        t1 = time.perf_counter()
        seconds = t1 - self._t0
        workers1 = _children_cpu() if self.regex.search(WORKER_METRIC) else {}
        workers = _worker_rows(self._workers0, workers1, seconds)
        return self._batch_rows(), self._fetch_rows(t1), workers, seconds

    def _fetch_timer(self, on: bool) -> None:
        timer = self.recorder.worker_fetch
        if timer is not None and self.regex.search(FETCH_METRIC):
            timer.switch(on)

    def _fetch_rows(self, t1: float) -> list[WorkerFetch]:
        timer = self.recorder.worker_fetch
        if timer is None or not self.regex.search(FETCH_METRIC):
            return []
        return [
            WorkerFetch(pid, wid, self.wall(start), self.wall(end), end - start)
            for pid, wid, start, end in timer.collect(self._t0, t1)
        ]

    def _batch_rows(self) -> list[BatchWait]:
        if not self.regex.search(BATCH_METRIC):
            return []
        rows: list[BatchWait] = []
        per_step: dict[int, int] = {}
        for step, t0, t1 in self.batches:
            per_step[step] = per_step.get(step, -1) + 1
            rows.append(BatchWait(step, per_step[step], self.wall(t0), self.wall(t1), t1 - t0))
        return rows


def _worker_rows(
    before: dict[int, tuple[float, float, str]],
    after: dict[int, tuple[float, float, str]],
    seconds: float,
) -> list[WorkerCPU]:
    rows = []
    for pid, (cpu1, created, name) in sorted(after.items()):
        first = before.get(pid)
        cpu0 = first[0] if first is not None and first[1] == created else 0.0
        busy = max(cpu1 - cpu0, 0.0)
        percent = 100.0 * busy / seconds if seconds > 0 else None
        rows.append(WorkerCPU(pid, name, busy, percent))
    return rows


def _export(
    sink: ArtifactSink,
    base: str,
    batches: list[BatchWait],
    fetched: list[WorkerFetch],
    workers: list[WorkerCPU],
    seconds: float,
    summary_extra: dict[str, JSON] | None = None,
    doc_extra: dict[str, JSON] | None = None,
) -> Export:
    """Write ``<base>.dataloader.json``; ``*_extra``: a TensorFlow window's additions
    to the summary and the file (``_tf_dataloader.py``)."""
    waits = sorted(b.wait_s for b in batches)
    fetches = sorted(f.fetch_s for f in fetched)
    summary: dict[str, JSON] = {
        "batches": len(waits),
        "worker_fetches": len(fetches),
        "fetch_p50_s": fetches[len(fetches) // 2] if fetches else None,
        "fetch_max_s": fetches[-1] if fetches else None,
        "wait_total_s": sum(waits),
        "wait_p50_s": waits[len(waits) // 2] if waits else None,
        "wait_max_s": waits[-1] if waits else None,
        "window_s": seconds,
        "workers": len(workers),
        **(summary_extra or {}),
    }
    rows = [dataclasses.asdict(b) for b in batches] + [dataclasses.asdict(f) for f in fetched]
    doc: dict[str, JSON] = {
        "summary": summary,
        "batches": rows,
        "workers": [dataclasses.asdict(w) for w in workers],
        **(doc_extra or {}),
    }
    path = sink.write_json(f"{base}.dataloader.json", doc)
    return Export(path, [path] if path else [], {"summary": summary})
