"""Rules over module inputs and outputs: DeadRelu, SaturatedActivation, ClassImbalance."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from stepscope.rules._input import RuleInput
from stepscope.rules._params import Param
from stepscope.rules._types import Finding, RuleResult
from stepscope.rules.debugging._base import TensorRule, regex_param, step_span

if TYPE_CHECKING:
    from stepscope.read import RawTensor, Tensors


def per_unit(x: RawTensor) -> RawTensor:
    """Samples as rows, units as columns (the first axis is the batch)."""
    return x.reshape(x.shape[0], -1) if x.ndim > 1 else x.reshape(-1, 1)


class _UnitRule(TensorRule):
    """A layer fires when more than ``threshold_layer`` % of its units are flagged in
    more than (100 - ``threshold_inactivity``) % of the samples."""

    def flagged(self, units: RawTensor, name: str) -> npt.NDArray[np.bool_]:
        raise NotImplementedError

    def layers(self, tensors: Tensors) -> list[str]:
        raise NotImplementedError

    def judge(self, tensors: Tensors, data: RuleInput) -> RuleResult:
        hits: dict[str, list[tuple[int, float]]] = {}
        points = 0
        for phase in ("train", "eval"):
            for name, step, x in self.raws(tensors, self.layers(tensors), phase):
                points += 1
                share = self.flagged(per_unit(x), name).mean(axis=0) * 100
                bad = float((share > 100 - self.p_float("threshold_inactivity")).mean() * 100)
                if bad > self.p_float("threshold_layer"):
                    hits.setdefault(name, []).append((step, bad))
        findings = [self._finding(name, found) for name, found in sorted(hits.items())]
        return self.verdict(data, findings, points, sum(map(len, hits.values())), "layer outputs")

    def _finding(self, name: str, found: list[tuple[int, float]]) -> Finding:
        worst = max(v for _, v in found)
        return self.finding(
            f"{name}: {worst:.0f}% of the units {self.what} ({len(found)} saved step(s)).",
            0.3 + 0.7 * worst / 100,
            step_span(s for s, _ in found),
            worst,
            self.p_float("threshold_layer"),
        )

    what = ""


class DeadRelu(_UnitRule):
    """A unit is dead when active (> 0) in less than ``threshold_inactivity`` % of the
    samples; fires when more than ``threshold_layer`` % of a ReLU layer's units are dead."""

    name = "DeadRelu"
    description = "Detects ReLU layers whose units no longer activate."
    recommendation = (
        "Lower the learning rate, use LeakyReLU, or check the initialisation "
        "of the weights and biases before the ReLU."
    )
    collections = ("relu_output",)
    what = "are dead"
    params = (
        regex_param("tensor_regex", ".*relu_output"),
        Param("threshold_inactivity", 1.0, "% of samples below which a unit is dead"),
        Param("threshold_layer", 50.0, "% of dead units for the layer to fire"),
    )

    def layers(self, tensors: Tensors) -> list[str]:
        return self.select(tensors, self.collections, self.p_str("tensor_regex"))

    def flagged(self, units: RawTensor, name: str) -> npt.NDArray[np.bool_]:
        return units <= 0  # inactive samples; a unit is dead when nearly always inactive


class SaturatedActivation(_UnitRule):
    """tanh inputs outside (``threshold_tanh_min``, ``threshold_tanh_max``) and sigmoid
    inputs outside (``threshold_sigmoid_min``, ``threshold_sigmoid_max``) are saturated."""

    name = "SaturatedActivation"
    description = "Detects tanh and sigmoid layers that are saturated."
    recommendation = "Normalise the inputs of the layer, or lower the learning rate."
    collections = ("tanh_input", "sigmoid_input")
    what = "are saturated"
    params = (
        Param("threshold_tanh_min", -9.4999, "", minimum=None),
        Param("threshold_tanh_max", 9.4999, "", minimum=None),
        Param("threshold_sigmoid_min", -23.0, "", minimum=None),
        Param("threshold_sigmoid_max", 16.99999, "", minimum=None),
        Param("threshold_inactivity", 1.0, "% of samples not saturated tolerated"),
        Param("threshold_layer", 50.0, "% of saturated units for the layer to fire"),
    )

    def layers(self, tensors: Tensors) -> list[str]:
        return self.select(tensors, self.collections)

    def flagged(self, units: RawTensor, name: str) -> npt.NDArray[np.bool_]:
        kind = "tanh" if name in self._tanh else "sigmoid"
        low, high = self.p_float(f"threshold_{kind}_min"), self.p_float(f"threshold_{kind}_max")
        return (units <= low) | (units >= high)

    def judge(self, tensors: Tensors, data: RuleInput) -> RuleResult:
        self._tanh = set(tensors.collections().get("tanh_input", []))
        return super().judge(tensors, data)


class ClassImbalance(TensorRule):
    """After ``samples`` labels: the most frequent class more than ``threshold_imbalance``
    times the least, or a class mispredicted more than ``threshold_misprediction`` of
    the time. Predictions with a class axis (logits) are reduced by argmax."""

    name = "ClassImbalance"
    description = "Detects unbalanced classes in the labels and poorly predicted classes."
    recommendation = "Resample or weight the classes, or collect more data of the rare ones."
    collections = ("labels", "predictions")
    params = (
        Param("threshold_imbalance", 10.0, "largest ratio of class counts"),
        Param("threshold_misprediction", 0.7, "largest share of mispredictions"),
        Param("samples", 500, "labels needed before judging", int),
        Param("argmax", False, "take the argmax of the predictions", bool),
        regex_param("labels_regex", ".*loss_input_1"),
        regex_param("predictions_regex", ".*loss_input_0"),
    )

    def _pairs(self, tensors: Tensors) -> tuple[RawTensor, RawTensor]:
        labels = dict(
            ((s, p), x)
            for p in ("train", "eval")
            for n, s, x in self.raws(
                tensors, self.select(tensors, ("labels",), self.p_str("labels_regex")), p
            )
        )
        preds = dict(
            ((s, p), x)
            for p in ("train", "eval")
            for n, s, x in self.raws(
                tensors, self.select(tensors, ("predictions",), self.p_str("predictions_regex")), p
            )
        )
        keys = sorted(set(labels) & set(preds))
        if not keys:
            return np.array([]), np.array([])
        ys = np.concatenate([labels[k].ravel() for k in keys])
        ps = [preds[k] for k in keys]
        ps = [p.argmax(axis=-1) if self.p_bool("argmax") or p.ndim > 1 else p for p in ps]
        return ys, np.concatenate([p.ravel() for p in ps])

    def judge(self, tensors: Tensors, data: RuleInput) -> RuleResult:
        ys, ps = self._pairs(tensors)
        if len(ys) < self.p_int("samples"):
            return self.not_applicable(
                data, f"{len(ys)} labels saved; needs {self.p_int('samples')}"
            )
        classes, counts = np.unique(ys, return_counts=True)
        findings = []
        ratio = counts.max() / counts.min()
        if ratio > self.p_float("threshold_imbalance"):
            findings.append(
                self.finding(f"Class counts differ {ratio:.1f}x.", 0.6, value=float(ratio))
            )
        for c in classes:
            wrong = float((ps[ys == c] != c).mean()) if len(ps) == len(ys) else 0.0
            if wrong > self.p_float("threshold_misprediction"):
                findings.append(
                    self.finding(
                        f"Class {c} mispredicted {wrong:.0%} of the time.", 0.5, value=wrong
                    )
                )
        return self.verdict(data, findings, len(ys), what="labels")
