"""Small parts of the live rule runner (:mod:`._live_runner`): its verdicts' files,
who is told what its scans read and judge, its buffer's chunk, whether it scans from
the start, and which verdicts changed."""

from __future__ import annotations

import traceback
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Protocol

from stepscope.jobfolder import FaultLog, JsonObject, control, paths
from stepscope.rules._params import SCAN_INTERVAL
from stepscope.rules._types import Status

SCAN_COMPONENT = "rules-scan"
# At the job's end, the longest the runner waits for its observers all together (the
# trackers' last points and closes, the notifications queued): they work at once, from
# the final verdicts on, within the launcher's TRACKERS_STOP_S (15 s) for its helpers.
END_WAIT_S = 10.0

if TYPE_CHECKING:
    import pandas as pd

    from stepscope.rules._base import Rule
    from stepscope.rules._notify import Notifier
    from stepscope.rules._registry import RuleSpec
    from stepscope.rules._types import RuleResult
    from stepscope.store import Store


def write_results(store: Store, results: Sequence[RuleResult]) -> None:
    """``rules/<Rule>.json`` for each result, written whole (atomically)."""
    for res in results:
        store.write_json(paths.rule_key(res.rule), res.to_dict())


class Observer(Protocol):
    """Who is told what the runner read and judged: ``/metrics``
    (:class:`~stepscope.rules._live_metrics.MetricsFeed`), the trackers' live logger
    (``stepscope.export.live``), the notifying actions (:class:`Notifications`).

    ``seen``: the new rows of a scan (only the kinds that had some); ``judged``: each
    scan's verdicts; ``ended``: the final verdicts (``[]`` when the job folder was
    lost); ``close``: wait at most ``wait_s`` for what it still sends. Its calls but
    ``close`` must return at once, and none raises: the runner's loop is what the
    launcher watches for a hang. ``reads_rows``: it wants the rows (the runner then
    scans from the start and reads the last rows for it at the end)."""

    reads_rows: bool

    def seen(self, frames: dict[str, pd.DataFrame]) -> None: ...
    def judged(self, results: list[RuleResult]) -> None: ...
    def ended(self, results: list[RuleResult]) -> None: ...
    def close(self, wait_s: float) -> None: ...


class Notifications:
    """The rules' notifying actions (webhooks, commands) as an observer: each scan's
    verdicts and the final ones go to the :class:`~stepscope.rules._notify.Notifier`."""

    reads_rows = False

    def __init__(self, notifier: Notifier, specs: Sequence[RuleSpec]) -> None:
        self.notifier, self.actions = notifier, [s.notify for s in specs]

    def seen(self, frames: dict[str, pd.DataFrame]) -> None:
        pass  # verdicts only

    def judged(self, results: list[RuleResult]) -> None:
        for actions, res in zip(self.actions, results, strict=True):
            self.notifier.fire(actions, res)

    def ended(self, results: list[RuleResult]) -> None:
        if results:  # none when the folder was lost; else what no scan saw (once a kind)
            self.judged(results)

    def close(self, wait_s: float) -> None:
        self.notifier.close(wait_s)


class Observers:
    """The runner's observers, told in turn: one that raises is a fault of the scan
    (``faults/rules-scan-*``), and the others still hear. The notifications come last."""

    def __init__(self, faults: FaultLog, last: Observer) -> None:
        self.faults, self.all = faults, [last]

    def add(self, observer: Observer) -> None:
        self.all.insert(len(self.all) - 1, observer)

    @property
    def reads_rows(self) -> bool:
        return any(o.reads_rows for o in self.all)

    def tell(self, what: str, call: Callable[[Observer], None]) -> None:
        for observer in self.all:
            try:
                call(observer)
            except Exception as exc:
                line = f"{type(observer).__name__} {what}: {type(exc).__name__}: {exc}"
                self.faults.record(SCAN_COMPONENT, line.splitlines()[0][:500],
                                   traceback=traceback.format_exc())  # fmt: skip

    def close(self, mono: Callable[[], float], wait_s: float = END_WAIT_S) -> None:
        """Each observer's ``close``, within ``wait_s`` in all (they send at once)."""
        deadline = mono() + wait_s
        self.tell("closing", lambda o: o.close(max(0.0, deadline - mono())))


def request_stops(
    store: Store, specs: Sequence[RuleSpec], results: Sequence[RuleResult], stopped: set[str]
) -> None:
    """The ``stop`` action: a stop request for each rule that fired, once (``stopped``)."""
    for spec, res in zip(specs, results, strict=True):
        name = spec.rule.rule_name
        if "stop" in spec.actions and res.verdict is Status.ISSUES_FOUND and name not in stopped:
            stopped.add(name)
            finding = max(res.findings, key=lambda f: f.severity, default=None)
            reason = f"rule {name} fired: {finding.message if finding else res.message}"
            control.request_stop(store, reason=reason, by=f"rule:{name}")


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
