"""Rules over the loss: Overfit, Overtraining (LossNotDecreasing: ``_loss_decrease``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from stepscope.analysis.downsample import FloatArray
from stepscope.rules._input import RuleInput
from stepscope.rules._params import Param
from stepscope.rules._types import RuleResult
from stepscope.rules.debugging._base import TensorRule, step_span

if TYPE_CHECKING:
    from stepscope.read import Tensors


def eval_points(tensors: Tensors) -> pd.DataFrame:
    """Per evaluation: the training step it followed (by save time), the mean
    evaluation loss, and the mean training loss saved since the previous evaluation."""
    train, evals = TensorRule.losses(tensors, "train"), TensorRule.losses(tensors, "eval")
    if not len(train) or not len(evals):
        return pd.DataFrame({"step": [], "train": [], "eval": []})
    order = np.searchsorted(train["time"].to_numpy(), evals["time"].to_numpy(), side="right")
    evals = evals.assign(after=np.maximum(order - 1, 0))
    rows, prev = [], 0
    for after, group in evals.groupby("after", sort=True):
        upto = int(after) + 1
        window = train["value"].iloc[prev:upto] if upto > prev else train["value"].iloc[:upto]
        rows.append(
            (
                int(train["step"].iloc[int(after)]),
                float(window.mean()),
                float(group["value"].mean()),
            )
        )
        prev = upto
    return pd.DataFrame(rows, columns=["step", "train", "eval"])


class Overfit(TensorRule):
    """(mean evaluation loss - mean training loss) / mean training loss above
    ``ratio_threshold`` at ``patience`` evaluations in a row, from ``start_step`` on."""

    name = "Overfit"
    description = "Compares evaluation and training loss to detect overfitting."
    recommendation = (
        "Use more data or augmentation, regularise (dropout, weight decay), "
        "use a smaller model, or stop earlier."
    )
    collections = ("losses",)
    params = (
        Param("start_step", 0, "first training step judged", int),
        Param(
            "patience", 1, "evaluations in a row above the ratio before it fires", int, minimum=1
        ),
        Param("ratio_threshold", 0.1, "maximum (eval - train) / train"),
    )

    def judge(self, tensors: Tensors, data: RuleInput) -> RuleResult:
        points = eval_points(tensors)
        points = points[points["step"] >= self.p_int("start_step")]
        ratio = (points["eval"] - points["train"]) / points["train"].abs()
        findings, run = [], 0
        for step, r in zip(points["step"], ratio, strict=True):
            run = run + 1 if r > self.p_float("ratio_threshold") else 0
            if run == self.p_int("patience"):
                findings.append(
                    self.finding(
                        f"Evaluation loss {r * 100:.0f}% above training loss at step {step}.",
                        min(1.0, 0.3 + r / 2),
                        (int(step), int(step)),
                        float(r),
                        self.p_float("ratio_threshold"),
                    )
                )
        return self.verdict(data, findings, len(points), what="evaluations with both losses")


def rolling_median(values: FloatArray, window: int) -> FloatArray:
    """The median of each value and the ``window - 1`` saved before it: one noisy
    minibatch neither sets a new best nor hides a real improvement."""
    return np.asarray(pd.Series(values).rolling(window, min_periods=1).median(), np.float64)


def stale_for(values: FloatArray, delta: float) -> int:
    """Saved points since the last improvement of the best value by more than ``delta``."""
    best, since = np.inf, 0
    for v in values:
        if v < best - delta:
            best, since = v, 0
        else:
            since += 1
    return since


class Overtraining(TensorRule):
    """Training loss not improved by ``delta`` within ``patience_train`` saved steps and
    evaluation loss not within ``patience_validation`` saved steps; the losses compared
    are medians of the last ``window`` saved losses (ours)."""

    name = "Overtraining"
    description = "Detects training that goes on without improving any more."
    recommendation = "Stop the training (early stopping), or change the learning rate schedule."
    collections = ("losses",)
    params = (
        Param("patience_train", 5, "saved training steps without improvement", int),
        Param("patience_validation", 10, "saved evaluation steps without improvement", int),
        Param("delta", 0.01, "minimum improvement of the best loss"),
        Param(
            "window", 5, "saved losses per rolling median (ours; 1: single losses)", int, minimum=1
        ),
    )

    def judge(self, tensors: Tensors, data: RuleInput) -> RuleResult:
        train = self.losses(tensors, "train")["value"].to_numpy()
        evals = self.losses(tensors, "eval")["value"].to_numpy()
        if not len(train) or not len(evals):
            return self.not_applicable(data, "needs training and evaluation losses")
        w, delta = self.p_int("window"), self.p_float("delta")
        t = stale_for(rolling_median(train, w), delta)
        v = stale_for(rolling_median(evals, w), delta)
        findings = []
        if t >= self.p_int("patience_train") and v >= self.p_int("patience_validation"):
            steps = self.losses(tensors, "train")["step"]
            findings.append(
                self.finding(
                    f"No improvement by {self.p_float('delta')} in the last {t} training and {v} "
                    "evaluation losses.",
                    0.6,
                    step_span(steps.iloc[-t:]),
                    float(t),
                    float(self.p_int("patience_train")),
                )
            )
        return self.verdict(data, findings, len(train) + len(evals), what="losses")
