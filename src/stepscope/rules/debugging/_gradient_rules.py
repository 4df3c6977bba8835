"""Rules over gradients and weights: VanishingGradient, ExplodingTensor,
WeightUpdateRatio, PoorWeightInitialization."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from stepscope.rules._input import RuleInput
from stepscope.rules._params import Param
from stepscope.rules._types import Finding, RuleResult
from stepscope.rules.debugging._base import (
    VALUE,
    TensorRule,
    collection_param,
    regex_param,
    split_names,
    step_span,
)

if TYPE_CHECKING:
    from stepscope.read import RawTensor, Tensors


class VanishingGradient(TensorRule):
    """Fires when the mean absolute value of a gradient falls below ``threshold``."""

    name = "VanishingGradient"
    description = "Detects gradients that become vanishingly small."
    recommendation = (
        "Use non-saturating activations (ReLU), residual connections, "
        "normalisation layers or a better initialisation."
    )
    collections = ("gradients",)
    params = (Param("threshold", 1e-7, "minimum mean absolute gradient"),)

    def judge(self, tensors: Tensors, data: RuleInput) -> RuleResult:
        names = self.select(tensors, self.collections)
        stats = self.stat(tensors, names, "abs_mean")
        low = stats[stats["value"] < self.p_float("threshold")]
        findings = [
            self.finding(
                f"{name}: mean |gradient| {group['value'].min():.3g} below "
                f"{self.p_float('threshold'):g} at {len(group)} saved step(s).",
                0.8,
                step_span(group["step"]),
                float(group["value"].min()),
                self.p_float("threshold"),
            )
            for name, group in low.groupby("name")
        ]
        return self.verdict(data, findings, len(stats), len(low), "gradient values")


class ExplodingTensor(TensorRule):
    """Fires on any NaN, or any infinity unless ``only_nan``, in the tensors of
    ``collection_names`` or matching ``tensor_regex`` (every saved tensor if neither)."""

    name = "ExplodingTensor"
    description = "Detects NaN and infinite values in tensors."
    recommendation = (
        "Lower the learning rate, clip gradients, check the data for bad "
        "values and the loss for log(0) or division by zero."
    )
    collections = ("losses", "gradients")
    params = (
        collection_param(""),
        regex_param("tensor_regex", ""),
        Param("only_nan", False, "check NaN only (not infinities)", bool),
    )
    _KEYS = (VALUE, "min", "max", "mean", "abs_min", "abs_max", "abs_mean")

    def _bad(self, x: RawTensor) -> npt.NDArray[np.bool_]:
        return np.isnan(x) if self.p_bool("only_nan") else ~np.isfinite(x)

    def judge(self, tensors: Tensors, data: RuleInput) -> RuleResult:
        names = self.select(
            tensors, split_names(self.p_str("collection_names")), self.p_str("tensor_regex")
        )
        bad: dict[str, list[int]] = {}
        points = 0
        for phase in ("train", "eval"):
            rows = tensors.scalars(names, phase)
            rows = rows[rows["key"].isin(self._KEYS)]
            points += len(rows)
            for name, step in zip(
                rows["name"][self._bad(rows["value"].to_numpy())],
                rows["step"][self._bad(rows["value"].to_numpy())],
                strict=True,
            ):
                bad.setdefault(name, []).append(int(step))
            for name, step, x in self.raws(tensors, names, phase):
                points += 1
                if x.dtype.kind == "f" and self._bad(x).any():
                    bad.setdefault(name, []).append(step)
        what = "NaN" if self.p_bool("only_nan") else "NaN or infinite values"
        findings = [
            self.finding(
                f"{name} has {what} from step {min(steps)} on.",
                1.0,
                step_span(steps),
                float(min(steps)),
            )
            for name, steps in sorted(bad.items(), key=lambda kv: min(kv[1]))
        ]
        return self.verdict(data, findings, points, sum(map(len, bad.values())))


class WeightUpdateRatio(TensorRule):
    """Per weight, the ratio of the update between two saved steps (per step) to the
    weight's size: above ``large_threshold`` or below ``small_threshold`` fires."""

    name = "WeightUpdateRatio"
    description = "Checks that weight updates are neither too large nor too small."
    recommendation = "Adjust the learning rate, or check the optimizer's configuration."
    collections = ("weights",)
    params = (
        Param("num_steps", 500, "largest gap between the two saved steps compared", int),
        Param("large_threshold", 10.0, "largest update/weight ratio"),
        Param("small_threshold", 1e-8, "smallest update/weight ratio"),
        Param("epsilon", 1e-9, "added to the weight norm"),
    )

    def judge(self, tensors: Tensors, data: RuleInput) -> RuleResult:
        findings: list[Finding] = []
        points = 0
        previous: dict[str, tuple[int, RawTensor]] = {}
        for name, step, w in self.raws(tensors, self.select(tensors, self.collections)):
            last = previous.get(name)
            previous[name] = (step, w)
            if last is None or step - last[0] > self.p_int("num_steps"):
                continue
            update = float(np.linalg.norm((w - last[1]).ravel())) / (step - last[0])
            if update == 0.0:  # a frozen weight is not updated on purpose
                continue
            points += 1
            ratio = update / (float(np.linalg.norm(last[1].ravel())) + self.p_float("epsilon"))
            if not self.p_float("small_threshold") <= ratio <= self.p_float("large_threshold"):
                findings.append(
                    self.finding(
                        f"{name}: update/weight ratio {ratio:.3g} at step {step}.",
                        0.6,
                        (last[0], step),
                        ratio,
                    )
                )
        return self.verdict(data, findings, points, what="weight updates")


