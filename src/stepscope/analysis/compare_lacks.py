"""What one job of a comparison lacks (docs/compare.md "What a job lacks").

Jobs of different frameworks, imported SageMaker jobs and CPU or GPU jobs do not
record the same parts of a step, nor the same phases. A part is **recorded** in a run
when some steady step holds a value for it that is not 0: null is unknown (an imported
job's ``optimizer``, the device's parts on a CPU job) and a part that is exactly 0 on
every step was not split out of another one (a compiled TensorFlow step's ``backward``
and ``optimizer``, inside its ``forward``; a measured span is never exactly 0). Such a
part is compared only where both runs recorded it and named where one did not, never
read as zero: the lacking run's time for it is in another of its parts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "MissingPart",
    "MissingPhase",
    "lacking_parts",
    "lacking_phases",
    "recorded",
    "why_lacking",
]

NOT_RECORDED = "not recorded"  # null on every steady step
NOT_SPLIT = "not split out"  # 0 on every steady step: inside another part


@dataclass(frozen=True)
class MissingPart:
    """A part of the step that ``lacking`` ("A" or "B") did not record, and why."""

    part: str
    lacking: str
    why: str

    def text(self) -> str:
        """``not recorded in A`` or ``not split out in B (0 on every step)``."""
        said = f"{self.why} in {self.lacking}"
        return said + " (0 on every step)" if self.why == NOT_SPLIT else said


@dataclass(frozen=True)
class MissingPhase:
    """A phase only one job recorded: ``lacking`` ("A" or "B") did not."""

    phase: str
    lacking: str

    def text(self) -> str:
        """``eval: not recorded in B, not compared``."""
        return f"{self.phase}: not recorded in {self.lacking}, not compared"


def why_lacking(frame: pd.DataFrame, part: str) -> str | None:
    """None when ``part`` is recorded in ``frame`` (module docstring), else why not."""
    if part not in frame:
        return NOT_RECORDED
    values = frame[part].to_numpy(np.float64)
    values = values[~np.isnan(values)]
    if not len(values):
        return NOT_RECORDED
    return None if bool((values != 0).any()) else NOT_SPLIT


def recorded(frame: pd.DataFrame, part: str) -> bool:
    """Whether ``part`` holds a value other than 0 on some step of ``frame``."""
    return why_lacking(frame, part) is None


def lacking_parts(a: pd.DataFrame, b: pd.DataFrame, parts: tuple[str, ...]) -> list[MissingPart]:
    """The parts of ``parts`` that one run recorded and the other did not (a part
    neither recorded is not named: there is nothing of it on either side)."""
    out = []
    for part in parts:
        why_a, why_b = why_lacking(a, part), why_lacking(b, part)
        if why_a is not None and why_b is None:
            out.append(MissingPart(part, "A", why_a))
        elif why_b is not None and why_a is None:
            out.append(MissingPart(part, "B", why_b))
    return out


def lacking_phases(base: list[str], new: list[str]) -> list[MissingPhase]:
    """The phases only one of the jobs recorded, training first."""
    only = [MissingPhase(p, "B") for p in base if p not in new]
    only += [MissingPhase(p, "A") for p in new if p not in base]
    return sorted(only, key=lambda m: (m.phase != "train", m.phase))
