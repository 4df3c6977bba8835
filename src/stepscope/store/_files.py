"""Local files written the way a training process can afford (store/_store.py uses it)."""

from __future__ import annotations

import contextlib
import errno
import os

_CREATE = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_CLOEXEC", 0)


class FolderGoneError(FileNotFoundError):
    """The job folder itself is gone (deleted while the job ran): not re-created."""

    def __init__(self, root: str) -> None:
        super().__init__(errno.ENOENT, "the job folder was deleted", root)


def write_atomic(full: str, tmp: str, data: bytes, root: str | None = None) -> None:
    """Write ``full`` atomically in four system calls: ``tmp``, then a rename.

    Each system call lets another thread take the GIL, and the training thread
    then waits to get it back: Python's ``open()`` and ``os.makedirs`` make about
    four times as many calls (measured in BENCHMARKS.md, "GIL handoffs"). The
    folder is made only when it is missing. ``root``: the job folder, which is
    never re-created (:class:`FolderGoneError`): a writer must not bring a deleted
    job folder back without its job.json; None: any missing folder is made.
    """
    try:
        fd = os.open(tmp, _CREATE, 0o666)
    except FileNotFoundError:
        make_dirs(os.path.dirname(full), root)
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


def make_dirs(path: str, root: str | None) -> None:
    """``os.makedirs(path)``, but never ``root`` itself: each folder below it is made
    with its own ``mkdir``, so a ``root`` deleted meanwhile is not made again."""
    if root is None:
        os.makedirs(path, exist_ok=True)
        return
    root = root.rstrip("/")
    if not os.path.isdir(root):
        raise FolderGoneError(root)
    if not path.startswith(root + "/"):
        return  # the root itself: the caller's open() tells why it failed
    here = root
    for part in path[len(root) + 1 :].split("/"):
        here = f"{here}/{part}"
        try:
            os.mkdir(here)
        except FileExistsError:
            continue
        except FileNotFoundError:
            if not os.path.isdir(root):
                raise FolderGoneError(root) from None
            raise


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
