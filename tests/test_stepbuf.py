"""The step buffer between recorder and writer (agent/_stepbuf.c and _stepbuf.py)."""

from __future__ import annotations

import gc
import math
import random
import threading
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import stepscope
from stepscope.agent import _recorder
from stepscope.agent._clock import Clock
from stepscope.agent._faults import FaultBoundary
from stepscope.agent._stepbuf import PyStepBuffer, columns, new_step_buffer
from stepscope.agent._writer import AgentWriter, Identity
from stepscope.store import open_store

PERF0, WALL0 = 1000.0, 1.7e9


def _c_buffer() -> Any:
    return pytest.importorskip("stepscope.agent._native").StepBuffer()


def _rows(n: int, seed: int = 0) -> list[tuple[Any, ...]]:
    rnd = random.Random(seed)
    rows, t = [], PERF0 + 5.0
    for i in range(n):
        dur = rnd.uniform(1e-4, 0.05)
        parts = [rnd.uniform(0, dur / 3) for _ in range(4)]
        if i % 97 == 5:
            parts[1] = dur * 2  # parts longer than the step: "other" is 0, not negative
        outside = rnd.choice([0.0, dur / 10])
        phase = "eval" if i % 7 == 3 else "train"
        rows.append((phase, i, t, t + dur, *parts, outside * 2, outside, i % 11 == 0, None))
        t += dur
    return rows


def _fill(buf: Any, rows: list[tuple[Any, ...]]) -> Any:
    for row in rows:
        buf.append(row)
    return buf


def test_the_c_and_python_buffers_give_the_same_bytes() -> None:
    rows = _rows(2500)  # past the C buffer's first growth (1,024 rows)
    rows[10] = (*rows[10][:5], math.nan, *rows[10][6:])  # a NaN part stays NaN in "other"
    rows[11] = ("train", 11, -0.0, -0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, False, [])  # +0.0
    c, py = _fill(_c_buffer(), rows), _fill(PyStepBuffer(), rows)
    assert len(c) == len(py) == 2500
    got, want = c.take(WALL0, PERF0), py.take(WALL0, PERF0)
    assert got.keys() == want.keys()
    for key in got:
        assert got[key] == want[key], key
    assert len(c) == 0 and c.take(WALL0, PERF0) is None and py.take(WALL0, PERF0) is None


def test_a_take_holds_the_rows_since_the_last_one() -> None:
    buf = _c_buffer()
    rows = _rows(30)
    _fill(buf, rows[:10])
    assert buf.take(WALL0, PERF0)["n"] == 10
    _fill(buf, rows[10:])
    cols = buf.take(WALL0, PERF0)
    batch = _batch(cols)
    assert batch.column("step").to_pylist() == list(range(10, 30))
    assert batch.column("start")[0].as_py() == WALL0 + (rows[10][2] - PERF0)


class _Event:
    """A completed CUDA event (agent/_cuda.py reads these two methods)."""

    def synchronize(self) -> None: ...
    def elapsed_time(self, end: object) -> float:
        return 2.5  # ms


def test_device_marks_are_kept_from_the_first_step_that_has_some() -> None:
    for buf in (_c_buffer(), PyStepBuffer()):
        rows, mark = _rows(5), [("forward", _Event(), _Event())]
        rows[3] = (*rows[3][:11], mark)
        cols = _fill(buf, rows).take(WALL0, PERF0)
        assert cols["marks"] == [None, None, None, mark, None]
        d = _batch(cols).to_pydict()
        assert d["gpu_forward"][3] == pytest.approx(0.0025) and d["gpu_forward"][4] is None
        assert d["gpu_backward"] == [None] * 5
        assert _fill(buf, _rows(2)).take(WALL0, PERF0)["marks"] is None  # reset by take
        no_marks = [(*r[:11], []) for r in _rows(3)]  # CUDA timed nothing: as None
        assert _fill(buf, no_marks).take(WALL0, PERF0)["marks"] is None


