"""The caching allocator's counters per step (``cuda_allocated``, ``cuda_reserved``,
``cuda_peak``): read at a timed step's end from the allocator's own books (a stand-in
with the real counter names here: tests/cuda_allocator.py; the real one in
tests/test_cuda_memory_gpu.py), written as step columns, and judged by CUDAMemory."""

from __future__ import annotations

from collections import deque

from cuda_allocator import MB, StandInAllocator, StandInEvent
from stepscope.agent._clock import Clock
from stepscope.agent._cuda import DeviceSampler, DeviceTimer, memory_of, resolve
from stepscope.agent._cuda_memory import MemoryReader, MemoryReading, read_memory
from stepscope.agent._faults import FaultBoundary
from stepscope.agent._recorder import StepRecorder
from stepscope.agent._stepbuf import PyStepBuffer, columns
from stepscope.agent._writer import AgentWriter, Identity
from stepscope.jobfolder import AGENT_STEPS_SCHEMA
from stepscope.store import open_store


class _Cuda:
    Event = StandInEvent


def test_the_reading_takes_the_real_counter_names():
    alloc = StandInAllocator()
    kept = [alloc.malloc(3 * MB), alloc.malloc(700 * 1024)]
    alloc.free(alloc.malloc(40 * MB))  # freed: cached, still reserved; the peak saw it
    stats = alloc.memory_stats_as_nested_dict()
    assert read_memory(alloc) == MemoryReading(
        stats["allocated_bytes"]["all"]["current"],  # type: ignore[index]
        stats["reserved_bytes"]["all"]["current"],  # type: ignore[index]
        stats["allocated_bytes"]["all"]["peak"],  # type: ignore[index]
    )
    reading = read_memory(alloc)
    assert reading is not None and kept
    assert reading.allocated == 3 * MB + 700 * 1024
    assert reading.reserved == 20 * MB + 2 * MB + 40 * MB  # segments stay cached
    assert reading.peak == reading.allocated + 40 * MB


def test_an_allocator_without_counters_gives_no_reading():
    class Empty:  # torch before CUDA starts: an empty dict
        def memory_stats_as_nested_dict(self) -> dict[str, object]:
            return {}

    assert read_memory(Empty()) is None


def test_a_failing_read_is_recorded_once_and_turns_the_reading_off():
    class Broken:
        calls = 0

        def memory_stats_as_nested_dict(self) -> dict[str, object]:
            Broken.calls += 1
            raise RuntimeError("CUDA error: an illegal memory access was encountered")

    faults: list[tuple[str, BaseException]] = []
    reader = MemoryReader(Broken(), lambda c, e: faults.append((c, e)))
    assert reader() is None and reader() is None
    assert Broken.calls == 1 and [c for c, _ in faults] == ["cuda-memory"]


def _train(rec: StepRecorder, alloc: StandInAllocator, steps: int, step_s: float) -> None:
    t = 0.0
    for _ in range(steps):
        rec.on_forward_start(t)
        alloc.free(alloc.malloc(64 * MB))  # activations, freed by the backward
        alloc.malloc(2 * MB)  # and a tensor kept across steps
        rec.on_forward_end(t + step_s / 2, training=True)
        rec.on_optimizer_start(t + step_s / 2)
        t += step_s
        rec.on_optimizer_end(t)


def test_timed_steps_carry_a_reading_into_the_step_columns():
    alloc, rows = StandInAllocator(), deque()
    rec = StepRecorder(rows)
    reader = MemoryReader(alloc, lambda c, e: None)
    DeviceSampler(rec, DeviceTimer(_Cuda(), reader), period_s=0.05).attach()
    _train(rec, alloc, 200, 0.005)  # 5 ms steps: one timed in 10
    marks = [row[-1] for row in rows]
    readings = [memory_of(m) for m in marks]
    timed = [i for i, m in enumerate(marks) if m]
    assert 15 <= len(timed) <= 25
    assert all(readings[i] is not None for i in timed)  # every timed step read it...
    assert all(r is None for i, r in enumerate(readings) if i not in timed)  # ...no other
    times = resolve(marks[timed[-1]])  # the device times still resolve beside the reading
    assert times["forward"] is not None and times["optimizer"] is not None
    last = readings[timed[-1]]
    assert last is not None and last.allocated == (timed[-1] + 1) * 2 * MB
    assert last.peak == last.allocated - 2 * MB + 64 * MB  # the steps before + activations

    batch = _writer()._steps_batch(columns(list(rows), 0.0, 0.0))  # as the writer writes it
    batch.validate(full=True)
    assert batch.schema == AGENT_STEPS_SCHEMA
    allocated = batch.column("cuda_allocated").to_pylist()
    assert [i for i, v in enumerate(allocated) if v is not None] == timed
    assert allocated[timed[-1]] == last.allocated  # null, never 0, on the other steps
    assert batch.column("cuda_peak").to_pylist()[timed[-1]] == last.peak
    assert batch.column("gpu_forward").to_pylist()[timed[-1]] is not None


def test_a_cpu_job_has_null_allocator_columns():
    rows: deque = deque()
    rec = StepRecorder(rows)
    _train(rec, StandInAllocator(), 3, 0.01)
    batch = _writer()._steps_batch(columns(list(rows), 0.0, 0.0))
    assert batch.column("cuda_reserved").to_pylist() == [None] * 3


def _writer() -> AgentWriter:
    store = open_store("memory://cuda-memory")
    faults = FaultBoundary(store, {})
    return AgentWriter(store, Identity(0, 0, "n1", 9), Clock(), faults, PyStepBuffer())
