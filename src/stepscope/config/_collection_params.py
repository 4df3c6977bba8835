"""The parameters of an output tensor collection: their names, their values, and
the save schedule they make (:class:`SaveConfig`).

A collection's parameters are accepted as the SageMaker SDK wrote them
(``parameters={"train.save_steps": "0"}``, every value a string) or as typed TOML
keys (``"train.save_interval" = 100``); :func:`normalize_parameters` checks them
and gives each its type. See docs/tensors.md.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from stepscope.config._base import as_bool, as_int, check_keys, given, invalid

BUILTIN_COLLECTIONS = (
    "all",
    "default",
    "losses",
    "weights",
    "biases",
    "gradients",
    "inputs",
    "outputs",
    "optimizer_variables",
)
BASE_REDUCTIONS = ("min", "max", "mean", "std", "variance", "sum", "prod", "l1", "l2")
REDUCTIONS = BASE_REDUCTIONS + tuple(f"abs_{r}" for r in BASE_REDUCTIONS)
PHASES = ("train", "eval")
SCHEDULE_KEYS = ("save_interval", "save_steps", "start_step", "end_step")
# SDK spellings of reduction lists: "norms" and "abs_norms" take l1/l2 only.
REDUCTION_KEYS = ("reductions", "abs_reductions", "norms", "abs_norms")
COLLECTION_KEYS = (
    "include_regex",
    "save_raw_tensor",
    "save_histogram",
    *REDUCTION_KEYS,
    *SCHEDULE_KEYS,
    *(f"{p}.{k}" for p in PHASES for k in SCHEDULE_KEYS),
)
HOOK_KEYS = ("save_all", *[k for k in COLLECTION_KEYS if k != "include_regex"])
DEFAULT_SAVE_INTERVAL = 500


@dataclass(frozen=True)
class SaveConfig:
    """When one phase of a collection saves: ``save_steps`` if given, else every
    ``save_interval`` steps from ``start_step`` up to (not including) ``end_step``."""

    save_interval: int = DEFAULT_SAVE_INTERVAL
    save_steps: tuple[int, ...] = ()
    start_step: int = 0
    end_step: int | None = None

    def saves(self, step: int) -> bool:
        """Whether ``step`` (numbered from 0 within its phase) is saved."""
        if step < self.start_step or (self.end_step is not None and step >= self.end_step):
            return False
        if self.save_steps:
            return step in self.save_steps
        return (step - self.start_step) % self.save_interval == 0

    def next_save(self, step: int) -> int | None:
        """The first saved step at or after ``step``; ``None`` if none is left."""
        step = max(step, self.start_step)
        if self.save_steps:
            nxt = next((s for s in self.save_steps if s >= step), None)
        else:
            behind = step - self.start_step  # round up to the next multiple of the interval
            nxt = self.start_step + -(-behind // self.save_interval) * self.save_interval
        if nxt is None or (self.end_step is not None and nxt >= self.end_step):
            return None
        return nxt


def _steps(value: object, name: str) -> tuple[int, ...]:
    """``"0,5, 9"``, ``[0, 5]`` or ``7`` as a sorted tuple of step numbers."""
    items = value.split(",") if isinstance(value, str) else value
    if not isinstance(items, list | tuple):
        items = [items]
    return tuple(sorted({as_int(v, name, 0) for v in items if str(v).strip() != ""}))


def _reductions(key: str, value: object) -> tuple[str, ...]:
    if not isinstance(value, str | Iterable):
        raise invalid(value, key, "a list of names, or one comma-separated string")
    items = value.split(",") if isinstance(value, str) else list(value)
    names = [str(v).strip().lower() for v in items if str(v).strip()]
    prefix = "abs_" if key.startswith("abs_") else ""
    allowed = ("l1", "l2") if key.endswith("norms") else REDUCTIONS
    out = []
    for name in names:
        full = name if name.startswith("abs_") or not prefix else prefix + name
        if full.removeprefix(prefix) not in allowed and full not in allowed:
            raise invalid(value, key, ", ".join(allowed))
        out.append(full)
    return tuple(out)


def _check_regex(value: object) -> str:
    if not isinstance(value, str) or not value:
        raise invalid(value, "include_regex", "a non-empty Python regular expression")
    try:
        re.compile(value)
    except re.error as exc:
        accepted = f"a valid Python regular expression ({exc})"
        raise invalid(value, "include_regex", accepted) from None
    return value


def normalize_parameters(
    data: Mapping[str, object], valid: tuple[str, ...], section: str
) -> dict[str, object]:
    """Typed values for the parameters of a collection (or of the hook)."""
    out: dict[str, object] = {}
    for key, value in given(check_keys(data, valid, section)).items():
        base = key.split(".", 1)[-1]
        if base == "include_regex":
            out[key] = _check_regex(value)
        elif base in ("save_raw_tensor", "save_histogram", "save_all"):
            out[key] = as_bool(value, key)
        elif base in REDUCTION_KEYS:
            out[key] = list(_reductions(key, value))
        elif base == "save_steps":
            out[key] = list(_steps(value, key))
        elif base == "end_step":
            out[key] = as_int(value, key, 1)
        else:
            out[key] = as_int(value, key, 1 if base == "save_interval" else 0)
    return out
