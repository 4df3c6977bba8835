"""Verdicts the rule runner could not finish: the ``stale`` mark of ``rules/*.json``.

When the launcher had to kill the live rule runner at the end of a job (docs/format.md,
``rules/``), the running verdicts it left carry ``"stale": {"as_of": <s into the job>,
"reason": ...}``. The diagnosis then opens with what is stale and as of when, and
never says "no problem found": the final evaluation that would have said so never ran.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from stepscope.analysis._plain import finite
from stepscope.jobfolder import RuleVerdict

NOT_FINISHED = "the rule runner did not finish"


def stale_text(verdicts: Iterable[RuleVerdict]) -> str | None:
    """``the rule runner did not finish: verdicts as of 6.7 s`` if any verdict is
    marked stale (the oldest ``as_of``), else None."""
    marks = [m for v in verdicts if isinstance(m := v.get("stale"), Mapping)]
    if not marks:
        return None
    given = [m.get("as_of") for m in marks]
    known = [float(a) for a in given if isinstance(a, int | float) and finite(a) is not None]
    reason = str(marks[0].get("reason") or NOT_FINISHED)
    when = f"verdicts as of {min(known):.1f} s" if known else "verdicts as of its last scan"
    return f"{reason}: {when} (stepscope rules judges the whole job again)"
