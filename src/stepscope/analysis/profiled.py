"""Which steps a profiling window could have slowed: the ``profiled`` flag, capped.

The agent marks ``profiled`` the steps inside a window, the step after it (which
pays for stopping the profiler) and the steps during which its export ran on a
background thread (docs/format.md). Agents before the fix of issue 29 could leave
the mark on for the rest of the job once an export outlasted a step (every step
from 100 to 619 of the H200 ``stall`` fixture, for a window on steps 100-102), and
the rules left all those steps out. So readers do not take the flag at its word:
it stands only on the steps a window could have slowed, as the job's events say.

Per rank, a window spans from its opening (its ``profiling_start`` event, or the
``start_time`` of its record) to the end of its export: the time of its
``profiling_window`` event, written once the export finished (the event's detail
is the window's record, ``<base>.window.json``). A window with a start and no
record yet (open, still exporting, or its process died) spans to the end of the
job. A ``profiled`` flag stands on a step that overlaps a span, and on the first
step of each phase that starts after a span ended (the export may end just
before a boundary that does not see it yet). A rank without profiling events
keeps its flags: nothing there says them wrong.

:func:`standing` is the one definition: StepOutlier, Straggler, the report and the
dashboard all read ``profiled`` through it.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

if TYPE_CHECKING:  # `show` reads through here and must not import pandas (test_cli)
    import pandas as pd

BoolArray = npt.NDArray[np.bool_]

KINDS = ("profiling_start", "profiling_window")
HANDFUL = 5  # more steps left out as profiled than this: the rules and diagnosis say so
#: A rule's ``details`` key: the steps it left out as profiled (summed over nodes).
LEFT_OUT = "profiled_left_out"
Key = tuple[int, str, int]  # rank, the window's kind (label), its first step


@dataclass(frozen=True)
class Spans:
    """Per rank, the disjoint spans ``(open, export end)`` of its windows, sorted
    (unix seconds; ``inf``: no record yet). Hashable: a cache key."""

    by_rank: tuple[tuple[int, tuple[tuple[float, float], ...]], ...] = ()

    def of(self, rank: int) -> tuple[tuple[float, float], ...] | None:
        """The spans of ``rank``; None when it has no profiling events."""
        return dict(self.by_rank).get(rank)


def _detail(raw: object) -> Mapping[str, object]:
    try:
        doc = json.loads(raw) if isinstance(raw, str) else raw
    except ValueError:
        return {}
    return doc if isinstance(doc, Mapping) else {}


def _num(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def _key(rank: int, detail: Mapping[str, object], step: str) -> Key | None:
    first = _num(detail.get(step))
    kind = detail.get("profile_kind", detail.get("kind"))
    return None if first is None else (rank, str(kind), int(first))


def profiling_spans(events: pd.DataFrame) -> Spans:
    """The spans of the windows in ``events`` (an events frame, docs/format.md)."""
    if not len(events) or "kind" not in events:
        return Spans()
    rows = events[events["kind"].isin(KINDS)].sort_values("time", kind="stable")
    opened: dict[Key, float] = {}
    spans: dict[int, list[tuple[float, float]]] = {}
    for kind, rank_v, time_v, raw in zip(
        rows["kind"], rows["rank"], rows["time"], rows["detail"], strict=True
    ):
        rank, t, detail = int(rank_v), float(time_v), _detail(raw)
        if kind == "profiling_start":
            key = _key(rank, detail, "first_step")
            if key is not None:
                opened[key] = t
            else:  # a start that no record can match: it spans to the end
                spans.setdefault(rank, []).append((t, math.inf))
            continue
        key = _key(rank, detail, "start_step")
        start = _num(detail.get("start_time"))
        at = opened.pop(key, None) if key is not None else None
        known = [s for s in (start, at) if s is not None]
        spans.setdefault(rank, []).append((min(known, default=t), t))
    for (rank, _kind, _first), t in opened.items():  # still open or exporting
        spans.setdefault(rank, []).append((t, math.inf))
    return Spans(tuple((r, _merged(s)) for r, s in sorted(spans.items())))


def _merged(spans: list[tuple[float, float]]) -> tuple[tuple[float, float], ...]:
    """Overlapping spans (windows of two kinds at once) as one."""
    out: list[tuple[float, float]] = []
    for lo, hi in sorted(spans):
        if out and lo <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], hi))
        else:
            out.append((lo, hi))
    return tuple(out)


def standing(steps: pd.DataFrame, spans: Spans | pd.DataFrame) -> BoolArray:
    """Per row of ``steps``, whether its ``profiled`` flag stands (module docstring).

    ``steps`` has ``rank``, ``phase``, ``start`` and ``end`` (or ``duration``);
    ``spans`` are the job's :func:`profiling_spans`, or its events frame.
    """
    n = len(steps)
    if "profiled" not in steps or not n:
        return np.zeros(n, dtype=bool)
    flags: BoolArray = steps["profiled"].fillna(False).to_numpy(dtype=bool)
    spans = spans if isinstance(spans, Spans) else profiling_spans(spans)
    if not flags.any() or not spans.by_rank:
        return flags
    start = steps["start"].to_numpy(np.float64)
    if "end" in steps:
        end = steps["end"].to_numpy(np.float64)
    else:
        end = start + steps["duration"].to_numpy(np.float64)
    ranks = steps["rank"].to_numpy()
    phases = steps["phase"].to_numpy() if "phase" in steps else np.zeros(n, dtype=object)
    out: BoolArray = flags.copy()
    for rank, mine_spans in spans.by_rank:
        rows = np.flatnonzero(flags & (ranks == rank))
        if not len(rows):
            continue
        opens = np.array([lo for lo, _ in mine_spans])
        ends = np.array([hi for _, hi in mine_spans])
        # The last span opened before the step ended is the only one it can overlap.
        i = np.searchsorted(opens, end[rows], side="left") - 1
        inside = (i >= 0) & (ends[np.maximum(i, 0)] > start[rows])
        after = _first_after(start, ranks == rank, phases, ends[np.isfinite(ends)])
        out[rows] = inside | after[rows]
    return out


def _first_after(
    start: npt.NDArray[np.float64], mine: BoolArray, phases: npt.NDArray[np.object_],
    ends: npt.NDArray[np.float64],
) -> BoolArray:  # fmt: skip
    """The first step of each phase of the rank that starts at or after each end."""
    out = np.zeros(len(start), dtype=bool)
    for phase in dict.fromkeys(phases[mine].tolist()):  # in order of appearance
        rows = np.flatnonzero(mine & (phases == phase))
        order = rows[np.argsort(start[rows], kind="stable")]
        at = np.searchsorted(start[order], ends, side="left")
        out[order[at[at < len(order)]]] = True
    return out


def cap_profiled(steps: pd.DataFrame, spans: Spans | pd.DataFrame) -> pd.DataFrame:
    """``steps`` with ``profiled`` true only where it stands (the same frame when
    nothing changes)."""
    if "profiled" not in steps or not len(steps):
        return steps
    capped = standing(steps, spans)
    if np.array_equal(capped, steps["profiled"].fillna(False).to_numpy(dtype=bool)):
        return steps
    return steps.assign(profiled=capped)


def profiled_count(details: Mapping[str, object] | None) -> int:
    """The steps a rule's ``details`` say it left out as profiled (0: none, or not said)."""
    n = (details or {}).get(LEFT_OUT)
    return n if isinstance(n, int) and not isinstance(n, bool) else 0


def profiled_text(count: int) -> str:
    """What a rule or the diagnosis says of the steps it left out as profiled: nothing
    for a handful."""
    if count <= HANDFUL:
        return ""
    return f"{count} steps left out: inside or slowed by profiling windows"
