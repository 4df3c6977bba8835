"""Reading the control channel safely: whatever lands in ``control/``, the job goes on.

Anyone who can write into the job folder can drop anything into ``control/``: a
FIFO, a device, a symbolic link to ``/dev/zero``, a 100 MB file, a JSON document
nested 5,000 deep, or make ``control/ack`` a link to another folder. The readers
(the launcher, the samplers and the agent inside training) must neither block,
nor read without bound, nor crash, nor write outside the job. So, on a local
job folder:

* a request is opened with ``O_NOFOLLOW | O_NONBLOCK`` and read only if ``fstat``
  says it is a regular file of at most :data:`MAX_REQUEST_BYTES` (checked before
  reading); on an object store (no FIFOs or links there) the size is checked
  after the read;
* its JSON is parsed only if nested at most :data:`MAX_DEPTH` deep, and no error
  of the parse escapes: an unreadable file is an :class:`Unreadable` with the
  reason;
* an acknowledgement is written only if ``control/`` and ``control/ack`` are real
  folders inside the job folder, never through a link.

Each refusal is recorded in ``faults/control-<host>-<pid>.json`` (docs/format.md).
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import socket
import stat
import threading
from dataclasses import dataclass

from stepscope.jobfolder import _paths as paths
from stepscope.jobfolder._faults import FaultLog
from stepscope.jobfolder._records import FolderIO

MAX_REQUEST_BYTES = 64 * 1024  # a request of 16 windows is about 5 KB
MAX_DEPTH = 16  # a request nests 3 deep ({"windows": [{...}]})
_OPEN = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
_BRACKETS = re.compile(rb'"(?:[^"\\]|\\.)*"|[\[\]{}]')  # strings skipped whole
_KEPT = 20  # the last refusals a process keeps in its fault record


@dataclass(frozen=True)
class Unreadable:
    """A file of ``control/`` that is not a readable request, and why."""

    reason: str


class AckRefused(OSError):
    """``control/`` or ``control/ack`` is not a real folder inside the job."""


def read_document(store: FolderIO, key: str) -> object:
    """The JSON document ``key`` of the control channel, or :class:`Unreadable`.

    Never raises (but for ``FileNotFoundError``: the file went away).
    """
    try:
        return loads_bounded(_read_bytes(store, key))
    except FileNotFoundError:
        raise
    except _Refused as exc:
        return Unreadable(str(exc))
    except Exception as exc:  # the boundary: nothing of a bad file escapes
        return Unreadable(f"cannot be read: {type(exc).__name__}: {exc}")


class _Refused(ValueError):
    """A file refused with a reason meant for the acknowledgement."""


def _read_bytes(store: FolderIO, key: str) -> bytes:
    local = store.local_path(key)
    if local is None:
        data = store.read_bytes(key)
        _check_size(len(data))
        return data
    try:
        fd = os.open(local, _OPEN)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise _Refused("is a symbolic link: only regular files are read") from None
        raise
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise _Refused(f"is not a regular file ({_file_type(info.st_mode)}): not read")
        _check_size(info.st_size)
        return _read_at_most(fd, MAX_REQUEST_BYTES + 1)
    finally:
        os.close(fd)


def _read_at_most(fd: int, limit: int) -> bytes:
    chunks, total = [], 0
    while total < limit:
        chunk = os.read(fd, limit - total)
        if not chunk:
            break
        chunks.append(chunk)
        total += len(chunk)
    data = b"".join(chunks)
    _check_size(len(data))  # it grew since fstat
    return data


def _check_size(size: int) -> None:
    if size > MAX_REQUEST_BYTES:
        raise _Refused(
            f"is {size:,} bytes, over the limit of {MAX_REQUEST_BYTES:,}: not read "
            "(a request is a small JSON object)"
        )


def _file_type(mode: int) -> str:
    for test, name in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"),
                       (stat.S_ISDIR, "a folder")):  # fmt: skip
        if test(mode):
            return name
    return "not a regular file"


def loads_bounded(data: bytes) -> object:
    """``json.loads(data)`` if nested at most :data:`MAX_DEPTH` deep; ``_Refused`` if not."""
    depth = deepest = 0
    for match in _BRACKETS.finditer(data):
        token = match.group()
        if token in (b"[", b"{"):
            depth += 1
            deepest = max(deepest, depth)
            if deepest > MAX_DEPTH:
                raise _Refused(f"is nested deeper than {MAX_DEPTH} levels: not parsed")
        elif token in (b"]", b"}"):
            depth -= 1
    try:
        return json.loads(data)
    except (ValueError, RecursionError) as exc:
        raise _Refused(f"is not JSON ({type(exc).__name__}: {exc})") from None


def check_ack_folder(store: FolderIO) -> None:
    """Raise :class:`AckRefused` unless acks would be written inside the job folder."""
    root = store.local_path()
    if root is None:
        return  # object stores have no links
    real_root = os.path.realpath(root)
    for key in (paths.CONTROL, paths.ACK):
        path = os.path.join(root, key)
        try:
            mode = os.lstat(path).st_mode
        except FileNotFoundError:
            return  # made as a real folder by the write
        if not stat.S_ISDIR(mode):
            kind = "a symbolic link" if stat.S_ISLNK(mode) else "not a folder"
            raise AckRefused(f"{key} is {kind}: acknowledgements are written only inside the job")
        if not os.path.realpath(path).startswith(real_root + os.sep):
            raise AckRefused(f"{key} resolves outside the job folder: no acknowledgement written")


# --- the record of refusals: faults/control-<host>-<pid>.json --------------------------
_lock = threading.Lock()
_logs: dict[tuple[str, int], FaultLog] = {}  # (store, pid): a forked child starts its own


def record_refusal(store: FolderIO, name: str, reason: str) -> None:
    """Add a refused request (or acknowledgement) to this process's fault record.

    Best effort and never raises: the store may be what failed.
    """
    with contextlib.suppress(Exception):
        _record(store, name, reason)


def _record(store: FolderIO, name: str, reason: str) -> None:
    pid = os.getpid()
    with _lock:
        log = _logs.get((store.url, pid))
        if log is None:
            log = _logs[(store.url, pid)] = FaultLog(store, socket.gethostname(), pid)
        log.io = store  # the caller's store of this job folder: the one known to work
        kept = log.records.get("control", {}).get("requests", [])
        requests = [*kept[-(_KEPT - 1) :], {"request": name, "reason": reason}]
    log.record("control", f"control request {name!r} refused: {reason}", requests=requests)
