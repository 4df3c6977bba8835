"""What a helper that stopped making progress was doing, for its fault record, and its kill.

The launcher kills a helper that is hung while the job runs (no progress for
``HUNG_S``) or that has not finished ``STOP_S`` after the job's end, both through
:func:`kill_stuck`. Before it does, it notes what the helper was doing, where the
platform can tell:

* its state and kernel wait channel (``/proc/<pid>/stat`` and ``wchan``, Linux):
  ``T`` is stopped (``SIGSTOP``), ``D`` waits in the kernel (storage?);
* the stack of each of its threads: the launcher sends ``STACK_SIGNAL``, on which
  the helper's ``faulthandler`` writes them to its stderr (a file the launcher
  holds). A stopped process cannot run a signal handler, so it has no stack to
  give: the record says so;
* its last progress (``process._progress``), as a unix time.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from stepscope.process import STACK_SIGNAL, wait_child

if TYPE_CHECKING:
    from stepscope.launch._helpers import Helper

STACK_WAIT_S = 0.3  # for every asked helper together: a running one dumps in microseconds
STACK_LINES = 60
KILLED_WAIT_S = 1.0  # a killed helper in the kernel (storage) dies when its call returns
STATES = {
    "T": "stopped (SIGSTOP): a stopped process cannot dump its stack",
    "t": "stopped by a tracer: a stopped process cannot dump its stack",
    "D": "waiting in the kernel (uninterruptible: storage?)",
    "S": "sleeping",
    "R": "running",
    "Z": "exited (a zombie)",
}


def proc_state(pid: int) -> tuple[str | None, str | None]:
    """The state letter and wait channel of ``pid`` (None where there is no /proc)."""
    state = wchan = None
    with contextlib.suppress(OSError, IndexError), open(f"/proc/{pid}/stat") as f:
        state = f.read().rsplit(")", 1)[1].split()[0]
    with contextlib.suppress(OSError), open(f"/proc/{pid}/wchan") as f:
        wchan = f.read().strip() or None
    return state, (None if wchan == "0" else wchan)


def describe_state(state: str | None) -> str:
    """``stopped (SIGSTOP): ...`` for a state letter (``unknown state`` for None)."""
    if state is None:
        return "state unknown"
    return STATES.get(state, f"state {state}")


def _stopped(state: str | None) -> bool:
    return state in ("T", "t")


def ask_stacks(helpers: Sequence[Helper]) -> dict[str, list[str]]:
    """Every thread's stack of each helper that is not stopped, by helper name."""
    sizes: dict[str, int] = {}
    for h in helpers:
        if h.proc is None or h.log is None or _stopped(proc_state(h.proc.pid)[0]):
            continue
        sizes[h.name] = os.fstat(h.log.fileno()).st_size
        with contextlib.suppress(OSError):
            h.proc.send_signal(STACK_SIGNAL)
    if not sizes:
        return {}
    time.sleep(STACK_WAIT_S)
    stacks = {}
    for h in helpers:
        if h.name in sizes and h.log is not None:
            start = sizes[h.name]
            end = os.fstat(h.log.fileno()).st_size
            text = os.pread(h.log.fileno(), end - start, start).decode(errors="replace")
            stacks[h.name] = text.splitlines()[:STACK_LINES]
            h.skip_output()  # recorded in the fault: not copied to the launcher's stderr
    return stacks


def doing(h: Helper, stack: list[str] | None) -> tuple[str, dict[str, object]]:
    """A phrase and the fault record's fields: state, wait channel, last progress, stack."""
    pid = h.proc.pid if h.proc is not None else None
    state, wchan = proc_state(pid) if pid is not None else (None, None)
    progress, _ = h.last_progress()
    mono, wall = time.monotonic(), time.time()
    last = progress if progress is not None else h.started_mono
    since = mono - last
    what = "no progress since it started" if progress is None else "last progress"
    phrase = f"{describe_state(state)}; {what} {since:.1f} s ago"
    fields: dict[str, object] = {
        "state": state,
        "wchan": wchan,
        "last_progress_time": round(wall - since, 3),
        "stack": stack if stack is not None else [],
    }
    if _stopped(state):
        fields["stack_note"] = "a stopped process cannot dump its stack"
    return phrase, fields


def last_progress_wall(h: Helper) -> float:
    """The unix time of the helper's last progress (its start if it made none)."""
    progress, _ = h.last_progress()
    last = progress if progress is not None else h.started_mono
    return time.time() - (time.monotonic() - last)


def hung_for(h: Helper, mono: float) -> float:
    """Seconds since the helper's last progress; since its start if it made none yet,
    halved (start-up imports, before the first beat, take seconds)."""
    progress, _ = h.last_progress()
    if progress is None:
        return (mono - h.started_mono) / 2
    return mono - progress


@dataclass(frozen=True)
class Stuck:
    """What a killed helper was doing (:func:`kill_stuck`)."""

    phrase: str  # its state and last progress, for the fault's line
    fields: dict[str, object]  # the fault record's: state, wait channel, stack, ...
    progress: float  # the unix time of its last progress (its start if it made none)
    mark: float | None  # its newest stored sample's time (the sampler's), if it said
    pid: int | None


def kill_stuck(h: Helper, stack: list[str] | None) -> Stuck:
    """Note what a helper that stopped making progress was doing, then kill it."""
    phrase, fields = doing(h, stack)
    _, mark = h.last_progress()
    pid = h.proc.pid if h.proc is not None else None
    stuck = Stuck(phrase, fields, last_progress_wall(h), mark, pid)
    kill(h)
    return stuck


def kill(h: Helper) -> None:
    """SIGKILL (it ends a stopped process too) and reap, a bounded wait."""
    if h.proc is None:
        return
    with contextlib.suppress(OSError):
        h.proc.kill()
    wait_child(h.proc, None, KILLED_WAIT_S)
