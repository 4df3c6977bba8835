"""The live buffer: each node's recent rows, judged node by node, and running totals.

Rules judge a buffer of at most two chunks (``chunk_s``, aligned to the job's
start); when the older chunk is dropped, its verdicts are evaluated once more
and committed to running totals (``_live.merge``). The buffer is kept per node,
as the offline evaluation reads it: a scan hands each node its own frames with
no filtering of a job-wide frame, and builds job-wide frames only for the
whole-job rules, with only the frames they declare (``Rule.frames``).

Events are not chunked: they are few, and a rank's start is judged against its
first step ever (``RuleInput.first_steps``), so they are judged with the current
buffer only, never committed (which counted each start once per chunk).

Drift rules judge the whole job: when a chunk is dropped, each node rule's
``summary`` of it (e.g. GPU memory medians per window) is kept in ``history``,
compacted to a bounded size (``_trend.compact``), and handed back to the rule
with the current buffer, so a scan costs the same at any job age.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace

import pandas as pd

from stepscope.rules._base import Rule
from stepscope.rules._evaluate import _Evaluation
from stepscope.rules._input import (
    RuleInput,
    empty_events,
    empty_others,
    empty_steps,
    empty_system,
)
from stepscope.rules._live import merge
from stepscope.rules._node_rule import NodeRule
from stepscope.rules._trend import extend
from stepscope.rules._types import RuleResult, Status

Frames = dict[str | None, pd.DataFrame]  # node (None: rows without one) -> its rows
EMPTY = {"steps": empty_steps, "system": empty_system, "events": empty_events}


def by_node(frame: pd.DataFrame) -> Iterator[tuple[str | None, pd.DataFrame]]:
    """The rows of ``frame`` per node, in their order."""
    if "node" not in frame:
        yield None, frame
        return
    for node, rows in frame.groupby("node", sort=False, dropna=False):
        yield (None if pd.isna(node) else str(node)), rows


def _concat(old: pd.DataFrame | None, new: pd.DataFrame) -> pd.DataFrame:
    return new if old is None or not len(old) else pd.concat([old, new], ignore_index=True)


def _split(frames: Frames, col: str, cut: float) -> tuple[Frames, Frames]:
    """Each node's rows before ``cut`` and from ``cut`` on."""
    old, new = {}, {}
    for node, frame in frames.items():
        before = (frame[col] < cut).to_numpy()
        if before.any():
            old[node] = frame[before]
        new[node] = frame[~before] if before.any() else frame
    return old, new


def _whole(frames: Frames) -> pd.DataFrame | None:
    nodes = sorted(frames, key=lambda n: (n is None, n or ""))
    parts = [frames[n] for n in nodes if len(frames[n])]
    return pd.concat(parts, ignore_index=True) if parts else None


