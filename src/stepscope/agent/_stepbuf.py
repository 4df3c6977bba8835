"""A rank's step rows between the recorder and the writer thread.

The recorder appends one row per step; the writer thread takes them all at
each flush as the steps columns' final buffers (``take``), which it wraps as
Arrow arrays without copying. The agent uses the C ``StepBuffer``
(agent/_stepbuf.c), into which the hooks' fast path writes a step's values
directly, and whose ``take`` is one call that never releases the GIL; the
class here does the same in Python (with numpy) for builds without a compiler.
tests/test_stepbuf.py checks that both give the same bytes.
"""

from __future__ import annotations

import operator
from collections import deque
from typing import TYPE_CHECKING, Protocol, TypedDict

from stepscope.agent._cuda import Timed
from stepscope.agent._recorder import StepRow

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

PHASES = ("train", "eval")


class StepColumns(TypedDict):
    """What ``take`` returns: the steps columns of ``n`` rows as Arrow buffers.

    A dict rather than a dataclass: the C StepBuffer builds it (agent/_stepbuf.c).
    The float columns are float32 except ``start`` and ``end`` (wall-clock seconds,
    float64); ``step`` is int64, ``phase_*`` an Arrow string column's offsets and
    data, ``profiled`` a bitmap. ``marks`` holds each row's device marks (None for
    a row without), or is None when no row has any.
    """

    n: int
    start: bytes
    end: bytes
    step: bytes
    duration: bytes
    other: bytes
    data_wait: bytes
    forward: bytes
    backward: bytes
    optimizer: bytes
    collective: bytes
    phase_offsets: bytes
    phase_data: bytes
    profiled: bytes
    marks: list[list[Timed] | None] | None


class StepSink(Protocol):
    """What a recorder appends its rows to and the writer takes them from."""

    def append(self, row: StepRow, /) -> None: ...
    def take(self, wall0: float, perf0: float, /) -> StepColumns | None: ...
    def __len__(self) -> int: ...


class PyStepBuffer:
    """The C StepBuffer's contract in Python (rows kept as tuples until taken)."""

    def __init__(self) -> None:
        self._rows: deque[StepRow] = deque()

    def __len__(self) -> int:
        return len(self._rows)

    def append(self, row: StepRow, /) -> None:
        """Add one row; a malformed one is refused here, as the C buffer does, so that
        it can never make a later ``take`` fail."""
        if not isinstance(row, tuple) or len(row) != 12:
            raise TypeError(f"a step row is a StepRow tuple of 12 fields, not {row!r}")
        if row[0] not in PHASES:
            raise ValueError(f"a step's phase is 'train' or 'eval', not {row[0]!r}")
        t0, t1, data, fwd, bwd, opt, coll, outside = (float(v) for v in row[2:10])
        step, flag = operator.index(row[1]), bool(row[10])
        self._rows.append((row[0], step, t0, t1, data, fwd, bwd, opt, coll, outside, flag, row[11]))

    def take(self, wall0: float, perf0: float, /) -> StepColumns | None:
        """Every row so far as the steps columns' buffers (the buffer is emptied)."""
        rows = [self._rows.popleft() for _ in range(len(self._rows))]
        try:
            return columns(rows, wall0, perf0) if rows else None
        except BaseException:
            self._rows.extendleft(reversed(rows))  # kept for the next take
            raise


def columns(rows: list[StepRow], wall0: float, perf0: float) -> StepColumns:
    """What ``StepBuffer.take`` returns, for ``rows`` (agent/_stepbuf.c: take)."""
    import numpy as np

    n = len(rows)
    by_field = list(zip(*rows, strict=True))

    def f64(i: int) -> npt.NDArray[np.float64]:
        return np.fromiter(by_field[i], np.float64, count=n)

    def f32(i: int) -> bytes:  # a part's column, from StepRow field ``i``
        return f64(i).astype(np.float32).tobytes()

    begin, finish = f64(2), f64(3)
    dur = finish - begin
    busy = f64(4) + f64(5) + f64(6) + f64(7)
    other = np.maximum(dur - (busy + f64(9)), 0.0)
    phase = "".join(by_field[0]).encode()
    offsets = np.zeros(n + 1, np.int32)
    np.cumsum(np.fromiter(map(len, by_field[0]), np.int32, count=n), out=offsets[1:])
    marks = [m or None for m in by_field[11]]  # no marks, or an empty list: None
    flags = np.fromiter(by_field[10], np.bool_, count=n)
    return {
        "n": n,
        "start": (wall0 + (begin - perf0)).tobytes(),
        "end": (wall0 + (finish - perf0)).tobytes(),
        "step": np.fromiter(by_field[1], np.int64, count=n).tobytes(),
        "duration": dur.astype(np.float32).tobytes(),
        "other": other.astype(np.float32).tobytes(),
        "data_wait": f32(4),
        "forward": f32(5),
        "backward": f32(6),
        "optimizer": f32(7),
        "collective": f32(8),
        "phase_offsets": offsets.tobytes(),
        "phase_data": phase,
        "profiled": np.packbits(flags, bitorder="little").tobytes(),
        "marks": marks if any(marks) else None,
    }


def new_step_buffer(native: bool = True) -> StepSink:
    """The C StepBuffer when ``native`` and built, else :class:`PyStepBuffer`."""
    if native:
        try:
            from stepscope.agent._native import StepBuffer

            return StepBuffer()
        except ImportError:
            pass
    return PyStepBuffer()
