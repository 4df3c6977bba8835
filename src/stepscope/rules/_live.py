"""Live evaluation: read only new rows, judge a bounded recent buffer, keep totals.

Each stream (``system/<node>``, ``steps/rank-<r>``, ``events/rank-<r>``) has a
watermark: the newest segment seen and the newest row time. A scan re-reads
only segments at or after the newest seen (the current one is rewritten by its
writer every flush) and keeps rows newer than the watermark, so its cost does
not grow with the job's age. Rules judge a buffer of at most two chunks
(``chunk_s``, aligned to the job's start); when the older chunk is dropped, its
verdicts are evaluated once more and committed to running totals.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import duckdb
import pandas as pd

from ..store import Store
from ._base import NodeRule, Rule
from ._data import read_segments, stream_prefixes
from ._evaluate import evaluate_input
from ._input import RuleInput
from ._types import Finding, RuleResult, Status

TIME_COLUMNS = {"system": "time", "steps": "end", "events": "time"}
ORDER = {"system": "node, time", "steps": "rank, phase, step", "events": "time"}


@dataclass
class StreamReader:
    """Reads the rows of one kind of stream that are new since the last call."""

    store: Store
    kind: str
    last_key: dict[str, str] = field(default_factory=dict)
    watermark: dict[str, float] = field(default_factory=dict)
    rows_read: int = 0
    files_read: int = 0
    con: duckdb.DuckDBPyConnection = field(default_factory=duckdb.connect)

    def read_new(self) -> pd.DataFrame | None:
        """New rows of every stream of this kind, read in one query."""
        keys, owner = self._new_keys()
        if not keys:
            return None
        col = TIME_COLUMNS[self.kind]
        low = min(self.watermark.get(p, -math.inf) for p in set(owner.values()))
        frame = read_segments(
            self.store, keys, f'"{col}" > ?', [low], ORDER[self.kind], self.con, filename=True
        )
        self.files_read += len(keys)
        if frame is None or not len(frame):
            return None
        prefixes = frame.pop("filename").map(owner)
        marks = prefixes.map(lambda p: self.watermark.get(p, -math.inf))
        fresh = (frame[col] > marks).to_numpy()
        frame, prefixes = frame[fresh].reset_index(drop=True), prefixes[fresh]
        for prefix, newest in frame[col].groupby(prefixes.to_numpy()).max().items():
            self.watermark[str(prefix)] = float(newest)
        self.rows_read += len(frame)
        return frame if len(frame) else None

    def _new_keys(self) -> tuple[list[str], dict[str, str]]:
        """Segments at or after the newest seen, per stream; full path -> stream."""
        keys, owner = [], {}
        for prefix in stream_prefixes(self.store, self.kind):
            last = self.last_key.get(prefix, "")
            # One flat listing of names (no stat per file): segments are direct children.
            keys_now = (f"{prefix}/{n}" for n in self.store.listdir(prefix))
            new = [k for k in keys_now if k.endswith(".parquet") and k >= last]
            if new:
                self.last_key[prefix] = new[-1]
            owner.update({self.store.path(k): prefix for k in new})
            keys += new
        return keys, owner


def _concat(old: pd.DataFrame, new: pd.DataFrame | None) -> pd.DataFrame:
    if new is None or not len(new):
        return old
    return new if not len(old) else pd.concat([old, new], ignore_index=True)


def _split(frame: pd.DataFrame, col: str, cut: float) -> tuple[pd.DataFrame, pd.DataFrame]:
    if not len(frame):
        return frame, frame
    before = frame[col] < cut
    return frame[before], frame[~before]


def merge(rule: Rule, committed: RuleResult | None, current: RuleResult) -> RuleResult:
    """Running totals: committed chunks plus the current buffer."""
    if committed is None:
        return current
    if Status.ERROR in (committed.status, current.status):
        return current if current.status is Status.ERROR else committed
    keys = {f.key() for f in committed.findings}
    findings = [*committed.findings, *(f for f in current.findings if f.key() not in keys)]
    triggers = committed.triggers + current.triggers
    datapoints = committed.datapoints + current.datapoints
    tolerated = rule.tolerated() if isinstance(rule, NodeRule) else 0
    status = _status(triggers, tolerated, datapoints, committed, current)
    message = f"{triggers} trigger(s) in {datapoints} datapoints so far; latest: {current.message}"
    return replace(
        current,
        status=status,
        findings=tuple(findings),
        triggers=triggers,
        datapoints=datapoints,
        message=message,
    )


def _status(triggers: int, tolerated: int, datapoints: int, *results: RuleResult) -> Status:
    if triggers > tolerated or any(r.status is Status.ISSUES_FOUND for r in results):
        return Status.ISSUES_FOUND
    if datapoints or any(r.status is Status.NO_ISSUES_FOUND for r in results):
        return Status.NO_ISSUES_FOUND
    return Status.NOT_APPLICABLE


@dataclass
class LiveState:
    """The recent buffer of a running job and the rules' committed totals."""

    rules: list[Rule]
    base: RuleInput
    chunk_s: float
    steps: pd.DataFrame = field(default_factory=pd.DataFrame)
    system: pd.DataFrame = field(default_factory=pd.DataFrame)
    events: pd.DataFrame = field(default_factory=pd.DataFrame)
    committed: dict[str, RuleResult] = field(default_factory=dict)

    def add(self, kind: str, frame: pd.DataFrame | None) -> None:
        setattr(self, kind, _concat(getattr(self, kind), frame))

    def _input(self, steps: pd.DataFrame, system: pd.DataFrame, now: float) -> RuleInput:
        events = self.events if len(self.events) else self.base.events
        steps = steps if len(steps) else self.base.steps
        system = system if len(system) else self.base.system
        return replace(self.base, steps=steps, system=system, events=events, now=now, cache={})

    def trim(self, now: float) -> None:
        """Commit and drop the chunks older than the previous one."""
        origin = self.base.start()
        cut = origin + (math.floor((now - origin) / self.chunk_s) - 1) * self.chunk_s
        old_steps, self.steps = _split(self.steps, "start", cut)
        old_system, self.system = _split(self.system, "time", cut)
        if not len(old_steps) and not len(old_system):
            return
        data = self._input(old_steps, old_system, now)
        for rule, res in zip(self.rules, evaluate_input(self.rules, data), strict=True):
            self.committed[rule.rule_name] = merge(rule, self.committed.get(rule.rule_name), res)

    def evaluate(self, now: float) -> list[RuleResult]:
        """Every rule's running verdict (status ``InProgress``, ``verdict`` provisional)."""
        self.trim(now)
        current = evaluate_input(self.rules, self._input(self.steps, self.system, now))
        out = []
        for rule, res in zip(self.rules, current, strict=True):
            total = merge(rule, self.committed.get(rule.rule_name), res)
            out.append(replace(total, status=Status.IN_PROGRESS, verdict=total.status))
        return out


def worst(result: RuleResult) -> Finding | None:
    return max(result.findings, key=lambda f: f.severity, default=None)
