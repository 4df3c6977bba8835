"""Device timing logic with a stand-in for torch.cuda's events (no GPU on CI machines).

The real thing is exercised by tests/test_device_timing_gpu.py where a GPU exists.
"""

from __future__ import annotations

import itertools
from collections import deque

from stepscope.agent._cuda import DeviceTimer, resolve
from stepscope.agent._recorder import StepRecorder


class _Event:
    """Like torch.cuda.Event: ``record`` stamps a device clock; ``elapsed_time`` in ms."""

    clock = itertools.count(0, 5)  # the device advances 5 ms between two records
    synced = 0

    def __init__(self, enable_timing: bool = False) -> None:
        assert enable_timing
        self.t: int | None = None

    def record(self) -> None:
        self.t = next(self.clock)

    def synchronize(self) -> None:
        _Event.synced += 1

    def elapsed_time(self, end: _Event) -> float:
        assert self.t is not None and end.t is not None
        return float(end.t - self.t)


class _Cuda:
    Event = _Event


def test_each_part_is_timed_by_its_event_pair_and_summed_per_step():
    rows: deque = deque()
    rec = StepRecorder(rows, device=DeviceTimer(_Cuda()))
    for _ in range(2):  # gradient accumulation: two forwards and backwards
        rec.on_forward_start(0.0)
        rec.on_forward_end(0.1, training=True)
        rec.on_backward_start()
        rec.on_backward(0.1, 0.2)
    rec.on_optimizer_start(0.3)
    rec.on_optimizer_end(0.4)
    (row,) = rows
    device = resolve(row[-1])
    assert device == {"forward": 0.010, "backward": 0.010, "optimizer": 0.005}
    assert rec.device is not None and rec.device.take() == []  # handed over with the row


def test_cpu_steps_have_no_device_time():
    rows: deque = deque()
    rec = StepRecorder(rows)
    rec.on_optimizer_start(0.0)
    rec.on_optimizer_end(0.1)
    assert rows[0][-1] is None
    assert resolve(rows[0][-1]) == {"forward": None, "backward": None, "optimizer": None}
