"""Python profiling: cProfile with one of three timers, or pyinstrument.

Both use the interpreter's profile hook of the thread that starts them (the
training thread, at a step boundary), so only one can run at a time, and
neither starts while another tool (a debugger, coverage) holds the hook.
"""

from __future__ import annotations

import cProfile
import json
import marshal
import sys
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from stepscope.agent.profilers._sink import ArtifactSink, Export, Finish
from stepscope.config import ProfilingWindow, PythonProfiler, cProfileTimer
from stepscope.errors import ProfileHookBusy

if TYPE_CHECKING:
    from pyinstrument import Profiler
    from pyinstrument.session import Session

# cProfile's stats: (file, line, function) -> (primitive calls, calls, own s,
# cumulative s, callers)
Stats = Mapping[tuple[str, int, str], tuple[int, int, float, float, object]]
# One row of the function table: where, how often, how long.
FunctionRow = dict[str, str | int | float]

TOP_FUNCTIONS = 50
PYINSTRUMENT_INTERVAL_S = 0.001


def _off_cpu() -> float:
    """Wall time minus this thread's CPU time: the time spent waiting (I/O, locks, sleep)."""
    return time.perf_counter() - time.thread_time()


TIMERS: dict[cProfileTimer, Callable[[], float]] = {
    cProfileTimer.TOTAL_TIME: time.perf_counter,
    cProfileTimer.CPU_TIME: time.thread_time,
    cProfileTimer.OFF_CPU_TIME: _off_cpu,
}


def _check_hook_free() -> None:
    if sys.getprofile() is not None:
        raise ProfileHookBusy(
            "the interpreter's profile hook is in use (another profiler, a debugger or "
            "coverage): a Python profiler would record nothing"
        )


class CProfileProfiler:
    """cProfile with the window's timer; saved as a pstats file."""

    kind = "python"

    def __init__(self, window: ProfilingWindow) -> None:
        self.timer = window.cprofile_timer or cProfileTimer.TOTAL_TIME
        self._prof: cProfile.Profile | None = None

    def start(self) -> None:
        _check_hook_free()
        self._prof = cProfile.Profile(TIMERS[self.timer])
        self._prof.enable()

    def stop(self) -> Finish:
        prof, self._prof = self._prof, None
        assert prof is not None
        prof.disable()
        timer = self.timer.value
        return lambda sink, base: _export_cprofile(prof, timer, sink, base)


def _export_cprofile(prof: cProfile.Profile, timer: str, sink: ArtifactSink, base: str) -> Export:
    prof.create_stats()
    stats = prof.stats
    path = sink.write(f"{base}.pstats", marshal.dumps(stats))
    top = top_functions(stats)
    table = sink.write_json(f"{base}.functions.json", {"timer": timer, "functions": top})
    return Export(path, [k for k in (path, table) if k], {"top": top[:5]})


def top_functions(stats: Stats, n: int = TOP_FUNCTIONS) -> list[FunctionRow]:
    """The ``n`` functions with the most own time (seconds of the window's timer)."""
    rows: list[FunctionRow] = [
        {
            "function": f"{key[0]}:{key[1]}({key[2]})",
            "file": key[0],
            "line": key[1],
            "name": key[2],
            "primitive_calls": cc,
            "calls": nc,
            "own_s": tt,
            "cumulative_s": ct,
        }
        for key, (cc, nc, tt, ct, _callers) in stats.items()
    ]
    rows.sort(key=lambda r: float(r["own_s"]), reverse=True)
    return rows[:n]


class PyinstrumentProfiler:
    """pyinstrument sampling every millisecond; saved as its session, HTML and speedscope."""

    kind = "python"

    def __init__(self, window: ProfilingWindow) -> None:
        self._prof: Profiler | None = None

    def start(self) -> None:
        from pyinstrument import Profiler

        _check_hook_free()
        prof = Profiler(interval=PYINSTRUMENT_INTERVAL_S, async_mode="disabled")
        self._prof = prof
        prof.start()

    def stop(self) -> Finish:
        prof, self._prof = self._prof, None
        assert prof is not None  # start() ran: the scheduler pairs them
        session = prof.stop()
        return lambda sink, base: _export_pyinstrument(prof, session, sink, base)


def _export_pyinstrument(prof: Profiler, session: Session, sink: ArtifactSink, base: str) -> Export:
    from pyinstrument.renderers import SpeedscopeRenderer

    saved = sink.write(f"{base}.pyisession", json.dumps(session.to_json()).encode())
    html = sink.write(f"{base}.html", prof.output_html().encode())
    speedscope = sink.write(f"{base}.speedscope.json", prof.output(SpeedscopeRenderer()).encode())
    files = [k for k in (html, saved, speedscope) if k]
    return Export(html, files, {"samples": int(session.sample_count)})


def python_profiler(window: ProfilingWindow) -> CProfileProfiler | PyinstrumentProfiler:
    """The profiler a Python window asks for (cProfile unless it says pyinstrument)."""
    if window.python_profiler is PythonProfiler.PYINSTRUMENT:
        return PyinstrumentProfiler(window)
    return CProfileProfiler(window)
