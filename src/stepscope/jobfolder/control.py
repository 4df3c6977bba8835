"""The control channel of a running job: requests written into its folder.

Anything that wants to change a running job (the CLI, a rule's action, the
dashboard) writes one request file ``control/<kind>-<time_ms>-<nonce>.json``;
the launcher (stop) and the agent (profiling windows, sampling interval) poll
``control/`` every second or two and acknowledge each request they took in
``control/ack/<same name>``. Requests are JSON data, never code; a malformed
one is acknowledged as rejected with the reason. Works wherever the job folder
lives, since it only writes whole files.
"""

from __future__ import annotations

import os
import secrets
import time
from typing import TypedDict, cast

from stepscope.jobfolder import _paths as paths
from stepscope.jobfolder._json import JsonObject
from stepscope.jobfolder._records import FolderIO

CONTROL = paths.CONTROL
ACK = paths.ACK
KINDS = ("stop", "config", "profile")


class Ack(TypedDict):
    """``control/ack/<request>``: whether a request was applied, and why not."""

    accepted: bool
    detail: str
    time: float


def request(store: FolderIO, kind: str, body: JsonObject, by: str) -> str:
    """Write a request of ``kind`` into the job and return its name."""
    if kind not in KINDS:
        raise ValueError(f"Unknown control request {kind!r}. Valid kinds: {', '.join(KINDS)}.")
    name = f"{kind}-{int(time.time() * 1000):013d}-{secrets.token_hex(4)}.json"
    payload = {"kind": kind, "by": by, "time": time.time(), "pid": os.getpid(), **body}
    store.write_json(f"{CONTROL}/{name}", payload)
    return name


def request_stop(store: FolderIO, reason: str, by: str) -> str:
    """Ask the launcher to stop the job gracefully; it ends as ``Stopped``."""
    return request(store, "stop", {"reason": reason}, by)


def pending(store: FolderIO, kind: str, seen: set[str]) -> list[tuple[str, object]]:
    """Requests of ``kind`` not yet in ``seen``, oldest first (bad JSON gives None).

    The bodies are as read, not validated: :func:`stepscope.jobfolder.parse_request`
    checks a profile request.
    """
    out: list[tuple[str, object]] = []
    for key in store.list(CONTROL, suffix=".json"):
        name = key.rsplit("/", 1)[-1]
        if key.startswith(ACK) or not name.startswith(kind + "-") or name in seen:
            continue
        seen.add(name)
        try:
            out.append((name, store.read_json(key)))
        except (OSError, ValueError):
            out.append((name, None))
    return out


# How long after this process first saw a modification time of control/ it keeps
# listing the folder: a file system that keeps mtimes coarsely (FAT: 2 s) may give a
# second request written within one tick the same mtime. Timed on this process's
# monotonic clock, so neither the polls' period nor another host's clock matters.
RECENT_NS = 3_000_000_000


class Requests:
    """The new requests of one kind, for a loop that polls every second or so.

    On a local job folder the poll first reads ``control/``'s modification time
    (one system call; a new request changes it, being renamed into the folder)
    and lists the folder only while that time is new: until a listing that
    started ``RECENT_NS`` after this process first saw it has succeeded. Inside
    the training process every listing is a dozen system calls, each of which
    may hand the GIL to the training thread and back (BENCHMARKS.md, "GIL
    handoffs"). Object stores are listed at every poll. Requests sit directly
    in ``control/`` (a file in a subfolder does not change its mtime).
    """

    def __init__(self, store: FolderIO, kind: str) -> None:
        self.store, self.kind = store, kind
        self.seen: set[str] = set()
        self._stamp: int | None = None
        self._first_seen = 0  # monotonic ns at which _stamp was first read
        self._quiet = False  # a listing after RECENT_NS of _stamp succeeded

    def pending(self) -> list[tuple[str, object]]:
        """Requests not returned before, oldest first (bad JSON gives None)."""
        stamp = self._folder_stamp()
        if stamp is None or stamp != self._stamp:
            self._stamp, self._first_seen, self._quiet = stamp, time.monotonic_ns(), False
        elif self._quiet:
            return []
        started = time.monotonic_ns()
        found = pending(self.store, self.kind, self.seen)  # a failure: listed again next time
        self._quiet = stamp is not None and started - self._first_seen > RECENT_NS
        return found

    def _folder_stamp(self) -> int | None:
        """``control/``'s mtime in ns (0 while it does not exist); None: list anyway."""
        folder = self.store.local_path(CONTROL)
        if folder is None:
            return None
        try:
            return os.stat(folder).st_mtime_ns
        except FileNotFoundError:
            return 0
        except OSError:
            return None  # the listing reports what is wrong


def acknowledge(store: FolderIO, name: str, accepted: bool, detail: str = "") -> None:
    """Record that a request was applied (or rejected, and why)."""
    ack = Ack(accepted=accepted, detail=detail, time=time.time())
    store.write_json(f"{ACK}/{name}", ack)


def acknowledgement(store: FolderIO, name: str) -> Ack | None:
    """The acknowledgement of request ``name``, or None while it is pending.

    Acknowledgements are written by :func:`acknowledge` only; a body that is not a
    JSON object (a damaged file) raises ``ValueError``.
    """
    key = f"{ACK}/{name}"
    if not store.exists(key):
        return None
    ack = store.read_json(key)
    if not isinstance(ack, dict):
        raise ValueError(f"the acknowledgement {key!r} is not a JSON object")
    return cast(Ack, ack)


# --- the request bodies every writer uses (CLI, dashboard, rule actions) -------------
#
# profile: {"windows": [ProfilingWindow.to_dict(), ...]} where, in a live request, a
#          None start_step means "the current step" and a None num_steps one step;
#          or {"off": ["python", ...]} to switch running/planned windows of kinds off.
# config:  {"system_monitor_interval_millis": <one of SYSTEM_MONITOR_INTERVALS>}
# stop:    {"reason": "..."} (optionally "rule" and "finding" when a rule asks).


def check_windows(windows: list[JsonObject]) -> None:
    """Validate live window requests exactly as the agent will (``RequestError`` if bad).

    The agent's own parser decides (a blank start is the current step, a lone
    duration a time window from now), so the CLI and the dashboard never accept
    what the job would reject, nor reject what it would take.
    """
    from stepscope.jobfolder._requests import parse_request

    parse_request("check", {"windows": windows}, time.time())


def request_profile(
    store: FolderIO, windows: list[JsonObject], by: str, off: list[str] | None = None
) -> str:
    """Ask the running agent(s) to open profiling ``windows`` (or switch kinds ``off``)."""
    body: JsonObject = {"windows": windows}
    if off:
        body["off"] = off
    return request(store, "profile", body, by)


def request_interval(store: FolderIO, interval_ms: int, by: str) -> str:
    """Ask the job's system sampler(s) to sample every ``interval_ms`` from now on."""
    return request(store, "config", {"system_monitor_interval_millis": interval_ms}, by)
