"""A job whose data is incomplete: job.json's ``incomplete`` in words.

A rank that ended without its agent's end (``os._exit``, a signal, a crash in native
code) lost what its writer held since its last flush; its launcher marks job.json
``incomplete`` with the reason, which names the ranks (docs/format.md, "Incomplete
data"). Whoever shows the job says so: ``stepscope show`` (a ``data INCOMPLETE`` line),
``ls`` (``Completed (incomplete)``), the report (its summary and its diagnosis) and the
dashboard. The diagnosis then says what it found in the part that was recorded and
never says "no problem found": the steps that were lost were never judged.
"""

from __future__ import annotations

from collections.abc import Mapping

RECORDED_PART = "the recorded part of"


def incomplete_reason(meta: Mapping[str, object]) -> str | None:
    """Why the job's data is incomplete (``incomplete_reason``, else ``incomplete``),
    or None when job.json does not say it is."""
    if meta.get("incomplete") is not True:
        return None
    reason = meta.get("incomplete_reason")
    return reason if isinstance(reason, str) and reason else "incomplete"


def incomplete_text(reason: str | None) -> str | None:
    """The diagnosis' first words for an incomplete job (None: the data is whole)."""
    if reason is None:
        return None
    return f"the job's data is incomplete ({reason})"
