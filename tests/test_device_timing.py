"""Device timing logic with a stand-in for torch.cuda's events (no GPU on CI machines).

The real thing is exercised by tests/test_device_timing_gpu.py where a GPU exists.
"""

from __future__ import annotations

import itertools
import sys
from collections import deque
from pathlib import Path

from stepscope.agent._cuda import DeviceSampler, DeviceTimer, resolve
from stepscope.agent._recorder import StepRecorder


class _Event:
    """Like torch.cuda.Event: ``record`` stamps a device clock; ``elapsed_time`` in ms."""

    clock = itertools.count(0, 5)  # the device advances 5 ms between two records
    synced = 0
    made = 0

    def __init__(self, enable_timing: bool = False) -> None:
        assert enable_timing
        self.t: int | None = None
        _Event.made += 1

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


def _train(rec: StepRecorder, steps: int, step_s: float, t0: float = 0.0) -> float:
    """``steps`` training steps of ``step_s`` host seconds each, by the recorder's API."""
    t = t0
    for _ in range(steps):
        rec.on_forward_start(t)
        rec.on_forward_end(t + step_s / 4, training=True)
        rec.on_backward_start()
        rec.on_backward(t + step_s / 4, t + step_s / 2)
        rec.on_optimizer_start(t + step_s / 2)
        t += step_s
        rec.on_optimizer_end(t)
    return t


def _timed(rows: deque) -> list[int]:
    return [row[1] for row in rows if row[-1]]


def test_short_steps_are_timed_once_per_period():
    rows: deque = deque()
    rec = StepRecorder(rows)
    sampler = DeviceSampler(rec, DeviceTimer(_Cuda()), period_s=0.05)
    sampler.attach()
    _train(rec, 2000, 0.001)  # 1 ms steps: one timed step in 50
    timed = _timed(rows)
    assert timed[:2] == [0, 1]  # timed from the start, until the step time is known
    gaps = [b - a for a, b in itertools.pairwise(timed[2:])]
    assert gaps and all(g == 50 for g in gaps), gaps
    assert 38 <= len(timed) <= 42  # 2 s of training, one per 50 ms
    for row in rows:  # a timed step has every part; the others none
        parts = resolve(row[-1])
        assert (row[1] in timed) == all(v is not None and v > 0 for v in parts.values())


def test_steps_longer_than_the_period_are_all_timed():
    rows: deque = deque()
    rec = StepRecorder(rows)
    DeviceSampler(rec, DeviceTimer(_Cuda()), period_s=0.05).attach()
    _train(rec, 30, 0.08)
    assert _timed(rows) == list(range(30))


def test_the_stride_follows_the_step_time():
    rows: deque = deque()
    rec = StepRecorder(rows)
    DeviceSampler(rec, DeviceTimer(_Cuda()), period_s=0.05).attach()
    t = _train(rec, 500, 0.001)  # one in 50
    n = len(rows)
    _train(rec, 100, 0.1, t0=t)  # slower steps: every one, once the wait for 50 is over
    assert _timed(rows)[-50:] == list(range(n + 50, n + 100))


def test_the_sampler_ignores_boundaries_it_did_not_ask_for():
    rows: deque = deque()
    rec = StepRecorder(rows)
    sampler = DeviceSampler(rec, DeviceTimer(_Cuda()), period_s=0.05)
    sampler.attach()
    rec.listen(lambda phase, step, t: None)  # another listener: called at every step
    _train(rec, 1000, 0.001)
    timed = _timed(rows)
    assert 18 <= len(timed) <= 22 and all(b - a == 50 for a, b in itertools.pairwise(timed[2:]))
    sampler.detach()
    _train(rec, 100, 0.001)
    assert _timed(rows) == timed and rec.device is None


def test_resolved_events_are_recorded_again():
    rows: deque = deque()
    timer = DeviceTimer(_Cuda())
    rec = StepRecorder(rows, device=timer)
    made0 = _Event.made
    for _ in range(10):
        _train(rec, 1, 0.01)
        resolve(rows.popleft()[-1])
    assert _Event.made - made0 == 6  # the first step's six events, then the pool's


def test_the_cpu_stand_in_benchmark_counts_few_events_and_reuses_them():
    """benchmarks/device_timer.py (an H200's event costs on the CPU): counted, not timed.
    Sampled, 200 steps of 100 us: one timed step a period of their training (two
    first, while the stride is unknown), six events each; every step: six a step,
    the events the sampled block's steps gave back to the pool taken again."""
    from stepscope.agent import _cuda

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    try:
        import device_timer as bench
    finally:
        sys.path.pop(0)
    bench.COSTS_US.update(dict.fromkeys(bench.COSTS_US, 0.0))  # counts, not costs
    counts = bench.StandInEvent.counts
    counts.update(dict.fromkeys(counts, 0))
    _cuda._FREE.pop(bench.StandInEvent, None)  # no events left by an earlier run
    train_s, _, timed = bench.block("sampled", 200, 100.0)
    # How many periods the 200 steps take is the machine's (a few on a quiet one, more
    # on a loaded one): the bound is per period of the training's own seconds (x2: a
    # step slowed by the machine shortens the next stride once).
    periods = train_s / _cuda.SAMPLE_PERIOD_S
    assert 2 <= timed <= 3 + 2 * periods, (timed, train_s)
    assert counts["record"] == 6 * timed and counts["make"] == 6 * timed
    pooled = min(6 * timed, 256)  # resolved after the block: back to the (bounded) pool
    counts.update(dict.fromkeys(counts, 0))
    _, _, timed = bench.block("every step", 200, 100.0)
    assert timed == 200 and counts["record"] == 1200 and counts["elapsed_time"] == 600
    assert counts["make"] == 1200 - pooled, (counts, pooled)  # the pool's events reused