class PoorWeightInitialization(TensorRule):
    """Over the first ``steps`` steps: ReLU input variances differing across layers by
    more than ``threshold`` (max/min), gradients whose p95 - p5 is below
    ``distribution_range``, or a median loss of steps [``patience``, 2 ``patience``)
    not lower than that of the steps before ``patience``."""

    name = "PoorWeightInitialization"
    description = "Detects a poor initialisation of the weights."
    recommendation = "Use a standard initialisation (Kaiming for ReLU, Xavier for tanh)."
    collections = ("relu_input", "gradients", "losses")
    params = (
        regex_param("activation_inputs_regex", ".*relu_input|.*ReLU_input"),
        Param("threshold", 10.0, "largest max/min variance ratio"),
        Param("distribution_range", 0.001, "smallest p95 - p5 of the gradients"),
        Param("patience", 5, "steps within which the loss must decrease", int),
        Param("steps", 10, "steps judged from the start", int, minimum=1),
    )

    def judge(self, tensors: Tensors, data: RuleInput) -> RuleResult:
        early = self.p_int("steps")
        relus = self.select(tensors, ("relu_input",), self.p_str("activation_inputs_regex"))
        var = self.stat(tensors, relus, "variance")
        var = var[var["step"] < early]
        findings, points = [], len(var)
        for step, group in var.groupby("step"):
            ratio = group["value"].max() / max(group["value"].min(), 1e-30)
            if len(group) > 1 and ratio > self.p_float("threshold"):
                findings.append(
                    self.finding(
                        f"ReLU input variances differ {ratio:.3g}x across layers at step {step}.",
                        0.6,
                        (int(step), int(step)),
                        float(ratio),
                    )
                )
        grads = [
            x.ravel()
            for n, s, x in self.raws(tensors, self.select(tensors, ("gradients",)))
            if s < early
        ]
        if grads:
            points += 1
            p5, p95 = np.percentile(np.concatenate(grads), [5, 95])
            if p95 - p5 < self.p_float("distribution_range"):
                findings.append(
                    self.finding(
                        f"Gradients p95 - p5 = {p95 - p5:.3g} in the first {early} steps.",
                        0.6,
                        (0, early - 1),
                        p95 - p5,
                    )
                )
        loss = self.losses(tensors, "train")
        patience = self.p_int("patience")
        # Medians of the losses saved before `patience` and in the `patience` steps after:
        # one noisy minibatch does not decide (single losses when saved less often).
        first = loss[loss["step"] < patience]["value"]
        later = loss[loss["step"].between(patience, 2 * patience - 1)]["value"]
        if len(first) and len(later):
            points += 1
            if later.median() >= first.median():
                findings.append(
                    self.finding(
                        f"The loss did not decrease within {patience} steps (median "
                        f"{later.median():.4g} after, {first.median():.4g} before).",
                        0.5,
                        (0, patience),
                        float(later.median()),
                    )
                )
        return self.verdict(data, findings, points, what="early-step values")
