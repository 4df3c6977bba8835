"""What a profiling window left in the job folder, read for the report.

Each reader takes the window's record (``profiling/rank-<r>/<base>.window.json``,
see docs/profiling.md) and returns plain rows; a missing or unreadable file
gives what the record itself holds (its ``top`` or ``summary``), else nothing.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from stepscope.read import Job

TOP_N = 15

# Artifact suffixes and how the report names them, most useful first.
FILE_KINDS = (
    (".pt.trace.json.gz", "trace"),
    (".operators.json", "operators"),
    (".pstats", "pstats"),
    (".functions.json", "functions"),
    (".html", "pyinstrument HTML"),
    (".speedscope.json", "speedscope"),
    (".pyisession", "pyinstrument session"),
    (".dataloader.json", "batches"),
)


def file_label(key: str) -> str:
    """What a window's artifact is, from its name."""
    for suffix, label in FILE_KINDS:
        if key.endswith(suffix):
            return label
    return key.rsplit("/", 1)[-1]


def files_of(record: dict[str, Any]) -> list[str]:
    """The record's artifact keys (strings only), in the order of :data:`FILE_KINDS`."""
    keys = [k for k in record.get("files") or [] if isinstance(k, str)]
    order = {label: i for i, (_s, label) in enumerate(FILE_KINDS)}
    return sorted(keys, key=lambda k: order.get(file_label(k), len(order)))


def _artifact(job: Job, record: dict[str, Any], suffix: str) -> Any:
    """The JSON artifact of the window that ends with ``suffix``, or None."""
    for key in files_of(record):
        if key.endswith(suffix):
            try:
                return job.store.read_json(key)
            except (OSError, ValueError):
                return None
    return None


def _dicts(rows: Any) -> list[dict[str, Any]]:
    return [r for r in rows if isinstance(r, dict)] if isinstance(rows, list) else []


def operators(job: Job, record: dict[str, Any]) -> list[dict[str, Any]]:
    """Top operators by host self time (``.operators.json``; else the record's ``top``)."""
    data = _artifact(job, record, ".operators.json")
    rows = _dicts(data.get("operators")) if isinstance(data, dict) else []
    rows = rows or _dicts(record.get("top"))
    return sorted(rows, key=lambda r: _num(r.get("self_cpu_us")), reverse=True)[:TOP_N]


def cprofile_functions(job: Job, record: dict[str, Any]) -> list[dict[str, Any]]:
    """Top functions by own time of a cProfile window (``.functions.json``; else ``top``)."""
    data = _artifact(job, record, ".functions.json")
    rows = _dicts(data.get("functions")) if isinstance(data, dict) else []
    rows = rows or _dicts(record.get("top"))
    return sorted(rows, key=lambda r: _num(r.get("own_s")), reverse=True)[:TOP_N]


def _frame(identifier: str) -> tuple[str, str, str]:
    """pyinstrument's ``name\\x00file\\x00line\\x01attributes`` as (name, file, line)."""
    parts = identifier.split("\x01", 1)[0].split("\x00")
    parts += [""] * (3 - len(parts))
    return parts[0], parts[1], parts[2]


def pyinstrument_functions(job: Job, record: dict[str, Any]) -> list[dict[str, Any]]:
    """Top functions of a pyinstrument window, from its saved session's samples.

    Own time is the time of the samples a function was the innermost frame of;
    total time, of those it was anywhere on the stack (counted once per sample).
    """
    data = _artifact(job, record, ".pyisession")
    samples = data.get("frame_records") if isinstance(data, dict) else None
    own: dict[tuple[str, str, str], float] = defaultdict(float)
    total: dict[tuple[str, str, str], float] = defaultdict(float)
    for sample in samples if isinstance(samples, list) else []:
        if not (isinstance(sample, list) and len(sample) == 2 and sample[0]):
            continue
        stack, seconds = sample[0], _num(sample[1])
        frames = [_frame(str(f)) for f in stack]
        own[frames[-1]] += seconds
        for f in set(frames):
            total[f] += seconds
    top = sorted(own, key=lambda f: own[f], reverse=True)[:TOP_N]
    return [
        {"name": f[0], "file": f[1], "line": f[2], "own_s": own[f], "cumulative_s": total[f]}
        for f in top
    ]


def dataloader(job: Job, record: dict[str, Any]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A dataloader window's summary and per-worker rows."""
    data = _artifact(job, record, ".dataloader.json")
    doc = data if isinstance(data, dict) else {}
    summary = doc.get("summary") if isinstance(doc.get("summary"), dict) else record.get("summary")
    return (summary if isinstance(summary, dict) else {}), _dicts(doc.get("workers"))


def _num(v: Any) -> float:
    try:
        return float(v)
    except (TypeError, ValueError):
        return 0.0


def num(v: Any) -> float | None:
    """A number from a record, or None when it is not one."""
    try:
        return None if v is None or isinstance(v, bool) else float(v)
    except (TypeError, ValueError):
        return None
