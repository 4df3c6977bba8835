"""The words of ``stepscope compare``'s verdict (docs/compare.md): which way, by how
much, mostly which part of the step, and on what it was judged."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from stepscope.analysis.compare import PartChange
    from stepscope.analysis.compare_contention import Contention
    from stepscope.analysis.compare_stats import Interval

DEVICE_PARTS = ("gpu_forward", "gpu_backward", "gpu_optimizer", "device_idle")


def mostly_part(changes: list[PartChange], direction: str) -> str | None:
    """The part whose seconds per step moved most in the direction of the change.

    On a GPU job the host's parts overlap the device's: the device parts and the
    device idle then speak for the step, the host's only for a CPU job."""
    if direction not in ("slower", "faster"):
        return None
    device = [c for c in changes if c.part in DEVICE_PARTS]
    pool = device or changes
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
