"""Local files written the way a training process can afford (store/_store.py uses it)."""

from __future__ import annotations

import contextlib
import os

_CREATE = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_CLOEXEC", 0)


def write_atomic(full: str, tmp: str, data: bytes) -> None:
    """Write ``full`` atomically in four system calls: ``tmp``, then a rename.

    Each system call lets another thread take the GIL, and the training thread
    then waits to get it back: Python's ``open()`` and ``os.makedirs`` make about
    four times as many calls (measured in BENCHMARKS.md, "GIL handoffs"). The
    folder is made only when it is missing.
    """
    try:
        fd = os.open(tmp, _CREATE, 0o666)
    except FileNotFoundError:
        os.makedirs(os.path.dirname(full), exist_ok=True)
        fd = os.open(tmp, _CREATE, 0o666)
    try:
        try:
            view = memoryview(data)
            while view:  # a short write goes on; a full disk raises
                view = view[os.write(fd, view) :]
        finally:
            os.close(fd)  # some filesystems report a failed write only here
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)  # no partial file left behind on a full disk
        raise
    os.replace(tmp, full)
