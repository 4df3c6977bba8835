"""The launcher's watch over its helpers while the training runs, and their stop at the
end (see ``_helpers``; what a hung or late helper was doing, and its kill: ``_hung``)."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from stepscope.jobfolder import FaultLog, JsonObject
from stepscope.launch._helpers import (
    FIRST_BACKOFF_S,
    HUNG_ENV,
    HUNG_S,
    MAX_BACKOFF_S,
    MAX_RESTARTS,
    STABLE_S,
    STOP_ENV,
    STOP_S,
    TRACKERS_STOP_S,
    Helper,
    _rules_cmd,
    _sampler_cmd,
    describe_exit,
    seconds_from_env,
)
from stepscope.launch._hung import ask_stacks, hung_for, kill_stuck
from stepscope.launch._stale import mark_stale
from stepscope.process import wait_child

if TYPE_CHECKING:
    from stepscope.launch._launcher import RunSpec
    from stepscope.store import Store

SAMPLER, RULES = "sampler", "rules-runner"
FORWARD_S = 2.0  # how often the helpers' stderr is copied to the launcher's
GAP_COMPONENT, GAP_INTERVALS, GAP_MIN_S = "sampling-gap", 3.0, 1.0  # as the sampler's
MARK_WAIT_S = 1.0  # for the stale marks: the store may be what held the rule runner


class Helpers:
    """The node's sampler and the live rule runner, started, watched and restarted."""

    def __init__(
        self,
        spec: RunSpec,
        store: Store,
        child_pid: int,
        faults: FaultLog,
        clock: Callable[[], float] = time.time,
    ) -> None:
        me = str(os.getpid())
        self.faults, self.store, self.clock = faults, store, clock
        self.interval_s = spec.interval_ms / 1e3
        self.stop_s = seconds_from_env(os.environ, STOP_ENV, STOP_S)
        if spec.rules and (spec.trackers or _notifies(spec.config)):
            # trackers close their runs, webhooks and commands deliver the final findings
            self.stop_s = max(self.stop_s, TRACKERS_STOP_S)
        self.hung_s = seconds_from_env(os.environ, HUNG_ENV, HUNG_S)
        sampler = _sampler_cmd(spec, store, child_pid, me)
        self.helpers = [Helper(SAMPLER, lambda extra: [*sampler, *extra], clock=clock)]
        # (no check that stepscope.rules is there: finding a submodule imports its package,
        # pandas and DuckDB, in the launcher: 0.6 s of CPU beside the training's start)
        if spec.rules:
            rules = _rules_cmd(store, me, spec.metrics, spec.trackers)
            self.helpers.append(
                Helper(RULES, lambda extra: [*rules, *extra], clock=clock, listens=True)
            )
        self._forwarded = 0.0
        self._told: float | None = None  # when the helpers were told the job ended

    def start(self) -> None:
        for h in self.helpers:
            h.start()

    def check(self, now: float) -> None:
        """Note the helpers that died or hung since the last call; start those that are due."""
        mono = time.monotonic()
        for h in self.helpers:
            if h.proc is not None and h.proc.poll() is None:
                if hung_for(h, mono) > self.hung_s:
                    self._hung(h, now)
                else:
                    h.last_alive = now
            elif h.proc is not None:
                self._died(h, h.proc.returncode, now)
            elif h.restart_at is not None and now >= h.restart_at:
                h.start()
        if now - self._forwarded >= FORWARD_S:
            self._forwarded = now
            for h in self.helpers:
                h.forward()

    def _hung(self, h: Helper, now: float) -> None:
        """Record what the hung helper was doing, kill it: restarted like a dead one."""
        assert h.proc is not None
        stuck = kill_stuck(h, ask_stacks([h]).get(h.name))
        how = f"hung ({stuck.phrase}), killed"
        self._died(h, -signal.SIGKILL, now, how=how, gap_start=stuck.progress, **stuck.fields)

    def _died(
        self,
        h: Helper,
        code: int,
        now: float,
        how: str | None = None,
        gap_start: float | None = None,
        **fields: object,
    ) -> None:
        h.forward()
        exited, exit_code, sig = describe_exit(code)
        how = how or exited
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
                start = h.last_alive if gap_start is None else gap_start
                h.extra = ["--gap-start", repr(start), "--gap-cause", f"sampler {how}"]
        else:
            then = f"not restarted: it died {MAX_RESTARTS + 1} times"
        last = f"; stderr: {tail[-1]}" if tail else ""
        error = f"{h.name} {how} after {lived:.1f} s; {then}{last}"
        print(f"stepscope: {error}", flush=True, file=sys.stderr)
        self.faults.record(
            f"helper-{h.name}", error, exit_code=exit_code, signal=sig, stderr=tail,
            restarts=h.restarts, helper_pid=pid, **fields,
        )  # fmt: skip

    def tell_end(self) -> None:
        """Tell every helper that the job has ended (once): the sampler (SIGTERM) takes
        its last sample and flushes; the rule runner (a word down its pipe) makes its
        final evaluation. The launcher records the job's end meanwhile."""
        if self._told is not None:
            return
        self._told = self.clock()
        for h in self.helpers:
            if h.name == SAMPLER and h.proc is not None:
                with contextlib.suppress(OSError):
                    h.proc.send_signal(signal.SIGTERM)
            h.tell_end()  # the rule runner's word: it ends on it, not on job.json

    def stop(self) -> None:
        """Tell the helpers (unless :meth:`tell_end` did), give them ``stop_s`` from now
        to finish, all together; kill the rest.

        A helper still running at the deadline is recorded with what it was doing
        and killed; the rule runner's verdicts are then marked stale, and the
        sampler's missing span is recorded as a sampling gap.
        """
        self.tell_end()
        began, deadline = self._told or self.clock(), time.monotonic() + self.stop_s
        for h in self.helpers:
            if h.proc is not None:
                wait_child(h.proc, None, max(0.0, deadline - time.monotonic()))
        late = [h for h in self.helpers if h.proc is not None and h.proc.poll() is None]
        stacks = ask_stacks(late)
        for h in late:
            self._late(h, stacks.get(h.name), began)
        for h in self.helpers:
            if h.name == SAMPLER and h.proc is None and h.restart_at is not None:
                self._end_gap(h.last_alive, began, "the sampler was dead at the end of the job")
            h.close()

    def _late(self, h: Helper, stack: list[str] | None, ended: float) -> None:
        """Record and kill a helper that did not finish in time (see :meth:`stop`)."""
        stuck = kill_stuck(h, stack)
        phrase = stuck.phrase
        error = f"{h.name} did not finish within {self.stop_s:g} s of the job's end ({phrase})"
        error += "; killed"
        if h.name == RULES:
            error += f"; {self._stale()}"
        elif h.name == SAMPLER:  # the gap starts at the newest sample it stored
            since = stuck.mark if stuck.mark is not None else stuck.progress
            self._end_gap(since, ended, f"the sampler was hung at the end of the job ({phrase})")
        print(f"stepscope: {error}", flush=True, file=sys.stderr)
        h.forward()
        self.faults.record(
            f"helper-{h.name}", error, stderr=h.tail(), helper_pid=stuck.pid, **stuck.fields
        )

    def _stale(self) -> str:
        """Mark the running verdicts stale (bounded: the store may be what hung)."""
        found: list[float | None] = []

        def mark() -> None:
            found.append(mark_stale(self.store))

        worker = threading.Thread(target=mark, name="stepscope-stale-marks", daemon=True)
        worker.start()
        worker.join(MARK_WAIT_S)
        if not found:
            return "its verdicts could not be marked stale (the job folder did not answer)"
        as_of = found[0]
        return "its verdicts are stale" + (f": as of {as_of:.1f} s" if as_of is not None else "")

    def _end_gap(self, start: float, end: float, cause: str) -> None:
        if end - start > max(GAP_INTERVALS * self.interval_s, GAP_MIN_S):
            self.faults.gap(GAP_COMPONENT, start, end, f"{cause}; recorded by the launcher")

    def alive(self) -> bool:
        return any(h.proc is not None and h.proc.poll() is None for h in self.helpers)


def _notifies(config: JsonObject) -> bool:
    """Whether a rule of the job's configuration has a webhook or command action
    (a table among its ``actions``; ``"stop"`` is a string)."""
    rules = config.get("rules")
    entries = rules if isinstance(rules, list) else []
    return any(
        isinstance(e, dict) and any(isinstance(a, dict) for a in (e.get("actions") or []))
        for e in entries
    )
