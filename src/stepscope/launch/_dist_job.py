"""One node's launcher in a torchrun job: shared job.json, clock offset, the job's end.

Every node runs its own ``stepscope run`` into the same job folder. Node files
never collide (``launchers/<node>.json``, ``clock/<node>.json``,
``heartbeat/<node>.json``, ``system/<node>/``); ``job.json`` is written by node
rank 0 at the start (by any node that finds none) and, at each node's end,
rewritten with the status aggregated over every node and rank. docs/distributed.md.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable

from stepscope.jobfolder import (
    HEARTBEAT_STALE_S,
    ClockReference,
    FaultLog,
    JobJson,
    JobMeta,
    JsonObject,
    LauncherRecord,
    as_clock_reference,
    as_launcher_record,
    heartbeats,
    is_job,
    job_timeline,
    paths,
    read_all,
    update_meta,
    write_meta,
)
from stepscope.launch._clocksync import Offset, TimeServer, measure, skewed_clock
from stepscope.launch._command_watch import say
from stepscope.launch._ending import incomplete_of_ranks, node_status, record_abrupt
from stepscope.launch._torchrun import Plan
from stepscope.store import Store

CLOCK_WAIT_S = 120.0
REFERENCE = paths.CLOCK_REFERENCE


def _time(rank: JsonObject) -> float:
    """When a rank's record was written (a record without a time sorts last)."""
    t = rank["time"]
    return float(t) if isinstance(t, int | float) else math.inf


def culprit(ranks: list[JsonObject]) -> str | None:
    """Which rank failed first, on which node, and how (from ``ranks/rank-<r>.json``)."""
    failed = sorted((r for r in ranks if r.get("status") == "Failed"), key=_time)
    if failed:
        r = failed[0]
        at = f" at {r['at']}" if r.get("at") else ""
        return (
            f"rank {r['rank']} (local rank {r['local_rank']}) on node {r['node']} failed "
            f"first: {r.get('error')}{at}"
        )
    silent = [r for r in ranks if r.get("status") in ("Running", "Abrupt")]
    if silent:
        names = ", ".join(f"rank {r['rank']} on node {r['node']}" for r in silent)
        return f"{names} ended without a record (killed, or crashed hard)"
    return None


def aggregate(
    nodes: list[LauncherRecord],
    ranks: list[JsonObject],
    beats: dict[str, float],
    now: float,
) -> JobJson:
    """The job's status fields from every node's launcher record and every rank's record.

    ``beats`` holds each node's newest heartbeat: a node whose launcher died
    still says ``Running``, and counts as failed once its heartbeat is stale.
    """
    statuses = {n["node"]: n["status"] for n in nodes}
    for n in nodes:
        if n["status"] == "Running" and now - beats.get(n["node"], 0.0) > HEARTBEAT_STALE_S:
            statuses[n["node"]] = "Failed"
    codes = [n.get("exit_code") for n in nodes if n.get("exit_code")]
    out: JobJson = {"nodes_status": statuses, "hosts": sorted(statuses)}
    out["failed_ranks"] = sorted((r for r in ranks if r.get("status") == "Failed"), key=_time)
    if (incomplete := incomplete_of_ranks(ranks)) is not None:  # any node's abrupt ranks
        out |= {"incomplete": True, "incomplete_reason": incomplete}
    if "Running" in statuses.values():
        return out | {"status": "Running", "end_time": None}
    ends = [float(n["end_time"]) for n in nodes if n.get("end_time")]
    out |= {"end_time": max(ends, default=now), "exit_code": codes[0] if codes else 0}
    if "Failed" in statuses.values():
        bad = sorted(k for k, v in statuses.items() if v == "Failed")
        why = culprit(ranks) or next((n["reason"] for n in nodes if n.get("reason")), None)
        return out | {"status": "Failed", "reason": f"{why} (failed nodes: {', '.join(bad)})"}
    if "Stopped" in statuses.values():
        reason = next(n["reason"] for n in nodes if n["status"] == "Stopped")
        return out | {"status": "Stopped", "reason": reason}
    return out | {"status": "Completed", "reason": None}


