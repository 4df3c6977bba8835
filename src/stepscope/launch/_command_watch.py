"""The launcher's watch over the running command: heartbeats, signals, stop requests.

While the command runs, the launcher beats its heartbeat, checks its helpers (the
sampler, the live rule runner), forwards the signals it gets, and takes stop
requests from the control channel; a graceful stop that is ignored is escalated to
SIGTERM, then SIGKILL.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable
from types import FrameType
from typing import TYPE_CHECKING

from stepscope.jobfolder import Heartbeat, JobClock, control, write_heartbeat
from stepscope.launch._ending import clock_step
from stepscope.launch._folder import FolderWatch, disk_full
from stepscope.launch._supervise import Helpers
from stepscope.process import pidfd, wait_child
from stepscope.store import Store

if TYPE_CHECKING:
    from stepscope.launch._launcher import RunSpec

HEARTBEAT_S = 2.0
STOP_GRACE_S = 10.0


def say(msg: str) -> None:
    """A line of the launcher's on stderr."""
    print(f"stepscope: {msg}", file=sys.stderr, flush=True)


class CommandWatch:
    """Waits for the command; heartbeats, signals and stop requests meanwhile."""

    def __init__(
        self,
        store: Store,
        spec: RunSpec,
        child: subprocess.Popen[bytes],
        helpers: Helpers,
        clock: JobClock,
    ) -> None:
        self.store, self.spec, self.child, self.helpers = store, spec, child, helpers
        self.clock = clock  # schedules and stamps: the job's timeline, never a stepped wall
        self.stop_reason: str | None = None
        self._stop_sent = 0.0
        self._requests = control.Requests(self.store, "stop")
        self.beat_s = max(HEARTBEAT_S, store.min_interval_s)  # object stores: fewer requests
        self.folder = FolderWatch(store, say)  # a deleted or read-only folder: told once

    def on_signal(self, signum: int, _frame: FrameType | None) -> None:
        self.stop_reason = self.stop_reason or f"interrupted by {signal.Signals(signum).name}"
        if signum == signal.SIGINT and _terminal_sent_it():
            return  # the terminal already sent it to the whole foreground group
        self.child.send_signal(signum)

    def wait(self) -> int:
        last_beat = 0.0
        fd = pidfd(self.child.pid)  # sleep until the command ends, without polling it
        try:
            while (code := wait_child(self.child, fd, 0.25)) is None:
                now = self.clock.now()
                self.helpers.check(now)
                if now - last_beat >= self.beat_s:
                    last_beat = now
                    if (step := clock_step(self.clock, self.helpers.faults)) is not None:
                        say(step)
                    self._guarded(self._beat)
                    self._guarded(self._take_stop_requests)
                    disk_full(self.store, self.helpers.faults)
                self._escalate(now)
        finally:
            if fd is not None:
                os.close(fd)
        return code

    def _guarded(self, fn: Callable[[], object]) -> None:
        self.folder.guarded(fn)  # storage trouble must not end the supervision

    def _beat(self) -> None:
        write_heartbeat(self.store, self.spec.node, Heartbeat.now(self.beat_s))

    def _take_stop_requests(self) -> None:
        for name, body in self._requests.pending():
            if not isinstance(body, dict):
                control.acknowledge(self.store, name, False, "not a JSON object")
                continue
            reason = str(body.get("reason", "stop requested"))
            self.stop_reason = f"{reason} (by {body.get('by', 'unknown')})"
            control.acknowledge(self.store, name, True, "stopping")
            say(f"stopping the job: {self.stop_reason}")
            if not self._stop_sent:
                self._stop_sent = self.clock.now()
                self.child.send_signal(signal.SIGINT)

    def _escalate(self, now: float) -> None:
        """A graceful stop that is ignored becomes SIGTERM, then SIGKILL."""
        if self._stop_sent and now - self._stop_sent > STOP_GRACE_S:
            sig = signal.SIGKILL if now - self._stop_sent > 2 * STOP_GRACE_S else signal.SIGTERM
            self.child.send_signal(sig)


def _terminal_sent_it() -> bool:
    try:
        return os.isatty(0) and os.tcgetpgrp(0) == os.getpgrp()
    except OSError:
        return False
