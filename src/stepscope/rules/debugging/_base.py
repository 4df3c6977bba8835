"""The base of the debugging rules: rules over a job's output tensors.

A :class:`TensorRule` reads ``data.tensors`` (a :class:`stepscope.read.Tensors`,
set by the evaluator from the job) and returns the same :class:`RuleResult` as
every rule, so the live runner, ``stepscope rules`` and the report treat it
like the others. Without saved tensors it is ``NotApplicable``, with the reason.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import TYPE_CHECKING, ClassVar

import pandas as pd

from stepscope.rules._base import Rule
from stepscope.rules._input import RuleInput
from stepscope.rules._params import Param
from stepscope.rules._types import Finding, RuleResult, Status

if TYPE_CHECKING:
    from stepscope.read import RawTensor, Tensors

VALUE = "value"


def tensors_of(data: RuleInput) -> Tensors | None:
    """The job's tensors (None if the evaluator gave none)."""
    return data.tensors


def collection_param(default: str) -> Param:
    return Param(
        "collection_names", default, "comma-separated collections to check", str, minimum=None
    )


def regex_param(name: str, default: str) -> Param:
    return Param(
        name, default, "regular expression over tensor names (case-insensitive)", str, minimum=None
    )


def split_names(text: str) -> list[str]:
    return [n.strip() for n in str(text or "").split(",") if n.strip()]


class TensorRule(Rule):
    """A rule over output tensors; subclasses implement :meth:`judge`."""

    #: Collections the rule reads (the agent enables them when the rule is configured).
    collections: ClassVar[tuple[str, ...]] = ()
    frames: ClassVar[tuple[str, ...]] = ()  # tensors only: no steps or samples loaded
    judges_now = True  # tensors are not streamed: a live scan judges them every time

    def evaluate(self, data: RuleInput) -> RuleResult:
        tensors = tensors_of(data)
        if tensors is None or not tensors.names():
            return self.not_applicable(data, "no output tensors saved in this job")
        return self.judge(tensors, data)

    def judge(self, tensors: Tensors, data: RuleInput) -> RuleResult:
        """Judge the tensors of the job."""
        raise NotImplementedError

    # -- selection --------------------------------------------------------------------
    def select(self, tensors: Tensors, collections: Iterable[str], regex: str = "") -> list[str]:
        """Members of ``collections`` and names matching ``regex`` (all names if neither)."""
        members = tensors.collections()
        chosen = {n for c in collections for n in members.get(c, [])}
        names = tensors.names()
        if regex:
            pattern = re.compile(regex, re.IGNORECASE)
            chosen |= {n for n in names if pattern.match(n)}
        if not collections and not regex:
            chosen = set(names)
        return sorted(chosen & set(names))

    # -- data ---------------------------------------------------------------------------
    @staticmethod
    def stat(tensors: Tensors, names: list[str], key: str, phase: str = "train") -> pd.DataFrame:
        """``name, step, value`` of reduction ``key`` (stored, else from raw tensors)."""
        from stepscope.read import np_reduce

        if not names:
            return pd.DataFrame({"name": [], "step": [], "value": []})
        rows = tensors.scalars(names, phase)
        have = rows[rows["key"].isin([key, VALUE])][["name", "step", "value"]]
        done = set(zip(have["name"], have["step"], strict=True))
        extra = [
            (r["name"], int(r["step"]), np_reduce(tensors.load(r), key))
            for _, r in tensors.index(names, phase).iterrows()
            if (r["name"], r["step"]) not in done
        ]
        frame = pd.concat([have, pd.DataFrame(extra, columns=["name", "step", "value"])])
        return frame.sort_values(["name", "step"], ignore_index=True)

    @staticmethod
    def raws(
        tensors: Tensors, names: list[str], phase: str = "train"
    ) -> Iterable[tuple[str, int, RawTensor]]:
        """``(name, step, array)`` of every raw tensor of ``names``, in step order."""
        for _, row in tensors.index(names, phase).iterrows():
            yield str(row["name"]), int(row["step"]), tensors.load(row)

    @staticmethod
    def losses(tensors: Tensors, phase: str) -> pd.DataFrame:
        """``step, value, time`` of the loss of ``phase``: the backward loss in training
        if saved, else the first loss module's output."""
        names = tensors.collections().get("losses", [])
        rows = tensors.scalars(names or None, phase)
        rows = rows[(rows["key"] == VALUE) & rows["name"].isin(names or ["loss"])]
        if not len(rows):
            return pd.DataFrame({"step": [], "value": [], "time": []})
        pick = "loss" if (rows["name"] == "loss").any() else sorted(rows["name"])[0]
        mine = rows[rows["name"] == pick]
        return mine[["step", "value", "time"]].sort_values("step", ignore_index=True)

    # -- results --------------------------------------------------------------------------
    def finding(
        self,
        message: str,
        severity: float,
        steps: tuple[int, int] | None = None,
        value: float | None = None,
        threshold: float | None = None,
    ) -> Finding:
        return Finding(
            message=message,
            recommendation=self.recommendation,
            severity=severity,
            steps=steps,
            value=value,
            threshold=threshold,
            rank=0,
        )

    def verdict(
        self,
        data: RuleInput,
        findings: list[Finding],
        datapoints: int,
        triggers: int | None = None,
        what: str = "tensor values",
    ) -> RuleResult:
        """IssuesFound with ``findings``, else NoIssuesFound (NotApplicable without data)."""
        if not datapoints:
            return self.not_applicable(data, f"no {what} saved yet")
        status = Status.ISSUES_FOUND if findings else Status.NO_ISSUES_FOUND
        message = findings[0].message if findings else f"No issue in {datapoints} {what}."
        if len(findings) > 1:
            message = f"{len(findings)} findings; first: {message}"
        return self.result(
            status,
            data,
            findings=findings,
            triggers=triggers,
            datapoints=datapoints,
            message=message,
        )


def step_span(steps: Iterable[int]) -> tuple[int, int]:
    values = [int(s) for s in steps]
    return (min(values), max(values))
