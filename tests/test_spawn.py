"""The training command starts with SIGINT not ignored: a stop request's signal."""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Iterator

import pytest

from stepscope.process import spawn_interruptible

pytestmark = pytest.mark.process

CHILD = [sys.executable, "-c", "import time; time.sleep(60)"]


@pytest.fixture
def sigint_ignored() -> Iterator[None]:
    """This process as a shell's `&` starts it: SIGINT ignored."""
    before = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, before)


def _sigint_ignored_in(pid: int) -> bool:
    with open(f"/proc/{pid}/status") as f:
        mask = next(int(line.split()[1], 16) for line in f if line.startswith("SigIgn:"))
    return bool(mask & (1 << (signal.SIGINT - 1)))


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_an_ignored_sigint_is_not_passed_on(sigint_ignored: None) -> None:
    proc = spawn_interruptible(CHILD, os.environ)
    try:
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN  # the launcher's own: kept
        assert not _sigint_ignored_in(proc.pid)  # Popen returns once the exec is done
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=60) == -signal.SIGINT  # Python's KeyboardInterrupt death
    finally:
        proc.kill()
        proc.wait()
