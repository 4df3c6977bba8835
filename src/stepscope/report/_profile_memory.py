"""CUDA memory windows in the report: each snapshot, what it holds, how to open it.

A memory window (docs/profiling.md, "CUDA memory windows") keeps the caching
allocator's snapshot as a pickle. The report lists each one with the figures of its
record (segments, memory reserved and allocated, allocator events kept and whether
the history was full), links the file, and says how to open it in PyTorch's memory
viewer: a page of its own that reads the dropped file in the browser. The report
links it and loads nothing from it, as the dashboard does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from stepscope.report import _profile_data as data
from stepscope.report._html import esc, note, section, table

if TYPE_CHECKING:
    from stepscope.jobfolder import JsonObject
    from stepscope.report._profiles import Links

__all__ = ["VIEWER", "memory_section"]

VIEWER = "https://pytorch.org/memory_viz"
MAX_SNAPSHOTS = 50  # rows: the newest windows


def _mib(value: object) -> str:
    n = data.num(value)
    return "\u2013" if n is None else f"{n / 2**20:,.1f} MiB"


def _count(value: object) -> str:
    n = data.num(value)
    return "\u2013" if n is None else f"{n:,.0f}"


def _events(r: JsonObject) -> str:
    kept, most = data.num(r.get("trace_events")), data.num(r.get("max_entries"))
    if kept is None:
        return "\u2013"
    text = f"{kept:,.0f}" + (f" of at most {most:,.0f}" if most is not None else "")
    return text + (" (history full: the oldest were dropped)" if r.get("history_full") else "")


def _row(r: JsonObject, links: Links) -> tuple[str, ...]:
    a, b = r.get("start_step"), r.get("end_step")
    steps = f"{a}" if a == b else f"{a}\u2013{b}"
    files = links.html(r)
    kept = files or f'<span class="note">{esc(r.get("note") or "no file kept")}</span>'
    return (
        esc(r.get("rank")),
        esc(steps),
        esc(_count(r.get("segments"))),
        esc(_mib(r.get("reserved_bytes"))),
        esc(_mib(r.get("allocated_bytes"))),
        esc(_events(r)),
        kept,
    )


def memory_section(records: list[JsonObject], links: Links) -> str:
    """The memory windows of ``records`` with their figures and how to open their
    snapshots, or "" when there is none."""
    mine = [r for r in records if r.get("kind") == "memory"][-MAX_SNAPSHOTS:]
    if not mine:
        return ""
    how = (
        f"Open a snapshot in PyTorch's memory viewer: download it (with this report's "
        f"folder), then drop it on {VIEWER} (the page reads the file in your browser; it "
        "is not uploaded), or run `python -m torch.cuda._memory_viz trace_plot FILE -o "
        "memory.html`. Figures are those of each window's end."
    )
    head = ["Rank", "Steps", "Segments", "Reserved", "Allocated", "Allocator events", "File"]
    rows = [_row(r, links) for r in mine]
    body = note(how) + table(head, rows, cls="memory", raw_cols=range(7))
    return section("profiles-memory", "CUDA memory snapshots", body, level=3)
