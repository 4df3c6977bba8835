"""Declared rule parameters: name, type, default and doc, validated on construction."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import SupportsFloat, SupportsIndex, TypeAlias

from stepscope.errors import RuleConfigError

#: A parameter's value once validated: a number, a string or a flag (None: no default).
ParamValue: TypeAlias = float | int | str | bool | None


@dataclass(frozen=True)
class Param:
    """One parameter of a rule.

    ``kind`` is ``float``, ``int``, ``str`` or ``bool``. Numbers also accept
    numeric strings (``"90"``), as the seeds pass every parameter as a string.
    ``choices`` restricts a ``str`` parameter; ``minimum`` bounds a number.
    """

    name: str
    default: ParamValue
    doc: str
    kind: type[float | int | str | bool] = float
    choices: tuple[str, ...] | None = None
    minimum: float | None = 0.0

    def convert(self, value: object, rule: str) -> ParamValue:
        """``value`` as this parameter's type, or a RuleConfigError saying what is valid."""
        try:
            out = _convert(self.kind, value)
        except (TypeError, ValueError):
            raise self._invalid(value, rule, f"a {self.kind.__name__}") from None
        if self.choices is not None and out not in self.choices:
            raise self._invalid(value, rule, "one of " + ", ".join(self.choices))
        low = self.minimum if self.kind in (int, float) else None  # numbers only: not bools
        if low is not None and isinstance(out, int | float) and out < low:
            raise self._invalid(value, rule, f"a number >= {low:g}")
        return out

    def _invalid(self, value: object, rule: str, valid: str) -> RuleConfigError:
        return RuleConfigError(
            f"Invalid value {value!r} for parameter {self.name!r} of rule {rule}: "
            f"expected {valid} ({self.doc}; default {self.default!r})."
        )


def _convert(kind: type[float | int | str | bool], value: object) -> float | int | str | bool:
    if kind is bool:
        if isinstance(value, bool):
            return value
        text = str(value).strip().lower()
        if text in ("true", "1", "yes", "on"):
            return True
        if text in ("false", "0", "no", "off"):
            return False
        raise ValueError(value)
    if kind is str:
        if not isinstance(value, str):
            raise TypeError(value)
        return value.strip().lower()
    if isinstance(value, bool):
        raise TypeError(value)
    if not isinstance(value, str | SupportsFloat | SupportsIndex):
        raise TypeError(value)
    number = float(value.strip()) if isinstance(value, str) else float(value)
    if not math.isfinite(number):
        raise ValueError(value)
    if kind is int:
        if number != int(number):
            raise ValueError(value)
        return int(number)
    return number


def did_you_mean(given: str, valid: Iterable[str]) -> str:
    """`` Did you mean 'x'?`` for the valid name ``given`` was probably meant to be, or ""."""
    from stepscope.config import suggest  # here: the runner's rules need no config

    close = suggest(given, valid)
    return f" Did you mean {close!r}?" if close else ""


def resolve_params(
    rule: str, declared: Iterable[Param], given: Mapping[str, object]
) -> dict[str, ParamValue]:
    """Defaults overridden by ``given``; an unknown name is an error listing the valid ones."""
    by_name = {p.name: p for p in declared}
    unknown = sorted(set(given) - set(by_name))
    if unknown:
        valid = ", ".join(sorted(by_name)) or "none"
        raise RuleConfigError(
            f"Unknown parameter {unknown[0]!r} for rule {rule}.{did_you_mean(unknown[0], by_name)}"
            f" Valid parameters: {valid}."
        )
    values = {name: p.default for name, p in by_name.items()}
    for name, value in given.items():
        values[name] = by_name[name].convert(value, rule)
    return values


SCAN_INTERVAL = Param(
    "scan_interval_us",
    2_000_000,  # the seed's 60 s: live verdicts within seconds (docs/rules.md)
    "how often the live runner evaluates the rule, in microseconds",
    int,
    minimum=1,
)


def patience(default: int) -> Param:
    """The seeds' ``patience``: data points skipped at the start of the job."""
    return Param("patience", default, "data points (samples) skipped at the start", int)


def window(default: int, what: str = "samples") -> Param:
    """The seeds' ``window``: the size of the windows the rule judges one by one."""
    return Param("window", default, f"size of each judged window, in {what}", int, minimum=1)


#: stepscope's own parameter (not in the seeds): the share of the job's step time that
#: a rule's evidence must cost to fire below the rule's count threshold or floor.
MIN_COST_SHARE = "min_cost_share"


def min_cost_share(default: float = 5.0) -> Param:
    """stepscope's ``min_cost_share``: evidence costing at least this share of the job's
    step time fires the rule even below its count threshold or absolute floor."""
    return Param(
        MIN_COST_SHARE,
        default,
        "share of the job's step time that the evidence must cost to fire the rule below "
        "its count threshold or floor, % (stepscope's)",
    )


#: stepscope's own parameter: a rule whose findings cost less than this in all stays
#: silent (docs/rules.md, "Too little to act on: ``min_cost_s``").
MIN_COST_S = "min_cost_s"


def min_cost_s(default: float = 1.0) -> Param:
    """stepscope's ``min_cost_s``: findings costing less than this many seconds of job
    time in all do not fire the rule (a real pattern, too small to act on)."""
    return Param(
        MIN_COST_S,
        default,
        "seconds of job time the findings must cost in all to fire the rule; 0: any "
        "cost (stepscope's)",
    )
