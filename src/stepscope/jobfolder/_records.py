"""Typed records of the job folder's JSON files, and their reads and writes.

Every part reads and writes ``job.json``, heartbeats (``_liveness``) and faults through
these functions, over :class:`FolderIO` (the few methods of a :class:`stepscope.store.Store`
they need), so that the folder's layout and its version check live in one place.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Protocol, Unpack

from stepscope.errors import JobFolderError, JobNotFoundError
from stepscope.jobfolder import _paths as paths
from stepscope.jobfolder._clock import JobClock
from stepscope.jobfolder._constants import FORMAT_VERSION
from stepscope.jobfolder._json import JobJson, JsonObject, as_job_json
from stepscope.jobfolder._unwritable import missing_job_json
from stepscope.jobfolder._validate import check_job_json

# Bytes kept in job.json and small records (heartbeats, ranks) for a rewrite in
# place when the disk is full (Store.write_json's ``reserve``): job.json's end,
# with the launcher's unsaved fault records, fits in 16 KB.
JOB_JSON_RESERVE = 16384
RECORD_RESERVE = 512


class FolderIO(Protocol):
    """What the job folder's code needs of a store (``stepscope.store.Store`` has it)."""

    @property
    def url(self) -> str: ...

    def read_json(self, key: str) -> object: ...

    def read_bytes(self, key: str) -> bytes: ...

    def write_json(self, key: str, obj: object, reserve: int = 0) -> None: ...

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
    monotonic_offset_s: float | None = None
    duration_s: float | None = None
    format_version: int = FORMAT_VERSION
    extra: JsonObject = field(default_factory=dict)

    @classmethod
    def new(
        cls,
        name: str,
        command: Sequence[str],
        config: JsonObject,
        hosts: list[str],
        clock: JobClock | None = None,
    ) -> JobMeta:
        """The record of a job starting at ``clock``'s start, in this working directory."""
        from stepscope import __version__

        clock = clock or JobClock()
        return cls(
            name=name,
            command=list(command),
            cwd=os.getcwd(),
            config=config,
            hosts=hosts,
            start_time=clock.start,
            stepscope_version=__version__,
            monotonic_offset_s=clock.offset_s,
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
        if (damaged := missing_job_json(io)) is not None:
            raise JobFolderError(f"{io.url!r} is {damaged}") from None
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
    """Write ``job.json`` whole (a rename locally, one PUT on object storage), with room
    kept for its end on a disk that will be full (:data:`JOB_JSON_RESERVE`)."""
    body = meta.to_dict() if isinstance(meta, JobMeta) else meta
    io.write_json(paths.JOB_JSON, body, reserve=JOB_JSON_RESERVE)


def update_meta(io: FolderIO, **changes: Unpack[JobJson]) -> JobJson:
    """Read ``job.json``, apply ``changes`` and write it back; returns the new body."""
    meta = as_job_json(io.read_json(paths.JOB_JSON), f"job.json of {io.url!r}")
    meta.update(changes)
    io.write_json(paths.JOB_JSON, meta, reserve=JOB_JSON_RESERVE)
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
