"""What an import read, wrote and could not place: counted, never dropped silently."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

MAX_EXAMPLES = 5  # examples kept per unplaced kind, enough to recognise it


@dataclass
class Tally:
    """Counts of an import, by kind, and examples of what had no place."""

    counts: Counter[str] = field(default_factory=Counter)
    unplaced: Counter[str] = field(default_factory=Counter)
    examples: dict[str, list[str]] = field(default_factory=dict)

    def read(self, kind: str, n: int = 1) -> None:
        """``n`` items of ``kind`` were read and given a place."""
        self.counts[kind] += n

    def no_place(self, kind: str, example: str, n: int = 1) -> None:
        """``n`` items of ``kind`` were read but stepscope's format has no place for them."""
        self.unplaced[kind] += n
        seen = self.examples.setdefault(kind, [])
        if len(seen) < MAX_EXAMPLES and example not in seen:
            seen.append(example)

    def as_json(self) -> dict[str, object]:
        """The tally as it is stored in job.json's ``origin`` (sorted: stable output)."""
        return {
            "counts": dict(sorted(self.counts.items())),
            "unplaced": {
                k: {"count": n, "examples": sorted(self.examples.get(k, []))}
                for k, n in sorted(self.unplaced.items())
            },
        }
