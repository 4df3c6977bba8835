"""Small parts of the live rule runner (:mod:`._live_runner`): its verdicts' files,
who else watches its scans, its buffer's chunk, whether it scans from the start, and
the actions a scan takes."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

from stepscope.jobfolder import JsonObject, control, paths
from stepscope.rules._params import SCAN_INTERVAL

if TYPE_CHECKING:
    import pandas as pd

    from stepscope.rules._base import Rule
    from stepscope.rules._notify import Notifier
    from stepscope.rules._registry import RuleSpec
    from stepscope.rules._types import Finding, RuleResult
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


def worst(result: RuleResult) -> Finding | None:
    """The most severe finding of ``result`` (None: none)."""
    return max(result.findings, key=lambda f: f.severity, default=None)


def changed(last: dict[str, JsonObject], results: list[RuleResult]) -> list[RuleResult]:
    """The verdicts that changed since their last write (``last``, updated): on object
    stores only those are written again."""
    fresh = []
    for res in results:
        body = {k: v for k, v in res.to_dict().items() if k != "updated"}
        if last.get(res.rule) != body:
            last[res.rule] = body
            fresh.append(res)
    return fresh


def act(
    store: Store,
    specs: Sequence[RuleSpec],
    results: Sequence[RuleResult],
    stopped: set[str],
    notifier: Notifier,
) -> None:
    """The rules' actions on a scan's ``results``: notifications, and a stop request
    the first time a rule with ``stop`` fires (``stopped``: the rules that asked)."""
    from stepscope.rules._types import Status

    for spec, res in zip(specs, results, strict=True):
        notifier.fire(spec.notify, res)
        name = spec.rule.rule_name
        fired = res.verdict is Status.ISSUES_FOUND
        if "stop" in spec.actions and fired and name not in stopped:
            stopped.add(name)
            finding = worst(res)
            reason = f"rule {name} fired: {finding.message if finding else res.message}"
            control.request_stop(store, reason=reason, by=f"rule:{name}")
