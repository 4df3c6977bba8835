"""The launcher's watch over its helpers while the training runs (see ``_helpers``)."""

from __future__ import annotations

import importlib.util
import os
import signal
import subprocess
import sys
from typing import TYPE_CHECKING

from stepscope.jobfolder import FaultLog
from stepscope.launch._helpers import (
    FIRST_BACKOFF_S,
    HELPER_WAIT_S,
    MAX_BACKOFF_S,
    MAX_RESTARTS,
    STABLE_S,
    Helper,
    _rules_cmd,
    _sampler_cmd,
    describe_exit,
)

if TYPE_CHECKING:
    from stepscope.launch._launcher import RunSpec
    from stepscope.store import Store

SAMPLER, RULES = "sampler", "rules-runner"
FORWARD_S = 2.0  # how often the helpers' stderr is copied to the launcher's


class Helpers:
    """The node's sampler and the live rule runner, started, watched and restarted."""

    def __init__(self, spec: RunSpec, store: Store, child_pid: int, faults: FaultLog) -> None:
        me = str(os.getpid())
        self.faults = faults
        sampler = _sampler_cmd(spec, store, child_pid, me)
        self.helpers = [Helper(SAMPLER, lambda extra: [*sampler, *extra])]
        if spec.rules and importlib.util.find_spec("stepscope.rules.runner") is not None:
            rules = _rules_cmd(store, me)
            self.helpers.append(Helper(RULES, lambda extra: [*rules, *extra], listens=True))
        self._forwarded = 0.0

    def start(self) -> None:
        for h in self.helpers:
            h.start()

    def check(self, now: float) -> None:
        """Note the helpers that died since the last call; start those that are due."""
        for h in self.helpers:
            if h.proc is not None and h.proc.poll() is None:
                h.last_alive = now
            elif h.proc is not None:
                self._died(h, h.proc.returncode, now)
            elif h.restart_at is not None and now >= h.restart_at:
                h.start()
        if now - self._forwarded >= FORWARD_S:
            self._forwarded = now
            for h in self.helpers:
                h.forward()

    def _died(self, h: Helper, code: int, now: float) -> None:
        h.forward()
        how, exit_code, sig = describe_exit(code)
        tail = h.tail()
        pid = h.proc.pid if h.proc is not None else None
        h.close()
        h.proc = None
        lived = now - h.started
        h.backoff_s = FIRST_BACKOFF_S if lived >= STABLE_S else h.backoff_s
        if h.restarts < MAX_RESTARTS:
            h.restarts += 1
            h.restart_at = now + h.backoff_s
            then = f"restarted ({h.restarts} of {MAX_RESTARTS}) after {h.backoff_s:.1f} s"
            h.backoff_s = min(MAX_BACKOFF_S, 2 * h.backoff_s)
            if h.name == SAMPLER:  # the new sampler records the gap this death leaves
                h.extra = ["--gap-start", repr(h.last_alive), "--gap-cause", f"sampler {how}"]
        else:
            then = f"not restarted: it died {MAX_RESTARTS + 1} times"
        last = f"; stderr: {tail[-1]}" if tail else ""
        error = f"{h.name} {how} after {lived:.1f} s; {then}{last}"
        print(f"stepscope: {error}", flush=True, file=sys.stderr)
        self.faults.record(
            f"helper-{h.name}", error, exit_code=exit_code, signal=sig, stderr=tail,
            restarts=h.restarts, helper_pid=pid,
        )  # fmt: skip

    def stop(self) -> None:
        """Ask the sampler to stop and wait for every helper to finish its last write."""
        for h in self.helpers:
            if h.name == SAMPLER and h.proc is not None:
                h.proc.send_signal(signal.SIGTERM)
            h.tell_end()  # the rule runner's word: it ends on it, not on job.json
        for h in self.helpers:  # the rule runner finishes its final scan by itself
            if h.proc is None:
                continue
            try:
                h.proc.wait(timeout=HELPER_WAIT_S)
            except subprocess.TimeoutExpired:
                h.proc.kill()
                h.proc.wait()
            h.close()

    def alive(self) -> bool:
        return any(h.proc is not None and h.proc.poll() is None for h in self.helpers)
