"""Waiting for processes to end without polling them: pidfds where Linux has them.

stepscope's helper processes (the launcher, the node's sampler) share two cores
with the training on small machines: every wake-up to ask "is it still alive?"
is CPU taken from the training. A pidfd (``os.pidfd_open``, Linux >= 5.3)
becomes readable when its process ends (a zombie has ended), so ``select``
sleeps until then, or until the caller's own timeout. Where there is no pidfd
(other systems, old kernels, seccomp filters), :meth:`ExitWatch.ended` falls
back to asking psutil, as before.
"""

from __future__ import annotations

import contextlib
import os
import select
import subprocess
from typing import TYPE_CHECKING, AnyStr

if TYPE_CHECKING:
    import psutil


def pidfd(pid: int) -> int | None:
    """A pidfd of ``pid``, or None where the system has none (or ``pid`` is gone)."""
    opener = getattr(os, "pidfd_open", None)
    if opener is None:
        return None
    try:
        return int(opener(pid))
    except OSError:
        return None


def _alive(proc: psutil.Process) -> bool:
    import psutil

    try:
        return bool(proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE)
    except psutil.Error:
        return False


class ExitWatch:
    """Named processes to watch; :meth:`ended` names the first one that has ended."""

    def __init__(self, pids: dict[str, int | None]) -> None:
        self._fds: dict[str, int] = {}
        self._polled: dict[str, psutil.Process | None] = {}
        for name, pid in pids.items():
            if pid is None:
                continue
            proc = process(pid)
            fd = pidfd(pid) if proc is not None else None
            if fd is not None:
                self._fds[name] = fd
            else:
                self._polled[name] = proc  # None: already gone

    @property
    def fds(self) -> list[int]:
        """The pidfds, for the caller's own ``select`` (readable: that process ended)."""
        return list(self._fds.values())

    def ended(self) -> str | None:
        """The name of a watched process that has ended, or None."""
        if self._fds:
            ready, _, _ = select.select(self.fds, [], [], 0)
            for name, fd in self._fds.items():
                if fd in ready:
                    return name
        for name, proc in self._polled.items():
            if proc is None or not _alive(proc):
                return name
        return None

    def forget(self, name: str) -> None:
        """Stop watching ``name`` (its end was handled)."""
        fd = self._fds.pop(name, None)
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)
        self._polled.pop(name, None)

    def close(self) -> None:
        for fd in self._fds.values():
            with contextlib.suppress(OSError):
                os.close(fd)
        self._fds = {}


def process(pid: int) -> psutil.Process | None:
    """``pid`` as a psutil Process (pid and start time), or None if it is gone."""
    import psutil

    try:
        return psutil.Process(pid)
    except psutil.Error:
        return None


def wait_child(proc: subprocess.Popen[AnyStr], fd: int | None, timeout: float) -> int | None:
    """``Popen.wait(timeout)`` without its polling loop (up to 20 wake-ups a second):
    the exit code, or None if ``proc`` still runs after ``timeout``. ``fd``: its pidfd."""
    if fd is None:
        try:
            return proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None
    code = proc.poll()
    if code is None:
        select.select([fd], [], [], timeout)
        code = proc.poll()
    return code
