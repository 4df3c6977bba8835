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
import time
from collections.abc import Callable
from typing import TypedDict, cast

from stepscope.jobfolder import _channel
from stepscope.jobfolder import _paths as paths
from stepscope.jobfolder._json import JsonObject
from stepscope.jobfolder._records import FolderIO

CONTROL = paths.CONTROL
ACK = paths.ACK
TMP_MARKER = ".tmp-"  # the store's temporaries (store.TMP_MARKER; not imported here)
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
    import secrets  # here: its hashlib and hmac are 2 ms of every helper's start-up

    name = f"{kind}-{int(time.time() * 1000):013d}-{secrets.token_hex(4)}.json"
    payload = {"kind": kind, "by": by, "time": time.time(), "pid": os.getpid(), **body}
    store.write_json(f"{CONTROL}/{name}", payload)
    return name


def request_stop(store: FolderIO, reason: str, by: str) -> str:
    """Ask the launcher to stop the job gracefully; it ends as ``Stopped``."""
    return request(store, "stop", {"reason": reason}, by)


Reject = Callable[[str, str], None]


def pending(
    store: FolderIO, kind: str, seen: set[str], on_reject: Reject | None = None
) -> list[tuple[str, object]]:
    """Requests of ``kind`` not yet in ``seen``, oldest first.

    The bodies are as read, not validated: :func:`stepscope.jobfolder.parse_request`
    checks a profile request. A file that is not a readable request (not a regular
    file, too large, too deep, not JSON: ``_channel``) is not returned: it is
    acknowledged as rejected with the reason, recorded in ``faults/`` and passed to
    ``on_reject(name, reason)``; it never costs the other requests of the poll.
    """
    out: list[tuple[str, object]] = []
    for name in _names(store):
        if not name.startswith(kind + "-") or name in seen:
            continue
        seen.add(name)
        try:
            body = _channel.read_document(store, f"{CONTROL}/{name}")
        except FileNotFoundError:
            continue  # taken away by whoever wrote it
        if isinstance(body, _channel.Unreadable):
            _reject_unreadable(store, name, f"the request file {body.reason}", on_reject)
        else:
            out.append((name, body))
    return out


def _names(store: FolderIO) -> list[str]:
    """The file names directly in ``control/``: a local folder is read without
    following links (a link to a folder is not walked), an object store listed."""
    folder = store.local_path(CONTROL)
    if folder is None:
        keys = store.list(CONTROL, suffix=".json")
        return [k.rsplit("/", 1)[-1] for k in keys if not k.startswith(ACK + "/")]
    try:
        with os.scandir(folder) as entries:
            names = [e.name for e in entries if not e.is_dir(follow_symlinks=False)]
    except (FileNotFoundError, NotADirectoryError):
        return []
    return sorted(n for n in names if n.endswith(".json") and TMP_MARKER not in n)


def _reject_unreadable(store: FolderIO, name: str, reason: str, on_reject: Reject | None) -> None:
    _channel.record_refusal(store, name, reason)
    try:
        acknowledge(store, name, False, reason)
        if on_reject is not None:
            on_reject(name, reason)
    except Exception as exc:  # one request's trouble is not the next one's
        _channel.record_refusal(store, name, f"its rejection failed: {type(exc).__name__}: {exc}")


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

    def __init__(self, store: FolderIO, kind: str, on_reject: Reject | None = None) -> None:
        self.store, self.kind, self.on_reject = store, kind, on_reject
        self.seen: set[str] = set()
        self._stamp: int | None = None
        self._first_seen = 0  # monotonic ns at which _stamp was first read
        self._quiet = False  # a listing after RECENT_NS of _stamp succeeded

    def pending(self) -> list[tuple[str, object]]:
        """Requests not returned before, oldest first (unreadable ones: :func:`pending`)."""
        stamp = self._folder_stamp()
        if stamp is None or stamp != self._stamp:
            self._stamp, self._first_seen, self._quiet = stamp, time.monotonic_ns(), False
        elif self._quiet:
            return []
        started = time.monotonic_ns()
        # a failed listing raises: listed again next time
        found = pending(self.store, self.kind, self.seen, self.on_reject)
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


def acknowledge(store: FolderIO, name: str, accepted: bool, detail: str = "") -> bool:
    """Record that a request was applied (or rejected, and why); False if refused.

    An acknowledgement is written only inside the job folder: when ``control/ack``
    (or ``control/``) is a link or not a folder, nothing is written and the refusal
    is recorded in ``faults/`` (``_channel.check_ack_folder``).
    """
    try:
        _channel.check_ack_folder(store)
    except _channel.AckRefused as exc:
        _channel.record_refusal(store, name, f"its acknowledgement was not written: {exc}")
        return False
    ack = Ack(accepted=accepted, detail=detail, time=time.time())
    store.write_json(f"{ACK}/{name}", ack)
    return True


def acknowledgement(store: FolderIO, name: str) -> Ack | None:
    """The acknowledgement of request ``name``, or None while it is pending.

    Acknowledgements are written by :func:`acknowledge` only; a file that is not a
    JSON object (damaged, a FIFO, a link) raises ``ValueError`` saying so.
    """
    key = f"{ACK}/{name}"
    if not store.exists(key):
        return None
    try:
        ack = _channel.read_document(store, key)
    except FileNotFoundError:
        return None
    if isinstance(ack, _channel.Unreadable):
        raise ValueError(f"the acknowledgement {key!r} {ack.reason}")
    if not isinstance(ack, dict):
        raise ValueError(f"the acknowledgement {key!r} is not a JSON object")
    return cast(Ack, ack)


# --- the request bodies every writer uses (CLI, dashboard, rule actions) -------------
#
# profile: {"windows": [ProfilingWindow.to_dict(), ...]} where, in a live request, a
#          None start_step means "the current step" (plus "step_offset" steps when
#          given: ``--steps +K:N``) and a None num_steps one step; a time window
#          with a None start_unix_time starts when the job applies it;
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
