"""Numbers and waiting states in rule messages.

A message that compares a value with a threshold must show the difference:
"took 0.2 min (> 0.2 min)" for 0.236 min against 0.2 reads as a contradiction.
:func:`versus` prints the value with the fewest significant digits (at least two)
that tell it apart from the threshold, and the threshold as the user wrote it.
"""

from __future__ import annotations

import math

#: Most significant digits printed: past this a difference is not worth a finding.
MAX_DIGITS = 6


def num(value: float, against: float | None = None, digits: int = 2) -> str:
    """``value`` with at least ``digits`` significant digits, more until it no longer
    rounds to ``against`` (when they differ)."""
    if not math.isfinite(value):
        return str(value)
    for sig in range(digits, MAX_DIGITS + 1):
        text = f"{value:.{sig}g}"
        if against is None or value == against or float(text) != against:
            return _plain(text, value)
    return _plain(f"{value:.{MAX_DIGITS}g}", value)


def _plain(text: str, value: float) -> str:
    """No exponent for ordinary magnitudes (1e+02 -> 100)."""
    if "e" in text and 1e-4 <= abs(value) < 1e6:
        return f"{float(text):f}".rstrip("0").rstrip(".")
    return text


def versus(value: float, threshold: float, unit: str = "", op: str = ">") -> str:
    """``"0.24 min (> 0.2 min)"``: the value, and the threshold it was compared with."""
    space = " " if len(unit) > 1 and unit.isalpha() else ""  # "0.24 min", "95%", "2x"
    return f"{num(value, threshold)}{space}{unit} ({op} {threshold:g}{space}{unit})"


def waiting_reason(what: str, newest: int | None, skipped: int) -> str:
    """Why a rule has nothing to judge yet, saying what is true: no ``what`` recorded
    yet (``newest`` None), or only the first ``skipped``, which are not judged."""
    if newest is None:
        return f"no {what} recorded yet"
    return (
        f"waiting for the first {skipped} {what} (skip_steps): the newest recorded is step {newest}"
    )