def test_rows_taken_while_the_marks_list_is_allocated_stay_consistent() -> None:
    """On Python 3.11 an allocation can run the garbage collector, whose finalizers can
    run anything, here a take by "the writer": the buffer stays consistent."""
    buf, taken = _c_buffer(), []

    class Taker:
        def __del__(self) -> None:
            taken.append(buf.take(WALL0, PERF0))

    _fill(buf, _rows(5))
    row = (*_rows(1)[0][:11], [("forward", _Event(), _Event())])
    threshold = gc.get_threshold()
    gc.collect()
    cycle = Taker()
    cycle.self = cycle  # type: ignore[attr-defined]
    del cycle
    gc.set_threshold(1)
    try:
        buf.append(row)  # its first allocation (the marks list) collects the cycle
    finally:
        gc.set_threshold(*threshold)
    if not taken:
        pytest.skip("this Python did not collect inside the allocation")
    assert taken[0]["n"] == 5 and taken[0]["marks"] is None
    cols = buf.take(WALL0, PERF0)
    assert cols["n"] == 1 and cols["marks"] == [row[11]]


def test_a_row_of_an_unknown_phase_is_refused_and_nothing_is_added() -> None:
    for buf in (_c_buffer(), PyStepBuffer()):
        with pytest.raises(ValueError, match="'train' or 'eval', not 'test'"):
            buf.append(("test", *_rows(1)[0][1:]))
        assert len(buf) == 0
    good = _rows(1)[0]
    no_end = (*good[:3], None, *good[4:])
    malformed = [("train", "not a step number"), list(good), good[:11], no_end]
    for buf in (_c_buffer(), PyStepBuffer()):
        for row in malformed:
            with pytest.raises(TypeError):
                buf.append(row)
        assert len(buf) == 0


def test_the_recorders_write_their_steps_into_the_buffer() -> None:
    """The C recorder writes into a C buffer directly; its method path and the Python
    recorder append rows; all three give what the rows say."""
    recorders = [
        _recorder.new_recorder(_c_buffer()),
        _recorder.new_recorder(PyStepBuffer()),
        _recorder.StepRecorder(_c_buffer()),
    ]
    for rec in recorders:
        rec.on_data(1001.0, 1001.25)
        rec.on_forward_start(1001.5)
        rec.on_forward_end(1002.0, True)
        rec.on_backward(1002.0, 1002.75)
        rec.on_optimizer_start(1003.0)
        rec.on_optimizer_end(1004.0)
        rec.on_forward_start(1004.5)
        rec.on_forward_end(1005.0, False)  # an evaluation step
        batch = _batch(rec.rows.take(WALL0, PERF0)).to_pydict()  # type: ignore[attr-defined]
        assert batch["phase"] == ["train", "eval"] and batch["step"] == [0, 0]
        assert batch["start"] == [WALL0 + 1.0, WALL0 + 4.0]
        assert batch["end"] == [WALL0 + 4.0, WALL0 + 5.0]
        assert batch["data_wait"] == [0.25, 0.0] and batch["forward"] == [0.5, 0.5]
        assert batch["backward"] == [0.75, 0.0] and batch["optimizer"] == [1.0, 0.0]
        assert batch["other"] == [0.5, 0.5] and batch["gpu_forward"] == [None, None]


def test_the_writer_batch_is_valid_arrow_of_the_steps_schema() -> None:
    for buf in (_c_buffer(), PyStepBuffer()):
        rows = _rows(300, seed=1)
        batch = _batch(_fill(buf, rows).take(WALL0, PERF0))
        batch.validate(full=True)
        d = batch.to_pydict()
        assert d["phase"] == [r[0] for r in rows]
        assert d["profiled"] == [r[10] for r in rows]
        assert d["node"] == ["n1"] * 300 and d["rank"] == [2] * 300
        dur = [r[3] - r[2] for r in rows]
        assert d["duration"] == pytest.approx(dur, rel=1e-6)
        other = [max(d_ - (sum(r[4:8]) + r[9]), 0.0) for d_, r in zip(dur, rows, strict=True)]
        assert d["other"] == pytest.approx(other, rel=1e-5, abs=1e-9)
        assert min(d["other"]) == 0.0  # the rows whose parts outlast the step


