"""The launcher's word to a helper that the job has ended: one byte down a pipe.

A helper that ended when ``job.json`` said so could not end at all when the job
folder was deleted or made read-only (the launcher could not write the end
there, the helper could not read it): it was killed minutes later. The launcher
now tells the helper itself: it writes one byte into a pipe whose read end the
helper inherited (``--stop-fd``), then closes it. A pipe, not a signal: a helper
still importing when the word comes finds it waiting, where a signal would kill
it before its handler is set. An end of file without the byte is not the word:
the launcher died, and the helper goes on as it did before (its parent watch).
"""

from __future__ import annotations

import contextlib
import os
import select

WORD = b"e"


def word_pipe() -> tuple[int, int]:
    """A pipe (read end, write end); the read end goes to one helper (``pass_fds``)."""
    return os.pipe()


def give_word(fd: int) -> None:
    """Tell the helper at the other end that the job has ended; closes ``fd``."""
    with contextlib.suppress(OSError):  # a helper that is gone needs no word
        os.write(fd, WORD)
    with contextlib.suppress(OSError):
        os.close(fd)


class Word:
    """The read end of a word pipe. :meth:`heard`: True once the word came, None once
    the pipe closed without it (the launcher died), else False; never blocks."""

    def __init__(self, fd: int) -> None:
        self.fd: int | None = fd
        self.said = False

    def heard(self, wait_s: float = 0.0) -> bool | None:
        """As the class says; waits up to ``wait_s`` for the word (a helper's sleep
        that the word ends at once: an object store's 10 s poll would outlast the
        launcher's 3.5 s deadline)."""
        if self.said or self.fd is None:
            return True if self.said else None
        try:
            ready, _, _ = select.select([self.fd], [], [], wait_s)
            data = os.read(self.fd, 1) if ready else None
        except OSError:
            data = b""
        if data is None:
            return False
        self.said = data == WORD
        self.close()
        return True if self.said else None

    def close(self) -> None:
        if self.fd is not None:
            with contextlib.suppress(OSError):
                os.close(self.fd)
            self.fd = None
