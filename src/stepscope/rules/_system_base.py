"""The base of the rules on system samples: :class:`SystemRule` and its helpers.

A system rule judges one node at a time, window by aligned window (see
``_windows``), after the ``patience`` samples at the start of the job. The rules
themselves live in ``_system_rules``, ``_gpu_rules``, ``_gpu_idle`` and ``_balance``.
"""

from __future__ import annotations

import pandas as pd

from stepscope.rules._input import RuleInput
from stepscope.rules._node_rule import NodeRule, Part
from stepscope.rules._params import Param
from stepscope.rules._reduce import Windows
from stepscope.rules._types import Finding
from stepscope.rules._windows import (
    Hit,
    no_gpu_reason,
    node_gpus,
    patience_begin,
    patience_reason,
    runs,
    shared,
    with_windows,
)


def pct(name: str, default: float, doc: str) -> Param:
    """A float parameter in percent (``doc`` gets the unit appended)."""
    return Param(name, default, f"{doc}, %", float)


def unrecorded(data: RuleInput, needs: list[tuple[str, ...]]) -> str | None:
    """Why the node's samples cannot be judged: an input of ``needs`` (a tuple of
    columns, any one of which will do) absent or null in every sample; None if all
    are there. A rule never judges a column it has no value of (NoIssuesFound on
    an unrecorded I/O wait would say "checked" of what was never measured)."""
    system = data.system
    node = str(system["node"].iloc[0]) if len(system) and "node" in system else "this node"
    missing = [
        cols
        for cols in needs
        if not any(c in system and bool(system[c].notna().any()) for c in cols)
    ]
    if not missing:
        return None
    names = "; ".join(" or ".join(cols) for cols in missing)
    return (
        f"no {names} on {node}: absent or null in all {len(system)} samples (not "
        "recorded for this job); this rule judges it"
    )


def lasted(run: list[Hit]) -> str:
    """How long ``run`` lasted, for a finding's message (minutes past two)."""
    seconds = run[-1].end - run[0].start
    return f"{seconds / 60:.1f} min" if seconds >= 120 else f"{seconds:.0f} s"


class SystemRule(NodeRule):
    """A node rule over the node's samples after patience, in windows."""

    needs_gpu = True

    def check(self, data: RuleInput) -> Part:
        gpus = node_gpus(data)
        if self.needs_gpu and not gpus:
            return Part(na_reason=no_gpu_reason(data))
        if len(data.system) and (reason := unrecorded(data, self.needs(gpus))) is not None:
            return Part(na_reason=reason)
        return self.judge(self.framed(data, gpus), gpus, len(data.system))

    def judge(self, framed: pd.DataFrame, gpus: list[int], total: int) -> Part:
        """Judge ``framed`` (of :meth:`framed`; ``total`` samples before patience)."""
        if not len(framed):
            return Part(na_reason=patience_reason(self.p_int("patience"), total))
        node = str(framed["node"].iloc[0])
        found = runs(self.hits(framed, gpus))
        findings = [self.finding(node, run) for run in found]
        return Part(findings, sum(len(r) for r in found), len(framed))

    def framed(self, data: RuleInput, gpus: list[int]) -> pd.DataFrame:
        """The samples after patience with their window (``win``), and their
        :class:`Windows` (:meth:`windows_of`); shared by the rules of the same
        ``window`` and columns that judge the same input, and by those of any
        ``patience`` once every sample is past it (a live buffer, soon)."""
        # Only the columns the rule reads: a day of a node's samples is ~100 wide columns.
        wanted = [c for c in self.columns(gpus) if c in data.system]
        begin = patience_begin(data, self.p_int("patience"))
        key = ("framed", begin, self.p_int("window"), tuple(wanted))
        framed, w = shared(data, key, data.system, lambda: self._frame(data, wanted, begin))
        self._windows = (framed, w)
        return framed

    def _frame(
        self, data: RuleInput, wanted: list[str], begin: float | None
    ) -> tuple[pd.DataFrame, Windows | None]:
        judged = data.system[wanted]
        if begin is not None:
            judged = judged[judged["time"] >= begin]
        framed = with_windows(data, judged, self.p_int("window"))
        return framed, Windows(framed) if len(framed) else None

    def forget(self) -> None:
        # The last node's framed samples and their converted columns (tens of MB a day).
        self._windows = (None, None)

    def windows_of(self, framed: pd.DataFrame) -> Windows:
        """The :class:`Windows` of ``framed`` (computed once per input)."""
        done, w = getattr(self, "_windows", (None, None))
        return w if done is framed and w is not None else Windows(framed)

    def columns(self, gpus: list[int]) -> list[str]:
        """The system columns the rule reads."""
        per_gpu = ("util", "mem_util", "mem_used", "mem_total")
        return [
            "time",
            "node",
            "cpu",
            "cpu_iowait",
            *(f"gpu{g}_{m}" for g in gpus for m in per_gpu),
        ]

    def needs(self, gpus: list[int]) -> list[tuple[str, ...]]:
        """The inputs without which the rule cannot judge the node: for each, the
        columns any one of which will do (:func:`unrecorded`)."""
        return []

    def hits(self, framed: pd.DataFrame, gpus: list[int]) -> list[Hit]:
        raise NotImplementedError

    def finding(self, node: str, run: list[Hit]) -> Finding:
        raise NotImplementedError
