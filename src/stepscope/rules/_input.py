"""What a rule reads: :class:`RuleInput`, the job's frames at one moment."""

from __future__ import annotations

import functools
from collections.abc import Hashable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import pandas as pd
import pyarrow as pa

from stepscope.jobfolder import (
    EVENTS_SCHEMA,
    OTHERS_SCHEMA,
    STEPS_SCHEMA,
    SYSTEM_BASE_SCHEMA,
    JobJson,
    NodeInfo,
)

if TYPE_CHECKING:
    from stepscope.read import Tensors
    from stepscope.rules._trace_source import TraceSource

DEFAULT_INTERVAL_S = 0.5


@functools.cache
def _empty(schema: pa.Schema) -> pd.DataFrame:
    return schema.empty_table().to_pandas()  # ms each: a live scan builds many inputs


def empty_steps() -> pd.DataFrame:
    """A steps frame without rows, with the columns of docs/format.md."""
    return _empty(STEPS_SCHEMA).copy()


def empty_events() -> pd.DataFrame:
    """An events frame without rows."""
    return _empty(EVENTS_SCHEMA).copy()


def empty_system() -> pd.DataFrame:
    """A (wide) system frame without rows."""
    return _empty(SYSTEM_BASE_SCHEMA).copy()


def empty_others() -> pd.DataFrame:
    """An ``others/`` frame (the busiest processes outside the job) without rows."""
    return _empty(OTHERS_SCHEMA).copy()


@dataclass(frozen=True)
class RuleInput:
    """The data a rule judges (columns as in docs/format.md).

    ``steps``, ``system`` (wide) and ``events`` may cover the whole job or only
    its recent part (live); so may ``others``, the busiest processes outside the job
    (``others/<node>/``, empty for older jobs). ``nodes`` maps node ids to ``nodes/<node>.json``.
    ``origin`` is the job's start (unix s): rules align their time windows to it,
    so a window means the same span in every evaluation. ``now`` is the time of
    the evaluation (injected, never read from the clock by a rule).
    """

    steps: pd.DataFrame = field(default_factory=empty_steps)
    system: pd.DataFrame = field(default_factory=empty_system)
    events: pd.DataFrame = field(default_factory=empty_events)
    others: pd.DataFrame = field(default_factory=empty_others)
    nodes: dict[str, NodeInfo] = field(default_factory=dict)
    now: float = 0.0
    origin: float | None = None
    meta: JobJson = field(default_factory=lambda: JobJson())
    # The job's output tensors for the debugging rules.
    tensors: Tensors | None = None
    # The parsed PyTorch traces of the detailed windows, for the kernel rules.
    traces: TraceSource | None = field(default=None, compare=False, repr=False)
    # Rank -> start of its first step, when ``steps`` holds only recent steps (live).
    first_steps: dict[int, float] = field(default_factory=dict)
    # Rule name -> its compact summary of this node's data that left the live buffer
    # (``NodeRule.summary``): what a drift rule needs of the whole job so far.
    history: dict[str, pd.DataFrame] = field(default_factory=dict, compare=False, repr=False)
    # Work shared by the rules judging this same input (e.g. one node's windows);
    # entries hold the frame they were computed from, checked by identity.
    cache: dict[Hashable, tuple[object, object]] = field(
        default_factory=dict, compare=False, repr=False
    )

    def node_names(self) -> list[str]:
        """Every node that has node facts, system samples, steps or events."""
        names = set(self.nodes)
        for frame in (self.system, self.steps, self.events):
            if "node" in frame and len(frame):
                names.update(frame["node"].dropna().unique().tolist())
        return sorted(str(n) for n in names)

    def for_node(self, node: str) -> RuleInput:
        """The same input restricted to one node."""

        def only(frame: pd.DataFrame) -> pd.DataFrame:
            if not len(frame) or "node" not in frame:
                return frame
            return frame[frame["node"] == node]

        return replace(
            self,
            steps=only(self.steps),
            system=only(self.system),
            events=only(self.events),
            others=only(self.others),
            nodes=self.nodes_of(node),
            cache={},
        )

    def nodes_of(self, node: str) -> dict[str, NodeInfo]:
        """``nodes`` restricted to ``node`` (empty where it has no ``nodes/<node>.json``)."""
        return {node: self.nodes[node]} if node in self.nodes else {}

    def cores(self, node: str | None = None) -> float | None:
        """The cores of ``node`` (None: of the first node that says) from its
        ``nodes/<node>.json``; None where unknown."""
        infos = list(self.nodes.values()) if node is None else list(self.nodes_of(node).values())
        for info in infos:
            count = info.get("cpu_count")
            if isinstance(count, int | float) and not isinstance(count, bool) and count > 0:
                return float(count)
        return None

    def start(self) -> float:
        """The origin of the time windows: the job's start, else its first datum."""
        if self.origin is not None:
            return float(self.origin)
        times = [self.system["time"].min()] if len(self.system) else []
        if len(self.steps):
            times.append(self.steps["start"].min())
        if len(self.events):
            times.append(self.events["time"].min())
        return float(min(times)) if times else self.now

    def interval_s(self, node: str | None = None) -> float:
        """The sampling interval of ``node`` (or of the first node), seconds."""
        infos = [self.nodes[node]] if node in self.nodes else list(self.nodes.values())
        for info in infos:
            ms = info.get("interval_ms")
            if ms:
                return float(ms) / 1000.0
        if len(self.system) and "interval_ms" in self.system:
            ms = self.system["interval_ms"].dropna()
            if len(ms):
                return float(ms.median()) / 1000.0
        return DEFAULT_INTERVAL_S
