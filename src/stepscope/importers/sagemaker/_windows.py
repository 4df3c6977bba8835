"""Kept artifacts (traces, Python profiles) as profiling windows of a rank.

Each is written as ``profiling/rank-<r>/<kind>-<a>-<b>[-n].<suffix>`` with its
``.window.json`` record (docs/format.md), so the report, the dashboard and
``Job.profiling_artifacts()`` list it as any window; ``source`` names the file it
came from. Times the predecessor did not record are null.
"""

from __future__ import annotations

from stepscope.jobfolder import JsonObject, paths
from stepscope.store import Store


def write_window(
    out: Store,
    rank: int,
    kind: str,
    steps: tuple[int, int],
    index: int,
    files: dict[str, bytes],
    source: str,
) -> str:
    """Write the files (suffix -> bytes) and their record; returns the record's key."""
    base = f"{kind}-{steps[0]}-{steps[1]}" + (f"-{index + 1}" if index else "")
    folder = paths.profiling_dir(rank)
    keys = []
    for suffix, data in files.items():
        key = f"{folder}/{base}{suffix}"
        out.write_bytes(key, data)
        keys.append(key)
    record: JsonObject = {
        "kind": kind,
        "rank": rank,
        "start_step": steps[0],
        "end_step": steps[1],
        "start_time": None,
        "end_time": None,
        "path": keys[0] if keys else None,
        "files": keys,
        "window": {},
        "request": None,
        "truncated": False,
        "source": source,
        "imported": True,
    }
    key = f"{folder}/{base}{paths.WINDOW_JSON}"
    out.write_json(key, record)
    return key
