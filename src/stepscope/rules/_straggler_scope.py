"""Which of Straggler's metrics a job lets it judge honestly.

In a job whose ranks wait for each other at collectives the agent cannot time
(``job.json``'s ``distributed.collectives`` is ``"unmeasured"``: TensorFlow's
MultiWorkerMirroredStrategy, whose all-reduce runs inside the compiled step), a
straggler's delay shows on its peers as time in whatever column holds the
collective: ``forward`` for a compiled step, ``optimizer`` for an eager
``apply_gradients``, and ``duration`` and ``busy`` (nothing is taken out of
them) are the same for every rank. Comparing those would name the ranks that
wait. What stays a rank's own: ``data_wait`` (the ``next`` of its own input
pipeline, which holds no collective) and ``other`` (its Python between the
parts). A peer's wait lands in ``other`` only where the script calls a
collective from Python between steps; so a rank's ``other`` is not judged in a
window where another rank is already named for its ``data_wait``: it may be
waiting for it. docs/tensorflow.md, "Several workers".
"""

from __future__ import annotations

from stepscope.jobfolder import JobJson
from stepscope.rules._windows import Hit

OWN = ("data_wait", "other")  # columns that hold no unmeasured wait for a peer
WHY = (
    "not judged: {names} (this job's collectives run inside its compiled step, "
    "where the agent cannot time them, so a rank that waits for a straggler shows "
    "the wait there)"
)


def unmeasured(meta: JobJson) -> bool:
    """True when the job's ranks wait at collectives the agent does not time."""
    dist = meta.get("distributed")
    return isinstance(dist, dict) and dist.get("collectives") == "unmeasured"


def split(meta: JobJson, metrics: list[str]) -> tuple[list[str], list[str]]:
    """The metrics judged in this job, and those that cannot be (in the given order)."""
    if not unmeasured(meta):
        return metrics, []
    return [m for m in metrics if m in OWN], [m for m in metrics if m not in OWN]


def why(skipped: list[str]) -> str:
    """The sentence that says which metrics were not judged, and why."""
    return WHY.format(names=", ".join(skipped))


def drop_waiting(hits: list[Hit]) -> list[Hit]:
    """Without the ``other`` hits of a window where another rank is slow in data_wait."""
    slow_data: dict[int, set[str]] = {}
    for h in hits:
        rank, metric = h.key.split("|")
        if metric == "data_wait":
            slow_data.setdefault(h.win, set()).add(rank)
    return [h for h in hits if not _waits(h, slow_data)]


def _waits(hit: Hit, slow_data: dict[int, set[str]]) -> bool:
    rank, metric = hit.key.split("|")
    return metric == "other" and bool(slow_data.get(hit.win, set()) - {rank})
