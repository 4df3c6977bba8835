"""Rules over the loss: LossNotDecreasing, Overfit, Overtraining."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from stepscope.analysis.downsample import FloatArray
from stepscope.rules._input import RuleInput
from stepscope.rules._params import Param
from stepscope.rules._types import Finding, RuleResult
from stepscope.rules.debugging._base import TensorRule, step_span

if TYPE_CHECKING:
    from stepscope.read import Tensors


class LossNotDecreasing(TensorRule):
    """Every ``num_steps``, the loss must have fallen by ``diff_percent`` against the
    newest saved step at least ``num_steps`` back; a rise above
    ``increase_threshold_percent`` is reported as rising. Evaluation loss is preferred
    when both phases have one (``mode`` chooses)."""

    name = "LossNotDecreasing"
    description = "Checks that the loss keeps decreasing."
    recommendation = (
        "Check the learning rate (too small: stalls; too large: rises), the "
        "data and the labels; stop the job if it no longer learns."
    )
    collections = ("losses",)
    params = (
        Param("num_steps", 10, "steps between two checks", int, minimum=1),
        Param("diff_percent", 0.1, "minimum decrease, % of the earlier loss"),
        Param("increase_threshold_percent", 5.0, "increase, %, reported as rising"),
        Param(
            "mode",
            "",
            "phase to check: train, eval, or empty (eval, else train)",
            str,
            choices=("", "train", "eval"),
            minimum=None,
        ),
    )

    def judge(self, tensors: Tensors, data: RuleInput) -> RuleResult:
        mode = self.p_str("mode")
        findings, checks = self._scan(self.losses(tensors, mode or "eval"))
        if not mode and not checks:  # evaluation loss preferred, when it can be judged
            findings, checks = self._scan(self.losses(tensors, "train"))
        return self.verdict(data, findings, checks, what="loss checks")

    def _scan(self, loss: pd.DataFrame) -> tuple[list[Finding], int]:
        steps, values = loss["step"].to_numpy(), loss["value"].to_numpy()
        findings, checks, last = [], 0, None
        for i, step in enumerate(steps):
            if last is not None and step - last < self.p_int("num_steps"):
                continue
            back = np.nonzero(steps[:i] <= step - self.p_int("num_steps"))[0]
            if not len(back):
                continue
            j = back[-1]
            checks, last = checks + 1, step
            found = self._check(int(steps[j]), float(values[j]), int(step), float(values[i]))
            if found is not None:
                findings.append(found)
        return findings, checks

    def _check(self, s0: int, v0: float, s1: int, v1: float) -> Finding | None:
        change = (v0 - v1) / abs(v0) * 100 if v0 else 0.0
        if not np.isfinite(change):
            return self.finding(f"The loss is not finite at step {s1} ({v1}).", 1.0, (s0, s1), v1)
        if change >= self.p_float("diff_percent"):
            return None
        rising = -change > self.p_float("increase_threshold_percent")
        what = f"rose by {-change:.2f}%" if change < 0 else f"fell by only {change:.3f}%"
        severity = 0.9 if rising else 0.6
        return self.finding(
            f"The loss {what} from step {s0} ({v0:.4g}) to step {s1} "
            f"({v1:.4g}); at least {self.p_float('diff_percent')}% expected.",
            severity,
            (s0, s1),
            change,
            self.p_float("diff_percent"),
        )


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
    evaluation loss not within ``patience_validation`` saved steps."""

    name = "Overtraining"
    description = "Detects training that goes on without improving any more."
    recommendation = "Stop the training (early stopping), or change the learning rate schedule."
    collections = ("losses",)
    params = (
        Param("patience_train", 5, "saved training steps without improvement", int),
        Param("patience_validation", 10, "saved evaluation steps without improvement", int),
        Param("delta", 0.01, "minimum improvement of the best loss"),
    )

    def judge(self, tensors: Tensors, data: RuleInput) -> RuleResult:
        train = self.losses(tensors, "train")["value"].to_numpy()
        evals = self.losses(tensors, "eval")["value"].to_numpy()
        if not len(train) or not len(evals):
            return self.not_applicable(data, "needs training and evaluation losses")
        t, v = stale_for(train, self.p_float("delta")), stale_for(evals, self.p_float("delta"))
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
