"""What a profiling window left in the job folder, read for the report.

Each reader takes the window's record (``profiling/rank-<r>/<base>.window.json``,
see docs/profiling.md) and returns plain rows; a missing or unreadable file
gives what the record itself holds (its ``top`` or ``summary``), else nothing.
"""

from __future__ import annotations

from collections import defaultdict

from stepscope.jobfolder import JsonObject
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
    (".xplane.pb", "TensorFlow profile"),
    (".memory.pickle", "memory snapshot"),
)


def file_label(key: str) -> str:
    """What a window's artifact is, from its name."""
    for suffix, label in FILE_KINDS:
        if key.endswith(suffix):
            return label
    return key.rsplit("/", 1)[-1]


def files_of(record: JsonObject) -> list[str]:
    """The record's artifact keys (strings only), in the order of :data:`FILE_KINDS`."""
    files = record.get("files") or []
    keys = [k for k in files if isinstance(k, str)] if isinstance(files, list) else []
    order = {label: i for i, (_s, label) in enumerate(FILE_KINDS)}
    return sorted(keys, key=lambda k: order.get(file_label(k), len(order)))


def _artifact(job: Job, record: JsonObject, suffix: str) -> object:
    """The JSON artifact of the window that ends with ``suffix``, or None."""
    for key in files_of(record):
        if key.endswith(suffix):
            try:
                return job.store.read_json(key)
            except (OSError, ValueError):
                return None
    return None


def _dicts(rows: object) -> list[JsonObject]:
    return [r for r in rows if isinstance(r, dict)] if isinstance(rows, list) else []


def operators(job: Job, record: JsonObject) -> list[JsonObject]:
    """Top operators by host self time (``.operators.json``; else the record's ``top``)."""
    data = _artifact(job, record, ".operators.json")
    rows = _dicts(data.get("operators")) if isinstance(data, dict) else []
    rows = rows or _dicts(record.get("top"))
    return sorted(rows, key=lambda r: _num(r.get("self_cpu_us")), reverse=True)[:TOP_N]


def cprofile_functions(job: Job, record: JsonObject) -> list[JsonObject]:
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


def pyinstrument_functions(job: Job, record: JsonObject) -> list[JsonObject]:
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


def dataloader(job: Job, record: JsonObject) -> tuple[JsonObject, list[JsonObject]]:
    """A dataloader window's summary and per-worker rows."""
    data = _artifact(job, record, ".dataloader.json")
    doc = data if isinstance(data, dict) else {}
    summary = doc.get("summary") if isinstance(doc.get("summary"), dict) else record.get("summary")
    return (summary if isinstance(summary, dict) else {}), _dicts(doc.get("workers"))


def tf_data_stages(job: Job, record: JsonObject) -> list[JsonObject]:
    """The ``tf.data`` pipeline stages of a TensorFlow dataloader window (``stages``)."""
    data = _artifact(job, record, ".dataloader.json")
    return _dicts(data.get("stages")) if isinstance(data, dict) else []


def _num(v: object) -> float:
    found = num(v) if not isinstance(v, bool) else float(v)
    return 0.0 if found is None else found


def num(v: object) -> float | None:
    """A number from a record, or None when it is not one."""
    if isinstance(v, bool) or not isinstance(v, str | int | float):
        return None
    try:
        return float(v)
    except ValueError:
        return None
