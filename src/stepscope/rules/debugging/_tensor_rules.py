"""Generic tensor rules: AllZero, UnchangedTensor, TensorVariance, StalledTrainingRule."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from stepscope.errors import RuleConfigError
from stepscope.rules._input import RuleInput
from stepscope.rules._params import Param
from stepscope.rules._types import RuleResult
from stepscope.rules.debugging._base import (
    TensorRule,
    collection_param,
    regex_param,
    split_names,
    step_span,
)

if TYPE_CHECKING:
    from stepscope.read import RawTensor, Tensors


class AllZero(TensorRule):
    """Fires when at least ``threshold`` % of a tensor's values are zero."""

    name = "AllZero"
    description = "Detects tensors that are all zeros."
    recommendation = "Check the layer's inputs, its initialisation and the data pipeline."
    collections = ("weights", "gradients")
    params = (
        collection_param("weights,gradients"),
        regex_param("tensor_regex", ""),
        Param("threshold", 100.0, "% of zeros for a tensor to count as all zero"),
    )

    def judge(self, tensors: Tensors, data: RuleInput) -> RuleResult:
        names = self.select(
            tensors, split_names(self.p_str("collection_names")), self.p_str("tensor_regex")
        )
        hits: dict[str, list[int]] = {}
        points = 0
        for phase in ("train", "eval"):
            for name, step, x in self.raws(tensors, names, phase):
                points += 1
                if x.size and (x == 0).mean() * 100 >= self.p_float("threshold"):
                    hits.setdefault(name, []).append(step)
        findings = [
            self.finding(f"{name} is all zeros at {len(s)} saved step(s).", 0.7, step_span(s))
            for name, s in sorted(hits.items())
        ]
        return self.verdict(data, findings, points, sum(map(len, hits.values())))


class UnchangedTensor(TensorRule):
    """Fires when a tensor is unchanged (``np.allclose``) over its last ``num_steps``
    saved steps."""

    name = "UnchangedTensor"
    description = "Detects tensors that stop changing."
    recommendation = "Check that the parameter is trained (requires_grad, in the optimizer)."
    collections = ("weights", "gradients")
    params = (
        collection_param("weights,gradients"),
        regex_param("tensor_regex", ""),
        Param("num_steps", 3, "saved steps compared", int, minimum=2),
        Param("rtol", 1e-5, "relative tolerance"),
        Param("atol", 1e-8, "absolute tolerance"),
        Param("equal_nan", False, "NaNs compare equal", bool),
    )

    def judge(self, tensors: Tensors, data: RuleInput) -> RuleResult:
        names = self.select(
            tensors, split_names(self.p_str("collection_names")), self.p_str("tensor_regex")
        )
        series: dict[str, list[tuple[int, RawTensor]]] = {}
        for name, step, x in self.raws(tensors, names):
            series.setdefault(name, []).append((step, x))
        n, findings = self.p_int("num_steps"), []
        judged = [(name, items[-n:]) for name, items in series.items() if len(items) >= n]
        for name, last in judged:
            first = last[0][1]
            if all(
                np.allclose(
                    first,
                    x,
                    rtol=self.p_float("rtol"),
                    atol=self.p_float("atol"),
                    equal_nan=self.p_bool("equal_nan"),
                )
                for _, x in last[1:]
            ):
                findings.append(
                    self.finding(
                        f"{name} did not change over {n} saved steps.",
                        0.5,
                        step_span(s for s, _ in last),
                    )
                )
        return self.verdict(data, findings, len(judged), what="tensors with enough steps")


class TensorVariance(TensorRule):
    """Fires when a tensor's variance leaves [``min_threshold``, ``max_threshold``]
    (both required)."""

    name = "TensorVariance"
    description = "Detects tensors whose variance is too small or too large."
    recommendation = "Check the learning rate, the initialisation and normalisation layers."
    collections = ("weights", "gradients")
    params = (
        collection_param("weights,gradients"),
        regex_param("tensor_regex", ""),
        Param("min_threshold", None, "smallest variance (required)", minimum=None),
        Param("max_threshold", None, "largest variance (required)", minimum=None),
    )

    def __init__(self, name: str | None = None, **parameters: object) -> None:
        super().__init__(name, **parameters)
        if self.p("min_threshold") is None or self.p("max_threshold") is None:
            raise RuleConfigError(
                "TensorVariance needs min_threshold and max_threshold, "
                "e.g. parameters = { min_threshold = 1e-6, max_threshold = 10 }."
            )

    def judge(self, tensors: Tensors, data: RuleInput) -> RuleResult:
        names = self.select(
            tensors, split_names(self.p_str("collection_names")), self.p_str("tensor_regex")
        )
        var = self.stat(tensors, names, "variance")
        low, high = self.p("min_threshold"), self.p("max_threshold")
        out = var[(var["value"] < low) | (var["value"] > high)]
        findings = [
            self.finding(
                f"{name}: variance {g['value'].iloc[-1]:.3g} outside [{low:g}, {high:g}].",
                0.5,
                step_span(g["step"]),
                float(g["value"].iloc[-1]),
            )
            for name, g in out.groupby("name")
        ]
        return self.verdict(data, findings, len(var), len(out))


class StalledTrainingRule(TensorRule):
    """Fires when no step ended (and no tensor was saved) for ``threshold`` seconds,
    between two steps or, while the job runs, until now. ``stop_training_on_fire`` is
    the rule's ``actions = ["stop"]``."""

    name = "StalledTrainingRule"
    frames = ("steps",)
    description = "Detects a training that stopped making progress."
    recommendation = "Look for a hang: a deadlock, a stuck data loader or a dead worker."
    params = (
        Param("threshold", 1800, "seconds without progress", int, minimum=1),
        Param("stop_training_on_fire", False, "stop the job when it fires", bool),
    )

    def evaluate(self, data: RuleInput) -> RuleResult:
        ends: list[float] = sorted(data.steps["end"].dropna()) if len(data.steps) else []
        if not ends:
            return self.not_applicable(data, "no step recorded yet")
        times = list(ends)
        if str(data.meta.get("status")) == "Running" and data.now:
            times.append(data.now)
        gaps = np.diff(np.asarray([data.start(), *times]))
        worst = int(np.argmax(gaps))
        findings = []
        if gaps[worst] > self.p_int("threshold"):
            findings.append(
                self.finding(
                    f"No progress for {gaps[worst]:.0f} s.",
                    0.8,
                    value=float(gaps[worst]),
                    threshold=self.p_int("threshold"),
                )
            )
        return self.verdict(data, findings, len(gaps), what="step intervals")
