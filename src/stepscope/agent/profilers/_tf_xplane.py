"""Reading TensorFlow's profiler output (an XSpace protobuf, ``<host>.xplane.pb``).

Used by the TensorFlow windows' exports, on the agent's background thread: the
operator table of a ``detailed`` window (``_tf_detailed.py``) and the ``tf.data``
events of a ``dataloader`` window (``_tf_dataloader.py``). The protobuf classes are
TensorFlow's own (``xplane_pb2``); where this TensorFlow has none, :func:`load`
raises :class:`XPlaneUnavailable` and the window goes without (a fault record).

Times: an event starts at ``line.timestamp_ns + offset_ps / 1000`` nanoseconds after
the profile's start (``profile_start_time`` of the "Task Environment" plane, Unix
nanoseconds), and lasts ``duration_ps`` picoseconds.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

HOST_PLANE = "/host:CPU"
ENV_PLANE = "Task Environment"
# Where TensorFlow releases keep the XSpace protobuf class, newest first.
_MODULES = (
    "tensorflow.tsl.profiler.protobuf.xplane_pb2",
    "tsl.profiler.protobuf.xplane_pb2",
    "tensorflow.core.profiler.protobuf.xplane_pb2",
)


class XPlaneUnavailable(RuntimeError):
    """This TensorFlow has no XSpace protobuf class that stepscope knows."""


@dataclass(frozen=True)
class HostEvent:
    """One event of the host plane: its name, TensorFlow's display name, its thread
    (the line) and its start (Unix ns) and duration (ns)."""

    name: str
    display: str
    line: int
    start_ns: float
    dur_ns: float


def _xspace_class() -> Any:
    errors = []
    for name in _MODULES:
        try:
            return importlib.import_module(name).XSpace
        except (ImportError, AttributeError) as exc:
            errors.append(f"{name}: {type(exc).__name__}: {exc}")
    raise XPlaneUnavailable(
        "no XSpace protobuf class in this TensorFlow (tried " + "; ".join(errors) + "): "
        "the window has no table; its .xplane.pb still opens in TensorBoard's profile plugin"
    )


def load(data: bytes) -> Any:
    """The XSpace message of ``data`` (raises XPlaneUnavailable, or protobuf's DecodeError)."""
    space = _xspace_class()()
    space.ParseFromString(data)
    return space


def _start_ns(space: Any) -> int:
    """The profile's start (Unix ns); 0 when the space does not say it."""
    for plane in space.planes:
        if plane.name == ENV_PLANE:
            for stat in plane.stats:
                if plane.stat_metadata[stat.metadata_id].name == "profile_start_time":
                    return int(stat.uint64_value or stat.int64_value)
    return 0


def host_events(space: Any) -> Iterator[HostEvent]:
    """Every event of the host plane, line by line, each line in time order."""
    origin = _start_ns(space)
    for plane in space.planes:
        if plane.name != HOST_PLANE:
            continue
        names = {k: (m.name, m.display_name) for k, m in plane.event_metadata.items()}
        for index, line in enumerate(plane.lines):
            base = origin + line.timestamp_ns
            for ev in sorted(line.events, key=lambda e: e.offset_ps):
                name, display = names.get(ev.metadata_id, ("", ""))
                start = base + ev.offset_ps / 1e3
                yield HostEvent(name, display, index, start, ev.duration_ps / 1e3)


def is_tf_op(ev: HostEvent) -> bool:
    """A TensorFlow op's kernel: named ``<op name>:<op type>``, shown as its type."""
    return bool(ev.display) and ev.name.endswith(":" + ev.display) and "::" not in ev.name
