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
from dataclasses import dataclass, field

from stepscope.importers.sagemaker._tally import Tally

Span = tuple[float, float]
_PHASES = {"TRAIN": "train", "GLOBAL": "train", "EVAL": "eval", "PREDICT": "eval"}
_NODE_ID = re.compile(r"^(\d+)[-_](.+)$")


@dataclass
class PredStep:
    """One step as the predecessor recorded it: its own start and end."""

    phase: str
    step: int
    start: float
    end: float


@dataclass
class Stream:
    """Everything one trace node id recorded, in unix seconds."""

    node_id: str
    steps: list[PredStep] = field(default_factory=list)
    fetches: list[Span] = field(default_factory=list)
    forward: list[Span] = field(default_factory=list)
    backward: list[Span] = field(default_factory=list)
    loaders: list[tuple[float, dict[str, object]]] = field(default_factory=list)
    workers: list[tuple[float, float, dict[str, object]]] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    pids: set[int] = field(default_factory=set)


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
        stream.steps.append(PredStep(phase, int(str(step)), span[0], span[1]))
        tally.read("timeline steps")
    elif name.endswith("DataLoaderIter::GetNext"):
        stream.fetches.append(span)
        tally.read("timeline data fetches")
    elif "DataLoaderIter" in name and ("__init__" in name or "Initialize" in name):
        stream.loaders.append((span[0], {**args, "iterator": name}))
        tally.read("timeline data loader settings")
    elif name.startswith("DataLoaderWorker"):
        stream.workers.append((span[0], span[1] - span[0], dict(args)))
        tally.read("timeline data loader worker events")
    elif name.lower().startswith("forward") or process.lower().startswith("forward"):
        stream.forward.append(span)
        tally.read("timeline forward events")
    elif name.lower().startswith("backward") or process.lower().startswith("backward"):
        stream.backward.append(span)
        tally.read("timeline backward events")
    else:
        tally.read("timeline events kept in the trace only")
