"""Gzipped Chrome/Perfetto traces kept within a size that trace viewers open.

A trace over its bound is cut: its metadata events stay, its timed events are
kept in time order up to the size that fits, and the cut is said in the
trace's own ``otherData`` (shown by chrome://tracing and Perfetto's "info")
and in the window's record (``truncated``).
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Mapping
from typing import Any

from stepscope.agent.profilers._sink import JSON

GZIP_LEVEL = 6
_MAX_TRIES = 6


def _gzip(doc: Mapping[str, object]) -> bytes:
    return gzip.compress(json.dumps(doc, separators=(",", ":")).encode(), GZIP_LEVEL)


def bound_trace(raw: bytes, max_bytes: int) -> tuple[bytes, dict[str, JSON] | None]:
    """``raw`` (a Chrome trace JSON) gzipped, cut to ``max_bytes``; and how it was cut."""
    whole = gzip.compress(raw, GZIP_LEVEL)
    if len(whole) <= max_bytes:
        return whole, None
    # The profiler's JSON, read as it comes: its events are only sorted and measured.
    doc: dict[str, Any] = json.loads(raw)
    events: list[dict[str, Any]] = doc.get("traceEvents") or []
    meta = [e for e in events if e.get("ph") == "M"]
    timed = sorted((e for e in events if e.get("ph") != "M"), key=lambda e: e.get("ts", 0))
    sizes = [len(json.dumps(e, separators=(",", ":"))) for e in timed]
    budget = max_bytes * len(raw) / len(whole) * 0.9  # uncompressed bytes that should fit
    for _ in range(_MAX_TRIES):
        kept, total = 0, 0
        while kept < len(timed) and total + sizes[kept] <= budget:
            total += sizes[kept]
            kept += 1
        cut = _cut_info(timed[kept - 1].get("ts") if kept else None, kept, len(timed), max_bytes)
        data = _gzip({**doc, "traceEvents": meta + timed[:kept], "otherData": cut})
        if len(data) <= max_bytes:
            return data, cut
        budget *= 0.7
    cut = _cut_info(None, 0, len(timed), max_bytes)
    return _gzip({**doc, "traceEvents": meta, "otherData": cut}), cut


def _cut_info(last_ts: JSON, kept: int, total: int, max_bytes: int) -> dict[str, JSON]:
    """The cut, as said in the trace (``otherData``) and in the window's record."""
    return {
        "stepscope_truncated": True,
        "kept_events": kept,
        "total_events": total,
        "cut_after_ts_us": last_ts,
        "reason": f"the trace was larger than file_max_size ({max_bytes} bytes, gzipped): "
        "events after cut_after_ts_us were dropped. Profile fewer steps, or raise "
        "FrameworkProfile(file_max_size=...).",
    }
