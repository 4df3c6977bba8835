"""Typed records of the job folder's JSON files, and their reads and writes.

Every part reads and writes ``job.json``, heartbeats and faults through these
functions, over :class:`FolderIO` (the few methods of a :class:`stepscope.store.Store`
they need), so that the folder's layout and its version check live in one place.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Protocol, Unpack

from stepscope.errors import JobFolderError, JobNotFoundError
from stepscope.jobfolder import _paths as paths
from stepscope.jobfolder._json import JobJson, JsonObject, as_job_json
from stepscope.jobfolder._schemas import FORMAT_VERSION, HEARTBEAT_STALE_S
from stepscope.jobfolder._validate import check_job_json


class FolderIO(Protocol):
    """What the job folder's code needs of a store (``stepscope.store.Store`` has it)."""

    @property
    def url(self) -> str: ...

    def read_json(self, key: str) -> object: ...

    def write_json(self, key: str, obj: object) -> None: ...

    def exists(self, key: str) -> bool: ...

    def list(self, prefix: str = "", suffix: str = "") -> list[str]: ...

    def local_path(self, key: str = "") -> str | None: ...


@dataclass
class JobMeta:
    """``job.json``: what ran, where, and how it ended (docs/format.md).

    ``extra`` holds the additions of torchrun jobs (``distributed``, ``nodes_status``,
    ``failed_ranks``) and anything a newer writer added, kept as they are.
    """

    name: str
    command: list[str]
    cwd: str
    config: JsonObject
    hosts: list[str]
    start_time: float
    end_time: float | None = None
    status: str = "Running"
    exit_code: int | None = None
    reason: str | None = None
    stepscope_version: str = ""
    format_version: int = FORMAT_VERSION
    extra: JsonObject = field(default_factory=dict)

    @classmethod
    def new(
        cls, name: str, command: Sequence[str], config: JsonObject, hosts: list[str]
    ) -> JobMeta:
        """The record of a job starting now, in this working directory."""
        from stepscope import __version__

        return cls(
            name=name,
            command=list(command),
            cwd=os.getcwd(),
            config=config,
            hosts=hosts,
            start_time=time.time(),
            stepscope_version=__version__,
        )

    def to_dict(self) -> JsonObject:
        """The body of ``job.json``: ``format_version`` first, ``extra`` merged in."""
        body = asdict(self)
        extra = body.pop("extra")
        return {"format_version": body.pop("format_version"), **body, **extra}

    @classmethod
    def from_dict(cls, body: JsonObject) -> JobMeta:
        """The record of a ``job.json`` body; keys it does not know go to ``extra``."""
        known = {f for f in cls.__dataclass_fields__ if f != "extra"}
        given = {k: v for k, v in body.items() if k in known}
        extra = {k: v for k, v in body.items() if k not in known}
        return cls(**given, extra=extra)  # type: ignore[arg-type]  # job.json's own fields


def is_job(io: FolderIO, key: str = "") -> bool:
    """Whether ``key`` (a sub-folder, or the folder itself) holds a job (a job.json)."""
    return io.exists(f"{key}/{paths.JOB_JSON}" if key else paths.JOB_JSON)


def read_meta(io: FolderIO) -> JobJson:
    """``job.json`` as written (no liveness correction), after the version check."""
    try:  # one read, no existence check first: each is a request on object storage
        body = io.read_json(paths.JOB_JSON)
    except FileNotFoundError:
        raise JobNotFoundError(
            f"No stepscope job at {io.url!r}: it has no job.json. "
            "Pass a job folder (OUT/JOB), e.g. one listed by `stepscope ls OUT`."
        ) from None
    except IsADirectoryError:
        raise JobFolderError(f"job.json of {io.url!r} is a folder, not a file: damaged") from None
    except ValueError as exc:  # empty, cut short, not JSON, not UTF-8
        raise JobFolderError(
            f"job.json of {io.url!r} is not valid JSON ({str(exc)[:80]}): damaged; "
            "restore it from a copy, or remove the job folder."
        ) from None
    return check_job_json(body, io.url)


def write_meta(io: FolderIO, meta: JobMeta | JobJson) -> None:
    """Write ``job.json`` whole (a rename locally, one PUT on object storage)."""
    io.write_json(paths.JOB_JSON, meta.to_dict() if isinstance(meta, JobMeta) else meta)


def update_meta(io: FolderIO, **changes: Unpack[JobJson]) -> JobJson:
    """Read ``job.json``, apply ``changes`` and write it back; returns the new body."""
    meta = as_job_json(io.read_json(paths.JOB_JSON), f"job.json of {io.url!r}")
    meta.update(changes)
    io.write_json(paths.JOB_JSON, meta)
    return meta


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
    io.write_json(paths.heartbeat_key(node), asdict(beat))


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
    """``meta`` with ``alive``, and a ``Running`` job without a recent heartbeat as
    ``Failed`` (its launcher was killed and could not record the end)."""
    meta = {**meta, "alive": False}
    if meta.get("status") != "Running":
        return meta
    newest = max(beats.values()) if beats else None
    age = now - newest if newest is not None else None
    if age is not None and age <= HEARTBEAT_STALE_S:
        meta["alive"] = True
    else:
        seen = f"for {age:.0f} s" if age is not None else "recorded"
        meta["status"] = "Failed"
        meta["reason"] = f"lost: no heartbeat {seen} (launcher killed?)"
    return meta


def read_all(
    io: FolderIO,
    prefix: str,
    suffix: str = paths.JSON,
    skipped: dict[str, str] | None = None,
    problem: Callable[[JsonObject], str | None] | None = None,
) -> list[JsonObject]:
    """Every readable JSON record under ``prefix`` (faults, window records, ...), in key
    order; a record being rewritten or damaged (not an object, or ``problem(record)``
    says why) is skipped, not fatal, and noted in ``skipped`` (key -> why) when given."""
    out: list[JsonObject] = []
    for key in io.list(prefix, suffix=suffix):
        try:
            body = io.read_json(key)
        except (OSError, ValueError) as exc:
            why = "not valid JSON" if isinstance(exc, ValueError) else type(exc).__name__
        else:
            bad = None if not isinstance(body, dict) or problem is None else problem(body)
            if isinstance(body, dict) and bad is None:
                out.append(body)
                continue
            why = bad or f"a JSON {type(body).__name__}, not an object"
        if skipped is not None:
            skipped[key] = why
    return out