class NodeLauncher:
    """What one node's ``stepscope run`` adds to a plain run in a torchrun job."""

    def __init__(self, plan: Plan, store: Store) -> None:
        self.plan, self.store = plan, store
        self.clock = skewed_clock(plan.clock_skew_s)
        self.server: TimeServer | None = None
        self.offset: Offset | None = None
        self.record: LauncherRecord = {}
        self._now: Callable[[], float] = time.time  # the job's timeline, from begin()

    @property
    def key(self) -> str:
        return paths.launcher_key(self.plan.node)

    def begin(self, meta: JobMeta) -> None:
        """Job metadata, this node's record, and its clock offset (before training starts)."""
        dist: JsonObject = {"launcher": self.plan.launcher, "nnodes": self.plan.nnodes}
        if self.plan.launcher == "tf_config":  # inside the compiled step, out of reach
            dist["collectives"] = "unmeasured"
        meta.extra["distributed"] = dist
        if self.plan.leader or not is_job(self.store):
            write_meta(self.store, meta)
        self._now = job_timeline(meta.to_dict())  # this node's: a wall step moves no end
        self.record = {
            "node": self.plan.node,
            "node_rank": self.plan.node_rank,
            "pid": os.getpid(),
            "status": "Running",
            "start_time": meta.start_time,
        }
        self.store.write_json(self.key, self.record)
        self._sync_clock()

    def agent_clock(self) -> dict[str, float]:
        """The ``clock`` entry of the agent's settings."""
        offset = self.offset.offset_s if self.offset is not None else 0.0
        return {"offset_s": offset, "skew_s": self.plan.clock_skew_s}

    def agent_rank(self) -> int | None:
        """The rank the agent takes when torchrun sets no ``RANK`` (a TensorFlow worker)."""
        return self.plan.rank

    def sampler_args(self) -> list[str]:
        """The node's clock for its system sampler: the same offset as its agents'."""
        offset = repr(self.offset.offset_s) if self.offset is not None else "none"
        # "--opt=value": argparse takes a negative value in e-notation ("-1.2e-05", a
        # node on the reference's machine) for an option and the sampler would not start.
        skew = [f"--clock-skew-s={self.plan.clock_skew_s!r}"] if self.plan.clock_skew_s else []
        return [f"--clock-offset-s={offset}", *skew]

    def _sync_clock(self) -> None:
        if not self.plan.multi_node:
            self.offset = Offset(0.0, 0.0)
        elif self.plan.leader:
            self._serve_reference()
            self.offset = Offset(0.0, 0.0)
        else:
            self.offset = self._measure()
        ref = None if self.plan.leader else self._reference()
        reference = self.plan.node if self.plan.leader else ref.get("node") if ref else None
        body: JsonObject = {
            "node": self.plan.node,
            "reference": reference,
            "measured_at": self.clock(),
        }
        if self.offset is not None:
            body |= {"offset_s": self.offset.offset_s, "rtt_s": self.offset.rtt_s}
            body["error_s"] = self.offset.error_s
        else:
            body |= {"offset_s": None, "error": "no reference clock reached"}
        self.store.write_json(paths.clock_key(self.plan.node), body)

    def _serve_reference(self) -> None:
        host = self.plan.rendezvous_host
        try:
            self.server = TimeServer(host, self.clock).start()
        except OSError as exc:
            say(f"clock reference not served on {host} ({exc}): other nodes stay unaligned")
            return
        ref = ClockReference(node=self.plan.node, host=host, port=self.server.port)
        self.store.write_json(REFERENCE, ref)

    def _reference(self) -> ClockReference | None:
        try:
            return as_clock_reference(self.store.read_json(REFERENCE), REFERENCE)
        except (OSError, ValueError):
            return None

    def _measure(self) -> Offset | None:
        deadline = time.monotonic() + CLOCK_WAIT_S
        while time.monotonic() < deadline:
            ref = self._reference()
            if ref:
                try:
                    return measure(str(ref["host"]), int(ref["port"]), self.clock)
                except OSError as exc:
                    say(f"clock reference {ref['host']}:{ref['port']} unreachable ({exc})")
                    return None
            time.sleep(0.2)
        say(f"no clock reference from node rank 0 within {CLOCK_WAIT_S:.0f} s: times unaligned")
        return None

    def finish(
        self, code: int, stop_reason: str | None, faults: FaultLog, child: tuple[int, int]
    ) -> JobJson:
        """Record this node's end and its ranks that ended abruptly; rewrite job.json with
        every node's and rank's status."""
        what = "torchrun" if self.plan.launcher == "torchrun" else "the worker"
        # torchrun has reaped its workers: a rank of this node still "Running" ended
        # without its agent's end. The ranks' times are the reference clock's.
        offset = self.offset.offset_s if self.offset is not None else 0.0
        aligned = self._now() + self.plan.clock_skew_s + offset
        record_abrupt(self.store, self.plan.node, aligned, faults, child)
        status, reason = node_status(code, stop_reason, what)
        self.record |= {"status": status, "reason": reason, "exit_code": code}
        self.record["end_time"] = self._now()
        self.store.write_json(self.key, self.record)
        meta: JobJson = {}
        nodes = self._launchers()
        for _ in range(3):  # another node may end at the same moment: settle on both
            ranks, beats = read_all(self.store, paths.RANKS), heartbeats(self.store)
            meta = update_meta(self.store, **aggregate(nodes, ranks, beats, self._now()))
            again = self._launchers()
            if again == nodes:
                break
            nodes = again
        if meta["status"] == "Running":  # what this launcher prints: its own end
            waiting = f"{status} here, other nodes still running"
            return meta | {"status": waiting, "end_time": self.record["end_time"]}
        return meta

    def _launchers(self) -> list[LauncherRecord]:
        """Every node's launcher record (``launchers/<node>.json``), in key order."""
        found = read_all(self.store, paths.LAUNCHERS)
        return [as_launcher_record(r, paths.LAUNCHERS) for r in found]

    def close(self) -> None:
        if self.server is not None:
            self.server.close()