@dataclass
class LiveState:
    """The recent buffer of a running job and the rules' committed totals."""

    rules: list[Rule]
    base: RuleInput
    chunk_s: float
    steps: Frames = field(default_factory=dict)
    system: Frames = field(default_factory=dict)
    others: Frames = field(default_factory=dict)  # others/<node>/, chunked as system
    events: pd.DataFrame = field(default_factory=empty_events)
    first_steps: dict[int, float] = field(default_factory=dict)
    committed: dict[str, RuleResult] = field(default_factory=dict)
    # Rule -> node -> the rule's summary of the dropped chunks (NodeRule.summary).
    history: dict[str, dict[str, pd.DataFrame]] = field(default_factory=dict)

    def add(self, kind: str, frame: pd.DataFrame | None) -> None:
        """Append new rows of ``kind`` (``steps``, ``system``, ``events``, ``others``)."""
        if frame is None or not len(frame):
            return
        if kind == "events":
            self.events = _concat(self.events, frame)
            return
        if kind == "steps":
            for rank, start in frame.groupby("rank")["start"].min().items():
                seen = self.first_steps.get(int(rank), math.inf)
                self.first_steps[int(rank)] = min(seen, float(start))
        frames: Frames = getattr(self, kind)
        for node, rows in by_node(frame):
            frames[node] = _concat(frames.get(node), rows)

    def _cut(self, now: float) -> float:
        """The start of the previous chunk: rows before it leave the buffer."""
        origin = self.base.start()
        return origin + (math.floor((now - origin) / self.chunk_s) - 1) * self.chunk_s

    def trim_due(self, now: float) -> bool:
        """Whether :meth:`trim` would commit rows at ``now``."""
        cut, cols = self._cut(now), {"steps": "start", "system": "time", "others": "time"}
        return any(
            len(f) and float(f[col].min()) < cut
            for kind, col in cols.items()
            for f in getattr(self, kind).values()
        )

    def trim(self, now: float) -> None:
        """Commit and drop the chunks older than the previous one."""
        cut = self._cut(now)
        old_steps, self.steps = _split(self.steps, "start", cut)
        old_system, self.system = _split(self.system, "time", cut)
        old_others, self.others = _split(self.others, "time", cut)
        if not old_steps and not old_system:
            return
        results = self._evaluate(old_steps, old_system, empty_events(), now, old_others)
        for rule, res in zip(self.rules, results, strict=True):
            self.committed[rule.rule_name] = merge(rule, self.committed.get(rule.rule_name), res)
        self._summarize(old_steps, old_system, now)

    def _summarize(self, steps: Frames, system: Frames, now: float) -> None:
        """Keep the node rules' summaries of the dropped rows (compacted)."""
        base = replace(self.base, now=now, first_steps=self.first_steps, cache={})
        for node in _node_names(base, steps, system, empty_events()):
            data = self._node_input(base, node, steps, system, empty_events())
            for rule in self.rules:
                if isinstance(rule, NodeRule) and (part := rule.summary(data)) is not None:
                    kept = self.history.setdefault(rule.rule_name, {})
                    merged = extend(kept.get(node), part)
                    if merged is not None:
                        kept[node] = merged

    def evaluate(self, now: float, rules: list[Rule] | None = None) -> list[RuleResult]:
        """The running verdict (status ``InProgress``, ``verdict`` provisional) of every
        rule, or of ``rules`` only (the buffer is then judged as it is, not trimmed)."""
        if rules is None:
            rules = self.rules
            self.trim(now)
        events = self.events if len(self.events) else self.base.events
        current = self._evaluate(
            self.steps, self.system, events, now, self.others, self.history, rules
        )
        out = []
        for rule, res in zip(rules, current, strict=True):
            total = merge(rule, self.committed.get(rule.rule_name), res)
            out.append(replace(total, status=Status.IN_PROGRESS, verdict=total.status))
        return out

    def _evaluate(
        self,
        steps: Frames,
        system: Frames,
        events: pd.DataFrame,
        now: float,
        others: Frames,
        history: dict[str, dict[str, pd.DataFrame]] | None = None,
        rules: list[Rule] | None = None,
    ) -> list[RuleResult]:
        """The rules (all, or ``rules``) over these frames: node by node (with the
        ``history`` of the dropped chunks, if given), then the whole-job rules."""
        rules = self.rules if rules is None else rules
        base = replace(self.base, now=now, first_steps=self.first_steps, cache={})
        ev = _Evaluation(rules, now)
        for node in _node_names(base, steps, system, events):
            data = self._node_input(base, node, steps, system, events)
            kept = {r: h[node] for r, h in (history or {}).items() if node in h}
            mine = others.get(node)
            if kept:
                data = replace(data, history=kept)
            ev.check_node(replace(data, others=mine) if mine is not None else data)
        wanted = {f for r in rules if not isinstance(r, NodeRule) for f in r.frames}

        def whole() -> RuleInput:
            """Job-wide frames, only those the whole-job rules read (``Rule.frames``)."""
            build: dict[str, Callable[[], pd.DataFrame]] = {
                "steps": lambda: _whole(steps), "system": lambda: _whole(system),
                "events": lambda: events}  # fmt: skip
            loaded = {k: build[k]() if k in wanted else None for k in EMPTY}  # only those read
            ready = {k: EMPTY[k]() if v is None or not len(v) else v for k, v in loaded.items()}
            return replace(base, **ready, cache={})

        return ev.results(whole, base)

    @staticmethod
    def _node_input(
        base: RuleInput, node: str, steps: Frames, system: Frames, events: pd.DataFrame
    ) -> RuleInput:
        mine = events[events["node"] == node] if len(events) else events
        return replace(
            base,
            steps=steps[node] if len(steps.get(node, ())) else empty_steps(),
            system=system[node] if len(system.get(node, ())) else empty_system(),
            events=mine,
            others=empty_others(),
            nodes=base.nodes_of(node),
            cache={},
        )


def _node_names(base: RuleInput, steps: Frames, system: Frames, events: pd.DataFrame) -> list[str]:
    """Every node with node facts, samples, steps or events (as ``RuleInput.node_names``)."""
    names = set(base.nodes)
    names.update(n for frames in (steps, system) for n, f in frames.items() if n and len(f))
    if len(events) and "node" in events:
        names.update(str(n) for n in events["node"].dropna().unique())
    return sorted(names)
