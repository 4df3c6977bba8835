"""Start the training command so that it can be interrupted.

A stop request (and a Ctrl-C that the launcher forwards) reaches the command as
SIGINT. ``exec`` resets a *caught* signal to its default but keeps an *ignored*
one ignored, and a shell ignores SIGINT in whatever it starts in the background
without job control (``stepscope run ... &`` in a script, a CI step that runs the
suite with ``&``): the command then inherits the ignored SIGINT, the launcher's
graceful stop is lost, and the job ends only by the SIGTERM sent after the grace
(exit 143, 10 s later). The launcher always catches SIGINT itself, so the command
starts with SIGINT at its default, as it would from a foreground shell; whatever
the script then installs for SIGINT is its own.
"""

from __future__ import annotations

import signal
import subprocess
from collections.abc import Mapping
from types import FrameType


def _not_yet(_signum: int, _frame: FrameType | None) -> None:
    """SIGINT while the command starts: ignored, as the launcher's own was."""


def spawn_interruptible(command: list[str], env: Mapping[str, str]) -> subprocess.Popen[bytes]:
    """``Popen(command, env=env)`` with SIGINT not ignored in the new process."""
    if signal.getsignal(signal.SIGINT) is not signal.SIG_IGN:
        return subprocess.Popen(command, env=env)
    # caught here for the start only: exec gives the command the default disposition
    signal.signal(signal.SIGINT, _not_yet)
    try:
        return subprocess.Popen(command, env=env)
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
