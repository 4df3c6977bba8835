"""Is the job alive? Heartbeats, the liveness they give ``job.json``, and the end of a
job whose launcher died.

A launcher (or standalone agent) writes ``heartbeat/<node>.json`` while it runs; a
``Running`` job without a recent one is ``Unknown``, unless its ranks recorded how
the training ended (:func:`end_without_launcher`).
"""

from __future__ import annotations

import os
import time
from dataclasses import asdict, dataclass

from stepscope.jobfolder import _paths as paths
from stepscope.jobfolder._constants import HEARTBEAT_STALE_S
from stepscope.jobfolder._json import JobJson
from stepscope.jobfolder._records import (
    RECORD_RESERVE,
    FolderIO,
    read_all,
    read_meta,
    update_meta,
)


@dataclass(frozen=True)
class Heartbeat:
    """``heartbeat/<node>.json``: a launcher (or standalone agent) is alive at ``time``."""

    time: float
    pid: int
    interval_s: float

    @classmethod
    def now(cls, interval_s: float) -> Heartbeat:
        return cls(time.time(), os.getpid(), interval_s)


def write_heartbeat(io: FolderIO, node: str, beat: Heartbeat) -> None:
    io.write_json(paths.heartbeat_key(node), asdict(beat), reserve=RECORD_RESERVE)


def heartbeats(io: FolderIO) -> dict[str, float]:
    """The newest heartbeat time of each node (unreadable heartbeats are left out)."""
    out: dict[str, float] = {}
    for key in io.list(paths.HEARTBEAT, suffix=paths.JSON):
        try:
            beat = io.read_json(key)
            if isinstance(beat, dict):
                out[paths.stem(key)] = float(beat["time"])
        except (OSError, ValueError, KeyError, TypeError):
            continue
    return out


def liveness(meta: JobJson, beats: dict[str, float], now: float) -> JobJson:
    """``meta`` with ``alive``; a ``Running`` job without a recent heartbeat becomes
    ``Unknown``: its launcher was lost and nothing recorded how the training ended.

    A job younger than :data:`HEARTBEAT_STALE_S` without a heartbeat yet is
    starting, alive: its first heartbeat may not be written yet.
    """
    meta = {**meta, "alive": False}
    if meta.get("status") != "Running":
        return meta
    newest = max(beats.values()) if beats else None
    if newest is None and isinstance(start := meta.get("start_time"), int | float):
        newest = float(start)  # not stale before a heartbeat is due
    age = now - newest if newest is not None else None
    if age is not None and age <= HEARTBEAT_STALE_S:
        meta["alive"] = True
    else:
        seen = f"for {age:.0f} s" if beats and age is not None else "recorded"
        meta["status"] = "Unknown"
        meta["reason"] = f"launcher lost, training state unknown (no heartbeat {seen})"
    return meta


def end_without_launcher(io: FolderIO, now: float) -> JobJson | None:
    """Record the end of a job whose launcher died, from its ranks' own records
    (``ranks/rank-<r>.json``, written by each agent at exit); None if already ended."""
    meta = read_meta(io)
    if meta.get("status") != "Running":
        return None
    ranks = read_all(io, paths.RANKS)
    ended = [r for r in ranks if r.get("status") in ("Exited", "Failed", "Terminated")]
    codes = [c for r in ended if isinstance(c := r.get("exit_code"), int)]
    lost = "launcher lost; "
    if not ranks or len(ended) < len(ranks):
        status, code = "Unknown", None
        reason = lost + "the training ended without recording how (killed?)"
    else:
        code = max(codes, key=abs) if codes else None
        failed = [r for r in ended if r.get("status") != "Exited"]
        status = "Completed" if code == 0 and not failed else "Failed"
        error = str(failed[0].get("error")) if failed else None
        reason = lost + ("the training recorded its end" if error is None else error)
    return update_meta(io, status=status, reason=reason, exit_code=code, end_time=now)
