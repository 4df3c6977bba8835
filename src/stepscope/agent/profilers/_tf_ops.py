"""The operator table of a TensorFlow ``detailed`` window, from its XSpace.

Rows have the schema of the PyTorch window's ``.operators.json`` (``_detailed.py``),
so the report, ``stepscope.open`` and the dashboard read both alike. One row per
TensorFlow op type run on the host (``MatMul``, ``_MklMatMul``, ``AddV2``...):

* ``count``: kernel executions of that type in the window;
* ``cpu_total_us``: the sum of their durations on their threads;
* ``self_cpu_us``: the same, less the time of other ops nested inside them on the
  same thread (a function-call op such as ``StatefulPartitionedCall`` run inline);
  work an op hands to other threads (Eigen's thread pool) is not subtracted;
* ``self_device_us``: 0 (host ops only; these machines have no GPU).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from stepscope.agent.profilers._tf_xplane import HostEvent, host_events, is_tf_op

Operator = dict[str, str | int | float]
TOP_OPERATORS = 50


def top_operators(space: Any, n: int = TOP_OPERATORS) -> list[Operator]:
    """The ``n`` op types with the most self time on the host (microseconds)."""
    return rows_of(host_events(space), n)


def rows_of(events: Iterable[HostEvent], n: int = TOP_OPERATORS) -> list[Operator]:
    """The table of ``events`` (each line's events in time order, as host_events gives)."""
    count: dict[str, int] = {}
    total: dict[str, float] = {}
    own: dict[str, float] = {}
    line, stack = -1, list[tuple[float, str]]()  # the ops open on this line: (end_ns, type)
    for ev in events:
        if not is_tf_op(ev):
            continue
        if ev.line != line:
            line, stack = ev.line, []
        while stack and stack[-1][0] <= ev.start_ns:
            stack.pop()
        if stack:  # nested in an op of this thread: not that op's own time
            own[stack[-1][1]] -= ev.dur_ns
        kind = ev.display
        count[kind] = count.get(kind, 0) + 1
        total[kind] = total.get(kind, 0.0) + ev.dur_ns
        own[kind] = own.get(kind, 0.0) + ev.dur_ns
        stack.append((ev.start_ns + ev.dur_ns, kind))
    rows: list[Operator] = [
        {
            "name": kind,
            "count": count[kind],
            "self_cpu_us": max(own[kind], 0.0) / 1e3,
            "cpu_total_us": total[kind] / 1e3,
            "self_device_us": 0.0,
        }
        for kind in count
    ]
    rows.sort(key=lambda r: float(r["self_cpu_us"]), reverse=True)
    return rows[:n]
