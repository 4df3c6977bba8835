"""The verdict of ``stepscope compare`` and its words (docs/compare.md): which way, by
how much, mostly which part of the step, on what it was judged, and what it could not
see.

The rule, per phase:

1. the step time's 95% interval of B/A excludes 1: ``slower`` or ``faster``, mostly
   the part that moved most that way (among the parts beyond their noise, if any);
2. else, with two runs or more on a side (one or more on the other), the parts judged as one family
   (:mod:`.compare_runs`): when some are **beyond their noise** (their Bonferroni
   interval excludes 0 by at least 2% of A's step) and all moved the same way, B is
   ``slower`` (``faster``), mostly the one that moved most, and the words say that the
   step time's own interval is within the noise; parts that moved both ways are
   named and the direction stays ``same``;
3. else ``same``: no difference beyond the noise of these runs.

With one run a side the parts are not judged (a compute part's swing between
processes is the run-to-run noise the single runs cannot show), and the words say the
spread between runs is unknown and how to measure it. One run against several is judged
on its step time against the spread of the several (a new run of the same host and
script), its parts not judged (a part of one process swings past the others' spread:
BENCHMARKS.md), and the words say so.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from stepscope.analysis.compare import PartChange
    from stepscope.analysis.compare_contention import Contention
    from stepscope.analysis.compare_runs import RunSpread
    from stepscope.analysis.compare_stats import Interval

DEVICE_PARTS = ("gpu_forward", "gpu_backward", "gpu_optimizer", "device_idle")


def mostly_part(changes: list[PartChange], direction: str) -> str | None:
    """The part whose seconds per step moved most in the direction of the change.

    On a GPU job the host's parts overlap the device's: the device parts and the
    device idle then speak for the step, the host's only for a CPU job."""
    if direction not in ("slower", "faster"):
        return None
    device = [c for c in changes if c.part in DEVICE_PARTS]
    pool = [c for c in changes if c.beyond_noise] or device or changes
    sign = 1.0 if direction == "slower" else -1.0
    moved = [c for c in pool if sign * c.change.value > 0]
    return max(moved, key=lambda c: sign * c.change.value).part if moved else None


def verdict_text(name: str, ratio: Interval, direction: str, mostly: str | None) -> str:
    """The verdict line (docs/compare.md)."""
    pct = 100 * (ratio.value - 1)
    low, high = 100 * (ratio.low - 1), 100 * (ratio.high - 1)
    if direction == "same":
        interval = f"95% interval {low:+.1f}% to {high:+.1f}%"
        return f"no difference beyond the noise of these runs ({interval})"
    if direction == "slower":
        said = f"{name} is slower by {pct:.1f}% (95% interval {low:.1f}-{high:.1f}%)"
    else:
        said = f"{name} is faster by {-pct:.1f}% (95% interval {-high:.1f}-{-low:.1f}%)"
    return f"{said}, mostly {mostly}" if mostly else said


def basis_text(basis: str, contention: tuple[Contention, Contention]) -> str:
    """What the verdict was judged on, when the host was busy (compare_contention)."""
    if basis == "step time":
        return ""
    a, b = contention
    how = (
        "the steps taken while other processes were nearly idle"
        if basis == "uncontended steps"
        else "the steps' own time, their waits for a core taken out"
    )
    return f"; judged on {how} (host contention: A {a.text()}; B {b.text()})"


def verdict_of(
    name: str,
    ratio: Interval,
    changes: list[PartChange],
    basis: str,
    contention: tuple[Contention, Contention],
    spread: RunSpread,
) -> tuple[str, str | None, str]:
    """The direction, the ``mostly`` part and the words of a phase (module docstring)."""
    direction = "slower" if ratio.low > 1 else "faster" if ratio.high < 1 else "same"
    called = [c for c in changes if c.beyond_noise]
    if direction == "same" and called:
        direction, mostly, text = _from_parts(name, ratio, called, basis_text(basis, contention))
        return direction, mostly, text + _spread_words(spread)
    mostly = mostly_part(changes, direction)
    text = verdict_text(name, ratio, direction, mostly) + basis_text(basis, contention)
    return direction, mostly, text + _spread_words(spread)


def _spread_words(spread: RunSpread) -> str:
    """Unknown spread: how to measure it; one run against several: whose spread it is."""
    if not spread.known:
        return unknown_spread(spread)
    sides = (("A", len(spread.base_medians)), ("B", len(spread.new_medians)))
    one = [side for side, n in sides if n == 1]
    if not one:
        return ""
    other = next((side, n) for side, n in sides if n > 1)
    return (
        f"; {one[0]}'s one run judged against the spread of {other[0]}'s {other[1]} runs "
        f"({spread.spread_pct:.1f}%, {spread.df} df), on the step time only: a part of one "
        "run is not judged (give it several runs to judge its parts)"
    )


def _from_parts(
    name: str, ratio: Interval, called: list[PartChange], basis: str
) -> tuple[str, str | None, str]:
    """Rule 2: the step time within the noise, some parts beyond theirs."""
    low, high = 100 * (ratio.low - 1), 100 * (ratio.high - 1)
    step = f"the step time's change {100 * (ratio.value - 1):+.1f}% (95% interval "
    step += f"{low:+.1f}% to {high:+.1f}%) is within the noise of these runs"
    ways = {c.change.value > 0 for c in called}
    said = ", ".join(_part_text(c) for c in sorted(called, key=lambda c: -abs(c.change.value)))
    if len(ways) > 1:
        return "same", None, f"no difference: {step}, and parts moved both ways " \
            f"beyond the spread between runs: {said}{basis}"  # fmt: skip
    direction = "slower" if True in ways else "faster"
    mostly = max(called, key=lambda c: abs(c.change.value)).part
    text = f"{name} is {direction}, mostly {mostly}: {said}, beyond the spread between runs; "
    return direction, mostly, f"{text}{step}{basis}"


def _part_text(c: PartChange) -> str:
    i = c.family if c.family is not None else c.change
    return (f"{c.part} {1000 * i.value:+.1f} ms per step ({100 * i.level:.4g}% interval "
            f"{1000 * i.low:+.1f} to {1000 * i.high:+.1f} ms)")  # fmt: skip


def unknown_spread(spread: RunSpread) -> str:
    """What one run a side cannot see, and how to give more runs."""
    return (
        "; the spread between runs is unknown with one run a side: reruns of the same "
        "script can differ by more than this interval on a busy host; give each side "
        "several runs, comma-separated, to judge against it "
        "(stepscope compare A1,A2,A3 B1,B2,B3)"
    )
