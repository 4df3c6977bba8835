"""What a problem's fix would save, in the words of the diagnosis.

A rule's verdict carries ``saving_seconds`` (what its recommendation would save, at
most its cost) and, where a bound made it less, why (``details.saving_bound``: more
workers only use idle cores, ...). An entry whose saving is less than its cost says
so once: "a fix would save about 1.6 s: more workers only use idle cores: ...".
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from stepscope.analysis.diagnosis_text import duration_text
from stepscope.jobfolder import RuleVerdict

# Why a saving is below the cost when no rule said why: the overlap of a group's waits.
SHARED = "the same time counted under another rule saves it once"


def saving_bound(v: RuleVerdict) -> str | None:
    """Why the verdict's saving is less than its cost (``details.saving_bound``)."""
    details = v.get("details")
    why = details.get("saving_bound") if isinstance(details, Mapping) else None
    return why if isinstance(why, str) and why else None


def saving_text(
    cost: float,
    saving: float | None,
    rules: Iterable[str],
    bounds: Mapping[str, tuple[float, str]],
) -> str:
    """What a fix would save ("; a fix would save about X: <why>") when the saving reads
    less than the cost; else nothing. ``bounds``: per rule, its own saving and why it
    is bounded; of ``rules`` (the entry's and those folded into it) the one whose own
    saving is nearest the entry's says why (its figures then add up to the entry's)."""
    if saving is None or duration_text(saving) == duration_text(cost) or saving >= cost:
        return ""
    known = [bounds[r] for r in rules if r in bounds]
    why = min(known, key=lambda b: abs(b[0] - saving))[1] if known else SHARED
    return f"; a fix would save about {duration_text(saving)}: {why}"
