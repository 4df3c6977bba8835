"""The predecessor's framework timelines: Chrome-trace JSON arrays, one per node id.

A file ``<end_us>_<node id>_model_timeline.json`` holds ``M`` events (process names,
and ``start_time_since_epoch_in_micros``, the base of every ``ts``) and ``X`` events
(``ts``, ``dur`` in microseconds). The events used (docs/sagemaker.md): ``Step:ModeKeys.*``
(``args.step_num``), forward and backward events (by name or by their process name),
``DataLoaderIter::GetNext`` (a batch fetch), ``*DataLoaderIter*__init__`` /
``DataLoaderIterInitialize`` (the loader's settings in ``args``) and ``DataLoaderWorker``
(``args.worker_id``). Every other event stays in the kept trace (profiling/), counted.
"""

from __future__ import annotations

import json
import re
from array import array
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from stepscope.importers.sagemaker._tally import Tally

Span = tuple[float, float]
Floats = npt.NDArray[np.float64]
_PHASES = {"TRAIN": "train", "GLOBAL": "train", "EVAL": "eval", "PREDICT": "eval"}
_NODE_ID = re.compile(r"^(\d+)[-_](.+)$")


class Spans:
    """(start, end) spans in two arrays of doubles: a rank's day of events (a million
    spans) in 16 MB, not the 100 MB of as many tuples."""

    __slots__ = ("ends", "starts")

    def __init__(self) -> None:
        self.starts, self.ends = array("d"), array("d")

    def append(self, span: Span) -> None:
        self.starts.append(span[0])
        self.ends.append(span[1])

    def __len__(self) -> int:
        return len(self.starts)

    def columns(self) -> tuple[Floats, Floats]:
        """The starts and the ends as numpy arrays (copies)."""
        return np.array(self.starts, np.float64), np.array(self.ends, np.float64)


class StepLog:
    """The steps as the predecessor recorded them (their own start and end), columnar."""

    __slots__ = ("ends", "phases", "starts", "steps")

    def __init__(self) -> None:
        self.phases: list[str] = []
        self.steps = array("q")
        self.starts, self.ends = array("d"), array("d")

    def append(self, phase: str, step: int, start: float, end: float) -> None:
        self.phases.append(phase)
        self.steps.append(step)
        self.starts.append(start)
        self.ends.append(end)

    def __len__(self) -> int:
        return len(self.steps)


class Workers:
    """``DataLoaderWorker`` events: start, duration, ``worker_id`` and ``pid`` (-1: none)."""

    __slots__ = ("durations", "ids", "pids", "times")

    def __init__(self) -> None:
        self.times, self.durations = array("d"), array("d")
        self.ids, self.pids = array("q"), array("q")

    def append(self, time: float, duration: float, args: dict[str, object]) -> None:
        self.times.append(time)
        self.durations.append(duration)
        self.ids.append(_id(args.get("worker_id")))
        self.pids.append(_id(args.get("pid")))

    def __len__(self) -> int:
        return len(self.times)


def _id(value: object) -> int:
    try:
        return int(str(value)) if value is not None else NONE
    except ValueError:
        return NONE


NONE = -1  # an id the event did not give


@dataclass
class Stream:
    """Everything one trace node id recorded, in unix seconds."""

    node_id: str
    steps: StepLog = field(default_factory=StepLog)
    fetches: Spans = field(default_factory=Spans)
    forward: Spans = field(default_factory=Spans)
    backward: Spans = field(default_factory=Spans)
    loaders: list[tuple[float, dict[str, object]]] = field(default_factory=list)
    workers: Workers = field(default_factory=Workers)
    files: list[str] = field(default_factory=list)
    pids: set[int] = field(default_factory=set)
    # The earliest time its timeline records (a trace's start, its first event): the
    # process started at or before it (an imported rank's ``process_start``).
    first: float = float("inf")


def node_id_of(key: str) -> str:
    """The node id of a timeline file name (``<end_us>_<node id>_<kind>.json``)."""
    parts = key.rsplit("/", 1)[-1].split("_")
    return parts[1] if len(parts) >= 3 else parts[0]


