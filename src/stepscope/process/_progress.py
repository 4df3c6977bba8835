"""A helper's progress, shared with the launcher that watches it: is it hung?

A helper that is alive may still be stuck (stopped with ``SIGSTOP``, blocked on a
store that never answers, deadlocked). Its exit cannot tell; its progress can.
The launcher opens an unlinked temporary file per helper and passes its
descriptor (``--progress-fd``); the helper's main loop writes two doubles there
with one ``pwrite`` each time it gets on (a sample taken, a scan done; about a
microsecond): ``progress``, its ``time.monotonic()`` then (one clock for every
process of a Linux host), and ``mark``, what the helper wants the launcher to
know should it have to kill it (the sampler: the time of the newest sample it
stored, unix s). The launcher reads them with one ``pread``
(:meth:`ProgressFile.read`). An 8-byte aligned write is not torn in practice; a
value that reads as garbage is ignored.

Stacks: each helper calls :func:`dump_stack_on_signal` first thing, so
``STACK_SIGNAL`` makes it write every thread's stack to its stderr (which the
launcher keeps); a stopped process cannot, and the launcher says so.
"""

from __future__ import annotations

import contextlib
import faulthandler
import math
import os
import signal
import struct
import tempfile
import time

_LAYOUT = struct.Struct("<dd")
STACK_SIGNAL = signal.SIGUSR1


def dump_stack_on_signal() -> None:
    """Make ``STACK_SIGNAL`` dump this process's threads' stacks to stderr."""
    with contextlib.suppress(Exception):  # no stderr (closed): no stacks, nothing else lost
        faulthandler.register(STACK_SIGNAL, all_threads=True)


class ProgressWriter:
    """The helper's side: :meth:`beat` when it got on; ``fd`` None: nothing to write."""

    def __init__(self, fd: int | None) -> None:
        self.fd = fd
        self.mark = math.nan

    def beat(self, mark: float | None = None) -> None:
        """Progress now; ``mark``: a new value for the launcher (kept until the next)."""
        if mark is not None:
            self.mark = mark
        if self.fd is not None:
            try:
                os.pwrite(self.fd, _LAYOUT.pack(time.monotonic(), self.mark), 0)
            except OSError:  # the launcher's file is gone: it no longer watches
                self.fd = None


class ProgressFile:
    """The launcher's side: the file one helper process writes its progress to."""

    def __init__(self) -> None:
        # held open until close(): the helper writes through the inherited descriptor
        self._file = tempfile.TemporaryFile(prefix="stepscope-progress-")  # noqa: SIM115
        self.fd = self._file.fileno()
        os.set_inheritable(self.fd, True)

    def read(self) -> tuple[float | None, float | None]:
        """``(progress, mark)``: the helper's last progress (monotonic s) and its mark;
        None for what it never wrote (or what reads as garbage)."""
        try:
            raw = os.pread(self.fd, _LAYOUT.size, 0)
        except OSError:
            return None, None
        if len(raw) < _LAYOUT.size:
            return None, None
        progress, mark = _LAYOUT.unpack(raw)
        sane = math.isfinite(progress) and 0 < progress <= time.monotonic() + 1
        return (progress if sane else None), (mark if math.isfinite(mark) else None)

    def close(self) -> None:
        self._file.close()
