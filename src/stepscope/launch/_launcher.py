"""``stepscope run``: run a command as a managed, watched job.

The launcher creates the job folder, injects the agent into the Python process
(``sitecustomize`` on ``PYTHONPATH``, no change to the script), starts the node's
system sampler and the live rule runner in their own processes, keeps a
heartbeat, forwards signals, takes stop requests from the control channel, and
records how the job ended. It exits with the command's own exit code.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING

from stepscope.jobfolder import (
    FaultLog,
    Heartbeat,
    JobJson,
    JobMeta,
    JsonObject,
    control,
    paths,
    read_all,
    update_meta,
    write_heartbeat,
    write_meta,
)
from stepscope.launch._folder import FolderWatch, start_error
from stepscope.launch._supervise import Helpers
from stepscope.process import pidfd, wait_child
from stepscope.store import Store, open_store

if TYPE_CHECKING:
    from stepscope.launch._dist_job import NodeLauncher

# The agent's sitecustomize, put on the command's PYTHONPATH by path (never imported here).
BOOTSTRAP_DIR = str(Path(__file__).parents[1] / "agent" / "_bootstrap")
HEARTBEAT_S = 2.0
STOP_GRACE_S = 10.0
DISK_FULL_BYTES = 1 << 20  # less free space than this under a local job folder: recorded


@dataclass
class RunSpec:
    """What to run and where, resolved by the CLI from the configuration."""

    command: list[str]
    output: str
    job: str
    interval_ms: int = 500
    config: JsonObject = field(default_factory=dict)
    node: str = field(
        default_factory=lambda: os.environ.get("STEPSCOPE_NODE") or socket.gethostname()
    )
    rules: bool = True
    # set for torchrun jobs (_dist_job.NodeLauncher): shared job.json, clock offset
    dist: NodeLauncher | None = None


def say(msg: str) -> None:
    print(f"stepscope: {msg}", file=sys.stderr, flush=True)


def _job_meta(spec: RunSpec) -> JobMeta:
    return JobMeta.new(spec.job, spec.command, spec.config, [spec.node])


def _child_env(spec: RunSpec, store: Store) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (BOOTSTRAP_DIR, env.get("PYTHONPATH")) if p)
    agent: JsonObject = {"job_url": store.url, "node": spec.node, "config": spec.config}
    if spec.dist is not None:
        agent["clock"] = spec.dist.agent_clock()
        if (rank := spec.dist.agent_rank()) is not None:
            agent["rank"] = rank
    env["STEPSCOPE_AGENT"] = json.dumps(agent)
    return env


def _exit_code(returncode: int) -> int:
    return 128 - returncode if returncode < 0 else returncode


class _Supervisor:
    """Waits for the command; heartbeats, signals and stop requests meanwhile."""

    def __init__(
        self, store: Store, spec: RunSpec, child: subprocess.Popen[bytes], helpers: Helpers
    ) -> None:
        self.store, self.spec, self.child, self.helpers = store, spec, child, helpers
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
                now = time.time()
                self.helpers.check(now)
                if now - last_beat >= self.beat_s:
                    last_beat = now
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
                self._stop_sent = time.time()
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


def node_status(
    code: int, stop_reason: str | None, what: str = "the command", error: str | None = None
) -> tuple[str, str | None]:
    """Status and reason of a job (or a torchrun node) whose ``what`` exited with ``code``
    (``error``: the exception line of the rank that failed, if one was recorded)."""
    if stop_reason is not None:
        return "Stopped", stop_reason
    if code == 0:
        return "Completed", None
    return "Failed", f"{what} exited with code {code}" + (f": {error}" if error else "")


def rank_error(store: Store) -> str | None:
    """The exception line (``ValueError: bad shape``) of the first rank that failed,
    from ``ranks/rank-<r>.json``; None if no rank recorded one."""
    failed = [r for r in read_all(store, paths.RANKS) if r.get("status") == "Failed"]
    failed = [r for r in failed if isinstance(r.get("error"), str)]
    failed.sort(key=lambda r: float(t) if isinstance(t := r.get("time"), int | float) else 0.0)
    return str(failed[0]["error"]) if failed else None


def disk_full(store: Store, faults: FaultLog) -> None:
    """Record a full disk under a local job folder (its writes fail, the job goes on)."""
    path = store.local_path()
    try:
        free = shutil.disk_usage(path).free if path is not None else None
    except OSError:
        return
    if free is not None and free < DISK_FULL_BYTES:
        faults.record("disk", f"No space left on device: {free} bytes free under {path}")


def _finish(
    store: Store, spec: RunSpec, code: int, stop_reason: str | None, faults: FaultLog
) -> JobJson:
    error = rank_error(store) if code and stop_reason is None else None
    status, reason = node_status(code, stop_reason, error=error)
    disk_full(store, faults)
    faults.flush()
    changes: JobJson = {"status": status, "reason": reason, "exit_code": code}
    changes["end_time"] = time.time()
    if unsaved := faults.pending():  # job.json has room kept for them (a full disk)
        changes["faults"] = unsaved
    return update_meta(store, **changes)


def run(spec: RunSpec) -> int:
    """Run ``spec.command`` as a job; returns the command's exit code."""
    store = open_store(spec.output).sub(spec.job)
    try:  # any failure to create the job folder: one line, exit 2, no job started
        if spec.dist is None:
            write_meta(store, _job_meta(spec))
        else:
            spec.dist.begin(_job_meta(spec))
    except OSError as exc:
        raise start_error(store.url, exc) from None
    say(f"job {spec.job!r} -> {store.url}")
    started = time.time()
    child = subprocess.Popen(spec.command, env=_child_env(spec, store))
    helpers = Helpers(spec, store, child.pid, FaultLog(store, spec.node, os.getpid()))
    sup = _Supervisor(store, spec, child, helpers)
    old = {s: signal.signal(s, sup.on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    helpers.start()
    try:
        code = _exit_code(sup.wait())
    finally:
        for s, h in old.items():
            signal.signal(s, h)
    meta: JobJson
    try:
        if spec.dist is None:
            meta = _finish(store, spec, code, sup.stop_reason, helpers.faults)
        else:
            meta = spec.dist.finish(code, sup.stop_reason)
    except OSError as exc:  # the store is failing: the exit code is still the command's
        sup.folder.end_failed(exc)
        status = node_status(code, sup.stop_reason)[0]
        meta = {"status": status, "end_time": time.time(), "start_time": started}
    finally:
        if spec.dist is not None:
            spec.dist.close()
    helpers.stop()
    end = meta.get("end_time")
    took = (time.time() if end is None else end) - meta.get("start_time", started)
    say(f"job {spec.job!r} {meta['status']} (exit {code}) after {took:.1f} s{sup.folder.where()}")
    return code