def split_node_id(node_id: str) -> tuple[int | None, str]:
    """``0-algo-1`` -> (0, ``algo-1``): the number (a rank or a pid) and the host."""
    m = _NODE_ID.match(node_id)
    return (int(m.group(1)), m.group(2)) if m else (None, node_id)


def load_events(data: bytes, key: str, tally: Tally) -> list[dict[str, object]]:
    """A trace file's events; a file cut short (no closing ``]``) is read up to its cut."""
    text = data.decode("utf-8", "replace").strip()
    try:
        events = json.loads(text)
    except ValueError:
        try:  # the writer was killed: "[ev, ev, ev," with no "]"
            events = json.loads(text.rstrip().rstrip(",") + "]")
            tally.no_place("timeline files cut short (read up to the cut)", key)
        except ValueError:
            tally.no_place("unreadable timeline files", key)
            return []
    if isinstance(events, dict):
        events = events.get("traceEvents", [])
    return [e for e in events if isinstance(e, dict)] if isinstance(events, list) else []


def read_timeline(events: list[dict[str, object]], stream: Stream, tally: Tally) -> Span | None:
    """Add one file's events to the stream of its node id; returns the time they span
    (None without timed events)."""
    base, names = 0.0, {}
    first, last = float("inf"), float("-inf")
    for ev in events:
        args = ev.get("args") if isinstance(ev.get("args"), dict) else {}
        assert isinstance(args, dict)
        if ev.get("ph") == "M":
            if "start_time_since_epoch_in_micros" in args:
                base = float(args["start_time_since_epoch_in_micros"])
                stream.first = min(stream.first, base / 1e6)
            if ev.get("name") == "process_name" and "name" in args:
                names[ev.get("pid")] = str(args["name"])
    for ev in events:
        if ev.get("ph") != "X":
            if ev.get("ph") != "M":  # B/E pairs, counters, ...: in the kept trace only
                tally.read("timeline events kept in the trace only")
            continue
        try:
            start = (float(ev["ts"]) + base) / 1e6  # type: ignore[arg-type]
            span = (start, start + float(ev.get("dur") or 0.0) / 1e6)  # type: ignore[arg-type]
        except (KeyError, TypeError, ValueError):
            tally.no_place("timeline events without ts", str(ev.get("name")))
            continue
        args = ev.get("args") if isinstance(ev.get("args"), dict) else {}
        assert isinstance(args, dict)
        _place(str(ev.get("name", "")), names.get(ev.get("pid"), ""), span, args, stream, tally)
        first, last = min(first, span[0]), max(last, span[1])
    stream.first = min(stream.first, first)
    return (first, last) if first <= last else None


def _place(
    name: str, process: str, span: Span, args: dict[str, object], stream: Stream, tally: Tally
) -> None:
    pid = args.get("pid")
    if isinstance(pid, int):
        stream.pids.add(pid)
    if name.startswith("Step:"):
        mode = name.rsplit(".", 1)[-1]
        step = args.get("step_num", len(stream.steps))
        phase = _PHASES.get(mode, "eval")
        stream.steps.append(phase, int(str(step)), span[0], span[1])
        tally.read("timeline steps")
    elif name.endswith("DataLoaderIter::GetNext"):
        stream.fetches.append(span)
        tally.read("timeline data fetches")
    elif "DataLoaderIter" in name and ("__init__" in name or "Initialize" in name):
        stream.loaders.append((span[0], {**args, "iterator": name}))
        tally.read("timeline data loader settings")
    elif name.startswith("DataLoaderWorker"):
        stream.workers.append(span[0], span[1] - span[0], args)
        tally.read("timeline data loader worker events")
    elif name.lower().startswith("forward") or process.lower().startswith("forward"):
        stream.forward.append(span)
        tally.read("timeline forward events")
    elif name.lower().startswith("backward") or process.lower().startswith("backward"):
        stream.backward.append(span)
        tally.read("timeline backward events")
    else:
        tally.read("timeline events kept in the trace only")
