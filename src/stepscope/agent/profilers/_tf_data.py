"""``tf.data``'s trace events in an XSpace: the batch waits and the pipeline stages.

Every ``GetNext`` of a ``tf.data`` iterator is traced as an event named by its place
in the pipeline: ``Iterator::Root`` (the pipeline's output: what the training waits
on), ``Iterator::Root::Prefetch``, ``Iterator::Root::Prefetch::MapAndBatch``...
(TensorFlow shows it as ``Iterator::Prefetch``...). Stages that run on background
threads (prefetch, parallel map) are traced there, so a stage's time is the time its
consumer waited for an element, not CPU time.
"""

from __future__ import annotations

import statistics
from bisect import bisect_right
from dataclasses import dataclass

from stepscope.agent.profilers import _tf_xplane as xplane
from stepscope.agent.profilers._dataloader import BatchWait
from stepscope.agent.profilers._sink import JSON

STAGE_METRIC = "TFData.stage"
ROOT = "Iterator::Root"
PREFIX = "Iterator::"
MAX_WAITS = 100_000  # as many rows as a Python-next window keeps


@dataclass(frozen=True)
class TFDataRows:
    """The window's waits (one per root ``GetNext``) and its stages' summaries."""

    waits: list[BatchWait]
    stages: list[dict[str, JSON]]


def read(planes: list[bytes], starts: list[tuple[int, int]]) -> TFDataRows:
    """The rows of the XSpaces ``planes``; ``starts``: (training step, Unix ns of its
    start) in order, from the window's first step: a wait belongs to the step it began in."""
    roots: list[tuple[float, float]] = []
    times: dict[str, list[float]] = {}
    shown: dict[str, str] = {}
    for data in planes:
        for ev in xplane.host_events(xplane.load(data)):
            if not ev.name.startswith(PREFIX):
                continue
            times.setdefault(ev.name, []).append(ev.dur_ns / 1e9)
            shown.setdefault(ev.name, ev.display or ev.name)
            if ev.name == ROOT:
                roots.append((ev.start_ns, ev.dur_ns))
    return TFDataRows(_waits(sorted(roots), starts), _stages(times, shown))


def _waits(roots: list[tuple[float, float]], starts: list[tuple[int, int]]) -> list[BatchWait]:
    at = [t for _s, t in starts]
    rows: list[BatchWait] = []
    per_step: dict[int, int] = {}
    for start_ns, dur_ns in roots[:MAX_WAITS]:
        i = max(bisect_right(at, start_ns) - 1, 0)
        step = starts[i][0] if starts else 0
        per_step[step] = per_step.get(step, -1) + 1
        start = start_ns / 1e9
        rows.append(BatchWait(step, per_step[step], start, start + dur_ns / 1e9, dur_ns / 1e9))
    return rows


def _stages(times: dict[str, list[float]], shown: dict[str, str]) -> list[dict[str, JSON]]:
    """One summary row per stage, in pipeline order (the root first)."""
    return [
        {
            "metric": STAGE_METRIC,
            "stage": name,
            "name": shown[name],
            "count": len(times[name]),
            "total_s": sum(times[name]),
            "median_s": statistics.median(times[name]),
            "max_s": max(times[name]),
        }
        for name in sorted(times, key=lambda n: (n.count("::"), n))
    ]