def test_the_constant_columns_grow_with_the_batch() -> None:
    """Identity and device columns are slices of arrays built once, grown when short."""
    writer = _writer()
    for n in (3, 5000, 40):
        d = writer._steps_batch(_fill(_c_buffer(), _rows(n)).take(WALL0, PERF0)).to_pydict()
        assert d["node"] == ["n1"] * n and d["pid"] == [9] * n and d["gpu_optimizer"] == [None] * n
    events = writer._events_batch([(1.0, "fault", "{}"), (2.0, "stop", "")]).to_pydict()
    assert events["node"] == ["n1", "n1"] and events["rank"] == [2, 2]


def test_the_agent_buffer_is_the_c_one_where_built() -> None:
    _c_buffer()
    assert type(new_step_buffer()).__name__ == "StepBuffer"
    assert isinstance(new_step_buffer(native=False), PyStepBuffer)
    assert columns(_rows(3), WALL0, PERF0)["n"] == 3


def _writer() -> AgentWriter:
    store = open_store("memory://stepbuf")
    faults = FaultBoundary(store, {})
    return AgentWriter(store, Identity(2, 0, "n1", 9), Clock(), faults, PyStepBuffer())


def _batch(cols: dict[str, Any]) -> pa.RecordBatch:
    batch: pa.RecordBatch = _writer()._steps_batch(cols)
    batch.validate(full=True)
    return batch


def test_one_thread_flushes_the_steps_and_the_tensors_and_polls(tmp_path: Path) -> None:
    """Each agent thread that wakes costs the training thread a GIL handoff: the writer's
    thread flushes the tensors and polls for profiling requests too."""
    with stepscope.init(output=str(tmp_path), job="threads") as session:
        names = {t.name for t in threading.enumerate() if t.name.startswith("stepscope-")}
        agent = session.agent
        assert agent.tensors is not None
        assert agent.profiling is not None
        followers = agent.writer.followers
        assert followers[:2] == [agent.tensors.writer.flush, agent.profiling.poll]
        # and torch.compile's counters where torch is attached (cheap: no I/O)
        assert [f.__qualname__ for f in followers[2:]] in ([], ["CompileWatch.poll"])
    assert "stepscope-writer" in names and "stepscope-tensors" not in names


def test_on_object_storage_each_stream_keeps_its_own_thread(tmp_path: Path) -> None:
    """A write that waits out a down store's retries must not hold back the others."""
    from stepscope.agent._agent import Agent, AgentSettings
    from stepscope.agent.profilers._background import Background

    agent = Agent(AgentSettings(job_url=str(tmp_path / "job"), flush_s=0.05))
    agent.store.is_remote = True  # as an s3:// store: the thread layout only
    agent.start()
    try:
        names = {t.name for t in threading.enumerate() if t.name.startswith("stepscope-")}
        # only torch.compile's counters, which only queue events (no store call)
        assert [f.__qualname__ for f in agent.writer.followers] in ([], ["CompileWatch.poll"])
        assert agent.profiling is not None
        assert agent.profiling.background.poll == agent.profiling.poll
        assert agent.profiling.background.poll_s >= agent.store.min_interval_s
    finally:
        agent.stop()
    assert {"stepscope-writer", "stepscope-tensors", "stepscope-profiling"} <= names

    calls: list[float] = []
    done = threading.Event()

    def poll() -> None:
        calls.append(1.0)
        if len(calls) >= 3:
            done.set()

    background = Background(guard=lambda exc: None)
    background.poll_every(poll, 0.01)
    background.start()
    try:
        assert done.wait(30), "a scheduled poll runs again and again"
    finally:
        background.stop()
    assert not background._thread.is_alive(), "stop ends a polling thread"
