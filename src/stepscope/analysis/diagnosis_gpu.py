"""What the diagnosis says of a GPU job too short for the GPU rules' patience.

LowGPUUtilization (patience 1,000 samples, the seed's) and GPUIdleBetweenSteps
(100) judge nothing in a job of under about 100 s (10 s) at 100 ms sampling: they
are ``NotApplicable``, "not enough data yet". Their verdicts then carry what the
training loop's samples show (``details.loop_gpus``: per GPU, the samples, the
5th/50th/95th percentiles of utilization and the busy share of the loop, the mean
of the samples' busy shares), and :func:`gpu_notes` says it in one line, judged
with LowGPUUtilization's thresholds: a GPU **starved** (p95 below
``threshold_p95``), **idle in bursts** (p5 below ``threshold_p5``), or **busy**.
It is a note, not a problem: no rule fired and nothing is costed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from stepscope.analysis._plain import finite
from stepscope.jobfolder import RuleVerdict

RULES = ("LowGPUUtilization", "GPUIdleBetweenSteps")
SEED = {"threshold_p95": 70.0, "threshold_p5": 10.0}  # LowGPUUtilization's defaults


def _number(x: object) -> float | None:
    """A finite number from a verdict's JSON, else None."""
    return finite(x) if isinstance(x, int | float) and not isinstance(x, bool) else None


def _param(v: RuleVerdict | None, name: str) -> float:
    params = v.get("parameters") if v is not None else None
    value = _number(params.get(name)) if isinstance(params, Mapping) else None
    return value if value is not None else SEED.get(name, 0.0)


def _gpus(v: RuleVerdict) -> list[Mapping[str, object]]:
    details = v.get("details")
    loop = details.get("loop_gpus") if isinstance(details, Mapping) else None
    if not isinstance(loop, list):
        return []
    keys = ("busy", "p5", "p50", "p95")
    return [
        g
        for g in loop
        if isinstance(g, Mapping) and all(_number(g.get(k)) is not None for k in keys)
    ]


def _num(g: Mapping[str, object], key: str) -> float:
    return _number(g.get(key)) or 0.0


def _what(g: Mapping[str, object], p95_limit: float, p5_limit: float) -> str:
    """What one GPU's loop samples show, with the numbers that say it."""
    where = f"{g.get('device')} on {g.get('node')}" if g.get("node") else str(g.get("device"))
    busy, p5, p50, p95 = (_num(g, k) for k in ("busy", "p5", "p50", "p95"))
    if p95 < p95_limit:
        return (
            f"GPU starved: {where} idle {100 - busy:.0f}% of the training loop (median "
            f"utilization {p50:.0f}%, p95 {p95:.0f}% < {p95_limit:g}%)"
        )
    if p5 < p5_limit:
        return (
            f"GPU idle in bursts: {where} idle {100 - busy:.0f}% of the training loop (p5 "
            f"utilization {p5:.0f}% < {p5_limit:g}%, median {p50:.0f}%)"
        )
    return (
        f"GPU busy: {where} busy {busy:.0f}% of the training loop (p5 utilization "
        f"{p5:.0f}%, median {p50:.0f}%), not starved"
    )


def gpu_notes(verdicts: Iterable[RuleVerdict]) -> tuple[str, ...]:
    """One line on the least busy GPU of a job too short for the GPU rules' patience
    (none when they judged the job, or it has no GPU samples in a training loop)."""
    by_rule = {str(v.get("rule")): v for v in verdicts if str(v.get("rule")) in RULES}
    short = [
        r
        for r in RULES
        if r in by_rule
        and (by_rule[r].get("verdict") or by_rule[r].get("status")) == "NotApplicable"
        and _gpus(by_rule[r])
    ]
    if not short:
        return ()
    gpus = _gpus(by_rule[short[0]])
    worst = min(gpus, key=lambda g: _num(g, "busy"))
    low = by_rule.get("LowGPUUtilization")
    text = _what(worst, _param(low, "threshold_p95"), _param(low, "threshold_p5"))
    if len(gpus) > 1:
        text += f", the least busy of {len(gpus)} GPUs"
    patience = " and ".join(f"{_param(by_rule[r], 'patience'):,.0f}" for r in short)
    names = " and ".join(r + ("'" if r.endswith("s") else "'s") for r in short)
    loop = _num(worst, "loop_seconds")
    text += (
        f"; {_num(worst, 'samples'):.0f} samples in {loop:.0f} s of training loop: too short "
        f"for {names} patience ({patience} samples)"
    )
    return (text,)
