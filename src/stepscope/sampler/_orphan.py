"""The sampler's duties once the launcher is gone and the training still runs.

When the launcher dies before the training, the sampler goes on (monitoring does
not stop while training runs), writes the node's heartbeat in its place, and when
the training ends records the end from the ranks' own records
(:func:`stepscope.jobfolder.end_without_launcher`). In a torchrun job (a
``launchers/<node>.json`` record, several ranks, maybe several nodes) it first ends
its node's launcher record from the node's ranks, as the launcher would have;
``job.json`` is ended by whoever ends last: a live launcher of another node
aggregates every node's record, and an orphaned sampler ends it only once no
node's launcher record is still ``Running`` (the end then comes from every rank's
record: the worst exit code).
"""

from __future__ import annotations

import contextlib
import os
import time

from stepscope.jobfolder import (
    FaultLog,
    Heartbeat,
    JsonObject,
    end_without_launcher,
    paths,
    read_all,
    write_heartbeat,
)
from stepscope.store import Store

HEARTBEAT_S = 2.0
ENDED = ("Exited", "Failed", "Terminated")  # a rank record's end statuses


class Orphan:
    """Heartbeat and end of a node whose launcher died (all store calls in
    :meth:`beat` and :meth:`end`: the flush thread and the sampler's exit)."""

    def __init__(self, store: Store, node: str, log: FaultLog) -> None:
        self.store, self.node, self.log = store, node, log
        self.active = False
        self._announced = False
        self._beat = 0.0

    def begin(self) -> None:
        """The launcher is gone (the sampling thread: no store call here)."""
        self.active = True

    def beat(self) -> None:
        if not self.active:
            return
        if not self._announced:
            self._announced = True
            self.log.record(
                "launcher",
                f"the launcher of node {self.node} ended before the training; the sampler "
                f"(pid {os.getpid()}) keeps sampling and records the job's end",
            )
        if time.monotonic() - self._beat >= HEARTBEAT_S:
            self._beat = time.monotonic()
            with contextlib.suppress(Exception):
                write_heartbeat(self.store, self.node, Heartbeat.now(HEARTBEAT_S))

    def end(self, when: float) -> None:
        """The training ended at ``when``: record the job's end (unless someone did)."""
        if not self.active:
            return
        self.beat()  # the launcher's record, if no flush wrote it yet
        with contextlib.suppress(Exception):
            if end_node(self.store, self.node, when):
                end_without_launcher(self.store, when)


def end_node(store: Store, node: str, when: float) -> bool:
    """End ``launchers/<node>.json`` (torchrun jobs) from the node's rank records;
    True if ``job.json`` is this sampler's to end (no other node still running)."""
    key = paths.launcher_key(node)
    if not store.exists(key):
        return True  # a plain job: the launcher's record is job.json itself
    record = store.read_json(key)
    if isinstance(record, dict) and record.get("status") == "Running":
        ranks = [r for r in read_all(store, paths.RANKS) if r.get("node") == node]
        store.write_json(key, record | node_end(ranks, when))
    others = read_all(store, paths.LAUNCHERS)
    return not any(r.get("status") == "Running" for r in others)


def node_end(ranks: list[JsonObject], when: float) -> JsonObject:
    """A node's end (``status``, ``reason``, ``exit_code``) from its ranks' records."""
    ended = [r for r in ranks if r.get("status") in ENDED]
    codes = [c for r in ended if isinstance(c := r.get("exit_code"), int)]
    lost = "launcher lost; "
    if not ranks or len(ended) < len(ranks) or not codes:
        status, code, reason = "Failed", None, lost + "the training ended without recording how"
    else:
        code = max(codes, key=abs)
        failed = [r for r in ended if r.get("status") != "Exited"]
        status = "Completed" if code == 0 and not failed else "Failed"
        error = f"torchrun's ranks exited with code {code}" if status == "Failed" else None
        reason = lost + (error or "the training recorded its end")
    return {"status": status, "reason": reason, "exit_code": code, "end_time": when}
