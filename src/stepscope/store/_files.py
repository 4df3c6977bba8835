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


def overwrite_in_place(full: str, data: bytes) -> bool:
    """Write ``data`` over the start of the existing file ``full``, padded with spaces
    to its size; False (nothing written) if it is missing or smaller than ``data``.

    The fallback of a JSON record on a full disk: the file's blocks are already
    allocated, so no new ones are needed (not atomic: used only when the atomic
    write cannot be). The padding is whitespace after the JSON text: still valid.
    """
    try:
        fd = os.open(full, os.O_WRONLY | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return False
    try:
        size = os.fstat(fd).st_size
        if size < len(data):
            return False
        view, offset = memoryview(data.ljust(size)), 0
        while offset < size:
            offset += os.pwrite(fd, view[offset:], offset)
        return True
    finally:
        os.close(fd)
