"""A comparison as plain JSON-ready data: what ``stepscope compare --json`` prints and
what the dashboard's ``/api/compare`` returns (docs/compare.md), one serialisation."""

from __future__ import annotations

import dataclasses
import math
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from stepscope.analysis.compare import Comparison

__all__ = ["comparison_doc", "json_clean"]


def json_clean(value: object) -> object:
    """NaN and infinities as None (JSON has no NaN), recursively."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: json_clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_clean(v) for v in value]
    return value


def comparison_doc(c: Comparison) -> dict[str, object]:
    """The comparison's dataclass fields (each side's runs, per phase each run's median
    step and the spread between runs), with the throughput, the samples per second,
    the gate's figure (``slower_low_pct``) and ``runs.known`` added per phase, the ``text`` of
    each missing part and phase (:mod:`.compare_lacks`); NaN as None."""
    doc = dataclasses.asdict(c)
    for phase, raw in zip(c.phases, doc["phases"], strict=True):
        raw["slower_low_pct"] = phase.slower_low_pct
        raw["steps_per_s"] = list(phase.throughput)
        raw["samples_per_s"] = list(c.samples_per_s(phase))
        if phase.runs is not None:  # the spread between runs: null where one run a side
            raw["runs"]["known"] = phase.runs.known
        for m, doc_m in zip(phase.missing_parts, raw["missing_parts"], strict=True):
            doc_m["text"] = m.text()  # one wording for the CLI, report and dashboard
    for lack, doc_lack in zip(c.missing_phases, doc["missing_phases"], strict=True):
        doc_lack["text"] = lack.text()
    cleaned = json_clean(doc)
    assert isinstance(cleaned, dict)  # a dict in, a dict out
    return cleaned
