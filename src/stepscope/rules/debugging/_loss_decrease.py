"""LossNotDecreasing, on smoothed losses.

The predecessor compared two single saved losses ``num_steps`` apart: minibatch
noise of a few percent then reads as "the loss rose by 5%" on a healthy run. Ours
compares the **median of the last ``window`` saved losses** with the median of the
``window`` saved losses before them, ending at least ``num_steps`` steps earlier;
the blocks never overlap, so one noisy minibatch moves neither. Checks run every
``num_steps`` steps as before; consecutive failing checks make one finding.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from stepscope.rules._input import RuleInput
from stepscope.rules._params import Param
from stepscope.rules._types import Finding, RuleResult
from stepscope.rules.debugging._base import (
    VALUE,
    TensorRule,
    collection_param,
    regex_param,
    split_names,
)

if TYPE_CHECKING:
    from stepscope.read import Tensors

Check = tuple[int, int, float, float]  # first step of the earlier block, step, before, now


class LossNotDecreasing(TensorRule):
    """Every ``num_steps`` steps, the median of the last ``window`` saved losses must
    be ``diff_percent`` % below the median of the ``window`` saved losses before them
    (ending at least ``num_steps`` steps earlier); a rise above
    ``increase_threshold_percent`` is reported as rising. Evaluation loss is preferred
    when both phases have one (``mode`` chooses)."""

    name = "LossNotDecreasing"
    description = "Checks that the loss keeps decreasing (medians of saved losses)."
    recommendation = (
        "Check the learning rate (too small: stalls; too large: rises), the "
        "data and the labels; stop the job if it no longer learns."
    )
    collections = ("losses",)
    params = (
        Param("num_steps", 10, "steps between two checks, and between the compared blocks", int),
        Param("diff_percent", 0.1, "minimum decrease, % of the earlier median"),
        Param("increase_threshold_percent", 5.0, "increase, %, reported as rising"),
        Param(
            "mode",
            "",
            "phase to check: train, eval, or empty (eval, else train)",
            str,
            choices=("", "train", "eval"),
            minimum=None,
        ),
        Param("use_losses_collection", True, "check the loss of the losses collection", bool),
        collection_param(""),
        regex_param("tensor_regex", ""),
        Param("window", 10, "saved losses per median (ours)", int, minimum=1),
    )

    def judge(self, tensors: Tensors, data: RuleInput) -> RuleResult:
        mode = self.p_str("mode")
        findings, checks, saved = self._all(tensors, mode or "eval")
        if not mode and not checks:  # evaluation loss preferred, when it can be judged
            findings, checks, more = self._all(tensors, "train")
            saved = max(saved, more)
        if not checks and saved:
            need = 2 * self.p_int("window")
            return self.not_applicable(
                data,
                f"waiting for {need} saved losses (two medians of {need // 2}); {saved} so far",
            )
        return self.verdict(data, findings, checks, what="loss checks")

    def _all(self, tensors: Tensors, phase: str) -> tuple[list[Finding], int, int]:
        """Findings, checks made and the most losses saved of one series, in ``phase``."""
        findings, checks, saved = [], 0, 0
        for name, loss in self._series(tensors, phase):
            found, n = self._scan(name, loss)
            findings += found
            checks, saved = checks + n, max(saved, len(loss))
        return findings, checks, saved

    def _series(self, tensors: Tensors, phase: str) -> list[tuple[str, pd.DataFrame]]:
        """The losses judged: the loss of the losses collection (``use_losses_collection``)
        and every tensor of ``collection_names`` or matching ``tensor_regex``."""
        out = []
        if self.p_bool("use_losses_collection"):
            out.append(("the loss", self.losses(tensors, phase)))
        extra = split_names(self.p_str("collection_names"))
        if extra or self.p_str("tensor_regex"):
            rows = tensors.scalars(self.select(tensors, extra, self.p_str("tensor_regex")), phase)
            rows = rows[rows["key"] == VALUE]
            for name, group in rows.groupby("name", sort=True):
                out.append((str(name), group[["step", "value"]].sort_values("step")))
        return out

    def checks(self, loss: pd.DataFrame) -> list[Check]:
        """Every ``num_steps`` steps: (first step of the earlier block, step, earlier
        median, current median) where both blocks of ``window`` saved losses exist."""
        steps, values = loss["step"].to_numpy(), loss["value"].to_numpy(np.float64)
        w, gap = self.p_int("window"), self.p_int("num_steps")
        out: list[Check] = []
        last = None
        for i in range(w - 1, len(steps)):
            if last is not None and steps[i] - last < gap:
                continue
            # The earlier block ends before the current one, at least num_steps back.
            end = int(np.searchsorted(steps, steps[i] - gap, side="right")) - 1
            end = min(end, i - w)
            if end < w - 1:
                continue
            last = steps[i]
            before = float(np.median(values[end - w + 1 : end + 1]))
            now = float(np.median(values[i - w + 1 : i + 1]))
            out.append((int(steps[end - w + 1]), int(steps[i]), before, now))
        return out

    def _scan(self, name: str, loss: pd.DataFrame) -> tuple[list[Finding], int]:
        found = self.checks(loss)
        runs: list[list[Check]] = []
        previous = False
        for c in found:  # consecutive failing checks: one finding
            failed = self._failed(c)
            if failed and previous:
                runs[-1].append(c)
            elif failed:
                runs.append([c])
            previous = failed
        return [self._finding(name, run) for run in runs], len(found)

    def _change(self, check: Check) -> float:
        _, _, before, now = check
        return (before - now) / abs(before) * 100 if before else 0.0

    def _failed(self, check: Check) -> bool:
        change = self._change(check)
        return not np.isfinite(change) or change < self.p_float("diff_percent")

    def _finding(self, name: str, run: list[Check]) -> Finding:
        worst = min(run, key=lambda c: self._change(c) if np.isfinite(self._change(c)) else -np.inf)
        s0, s1, before, now = worst
        change, w = self._change(worst), self.p_int("window")
        span = (run[0][0], run[-1][1])
        if not np.isfinite(change):
            message = f"The median of {name} is not finite at step {s1} ({now})."
            return self.finding(message, 1.0, span, now)
        rising = -change > self.p_float("increase_threshold_percent")
        what = f"rose by {-change:.2f}%" if change < 0 else f"fell by only {change:.3f}%"
        checks = f" ({len(run)} checks in a row, steps {span[0]}-{span[1]})" if len(run) > 1 else ""
        return self.finding(
            f"The median of {name} over {w} saved steps {what} (median {before:.4g} from step "
            f"{s0}, then {now:.4g} up to step {s1}); at least {self.p_float('diff_percent'):g}% "
            f"expected{checks}.",
            0.9 if rising else 0.6,
            span,
            change,
            self.p_float("diff_percent"),
        )
