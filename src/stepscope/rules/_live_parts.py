"""Small parts of the live rule runner (:mod:`._live_runner`): its verdicts' files,
who else watches its scans, its buffer's chunk, and whether it scans from the start."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

from stepscope.jobfolder import paths
from stepscope.rules._params import SCAN_INTERVAL

if TYPE_CHECKING:
    import pandas as pd

    from stepscope.rules._base import Rule
    from stepscope.rules._registry import RuleSpec
    from stepscope.rules._types import RuleResult
    from stepscope.store import Store


def write_results(store: Store, results: Sequence[RuleResult]) -> None:
    """``rules/<Rule>.json`` for each result, written whole (atomically)."""
    for res in results:
        store.write_json(paths.rule_key(res.rule), res.to_dict())


class Observer(Protocol):
    """Who else sees the rows each scan read and the final verdicts (the trackers'
    live logger, ``stepscope.export.live``). Its calls must return at once and never
    raise: the runner's loop is what the launcher watches for a hang."""

    def seen(self, frames: dict[str, pd.DataFrame]) -> None: ...
    def ended(self, results: list[RuleResult]) -> None: ...


def chunk_seconds(rules: Sequence[Rule], interval_s: float) -> float:
    """The live buffer's chunk: the longest window of the rules, at least 5 minutes."""
    given = [r.parameters.get("window", 0) for r in rules]
    windows = [int(w) if isinstance(w, int | float | str) else 0 for w in given]
    return max(300.0, max(windows, default=0) * interval_s)


def asked_live(rules: Sequence[Rule], specs: Sequence[RuleSpec], fed: bool) -> bool:
    """Whether the job asked for live verdicts from its start: a rule with an action
    (``stop``, a webhook, a command), a ``scan_interval_us`` shorter than the default,
    or someone ``fed`` by the scans (``/metrics``, a tracker)."""
    default = SCAN_INTERVAL.default
    faster = isinstance(default, int) and any(r.p_int(SCAN_INTERVAL.name) < default for r in rules)
    return faster or fed or any(s.actions or s.notify for s in specs)
