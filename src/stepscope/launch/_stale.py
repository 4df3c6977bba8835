"""Marking the verdicts a rule runner could not finish (docs/format.md, ``rules/``).

When the launcher had to kill the live rule runner at the end of the job (it did
not finish its final evaluation in time), the verdicts it last wrote are running
ones (status ``InProgress``), as of its last scan. Each such ``rules/<Rule>.json``
gets ``"stale": {"as_of": <s into the job>, "reason": ...}``, so ``show``, the
report and the diagnosis say "the rule runner did not finish: verdicts as of
6.7 s" rather than what the running verdicts alone would suggest. Verdicts the
final evaluation did write (any other status) are left as they are.
"""

from __future__ import annotations

from stepscope.jobfolder import paths, read_meta
from stepscope.store import Store

NOT_FINISHED = "the rule runner did not finish"


def _number(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def mark_stale(store: Store, reason: str = NOT_FINISHED) -> float | None:
    """Mark the job's running verdicts stale; returns the oldest ``as_of`` (s into the
    job), None if none was marked. Raises what the store raises."""
    start = _number(read_meta(store).get("start_time")) or 0.0
    oldest: float | None = None
    for key in store.list(paths.RULES + "/", suffix=".json"):
        body = store.read_json(key)
        if not isinstance(body, dict) or body.get("status") != "InProgress":
            continue
        updated = _number(body.get("updated"))
        as_of = round(max(0.0, updated - start), 1) if updated is not None else None
        body["stale"] = {"as_of": as_of, "reason": reason}
        store.write_json(key, body)
        if as_of is not None:
            oldest = as_of if oldest is None else min(oldest, as_of)
    return oldest
