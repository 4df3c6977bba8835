"""DebuggerHookConfig and CollectionConfig: which output tensors are saved, and when.

Named as in the SageMaker SDK. A collection's parameters are accepted as the SDK
wrote them (``parameters={"train.save_steps": "0"}``, every value a string) or as
typed TOML keys (``"train.save_interval" = 100``). See docs/tensors.md.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from stepscope.config._base import ConfigError, as_bool, as_int, build, check_keys, given, invalid

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
_REDUCTION_KEYS = ("reductions", "abs_reductions", "norms", "abs_norms")
COLLECTION_KEYS = (
    "include_regex",
    "save_raw_tensor",
    "save_histogram",
    *_REDUCTION_KEYS,
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


def _steps(value: Any, name: str) -> tuple[int, ...]:
    """``"0,5, 9"``, ``[0, 5]`` or ``7`` as a sorted tuple of step numbers."""
    items = value.split(",") if isinstance(value, str) else value
    if not isinstance(items, list | tuple):
        items = [items]
    return tuple(sorted({as_int(v, name, 0) for v in items if str(v).strip() != ""}))


def _reductions(key: str, value: Any) -> tuple[str, ...]:
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


def _check_regex(value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise invalid(value, "include_regex", "a non-empty Python regular expression")
    try:
        re.compile(value)
    except re.error as exc:
        accepted = f"a valid Python regular expression ({exc})"
        raise invalid(value, "include_regex", accepted) from None
    return value


def normalize_parameters(
    data: Mapping[str, Any], valid: tuple[str, ...], section: str
) -> dict[str, Any]:
    """Typed values for the parameters of a collection (or of the hook)."""
    out: dict[str, Any] = {}
    for key, value in given(check_keys(data, valid, section)).items():
        base = key.split(".", 1)[-1]
        if base == "include_regex":
            out[key] = _check_regex(value)
        elif base in ("save_raw_tensor", "save_histogram", "save_all"):
            out[key] = as_bool(value, key)
        elif base in _REDUCTION_KEYS:
            out[key] = list(_reductions(key, value))
        elif base == "save_steps":
            out[key] = list(_steps(value, key))
        elif base == "end_step":
            out[key] = as_int(value, key, 1)
        else:
            out[key] = as_int(value, key, 1 if base == "save_interval" else 0)
    return out


@dataclass(frozen=True)
class CollectionConfig:
    """A collection to save: a built-in one (``losses``, ``weights``, ...) or a new one
    selecting tensors by ``include_regex`` over module and parameter names.

    ``parameters`` holds the SDK's parameters: ``include_regex``, ``reductions``
    (and ``abs_reductions``, ``norms``, ``abs_norms``), ``save_raw_tensor``,
    ``save_interval``, ``save_steps``, ``start_step``, ``end_step``, each schedule key
    also per phase (``train.save_interval``). Strings are accepted for every value.
    """

    name: str
    parameters: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not re.fullmatch(r"[A-Za-z0-9_.-]{1,64}", self.name):
            raise invalid(self.name, "collection name", "1-64 characters from A-Z a-z 0-9 _ . -")
        section = f"debugger.collections {self.name}"
        params = normalize_parameters(self.parameters, COLLECTION_KEYS, section)
        object.__setattr__(self, "parameters", params)

    @property
    def include_regex(self) -> str | None:
        """The regular expression over tensor, module and parameter names, if any."""
        value = self.parameters.get("include_regex")
        return str(value) if value is not None else None

    @property
    def reductions(self) -> tuple[str, ...]:
        """Every reduction asked for, in the form ``l2`` or ``abs_mean``."""
        found = [r for key in _REDUCTION_KEYS for r in self.parameters.get(key, [])]
        return tuple(dict.fromkeys(found))

    def with_defaults(self, defaults: Mapping[str, Any]) -> CollectionConfig:
        """This collection with the hook's parameters filling in what it does not set."""
        merged = {k: v for k, v in defaults.items() if k in COLLECTION_KEYS}
        return CollectionConfig(self.name, {**merged, **self.parameters})

    def schedule(self, phase: str) -> SaveConfig:
        """The SaveConfig of ``phase`` (``train`` or ``eval``)."""
        p = self.parameters
        pick = {k: p.get(f"{phase}.{k}", p.get(k)) for k in SCHEDULE_KEYS}
        return SaveConfig(
            save_interval=pick["save_interval"] or DEFAULT_SAVE_INTERVAL,
            save_steps=tuple(pick["save_steps"] or ()),
            start_step=pick["start_step"] or 0,
            end_step=pick["end_step"],
        )

    def to_dict(self) -> dict[str, Any]:
        """``{"name": ..., "parameters": {...}}`` (``from_dict`` reads it back)."""
        return {"name": self.name, "parameters": dict(self.parameters)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CollectionConfig:
        """From ``{"name": n, "parameters": {...}}`` or ``{"name": n, <parameters>}``."""
        if not isinstance(data, Mapping) or not isinstance(data.get("name"), str):
            raise ConfigError(
                'Each [[debugger.collections]] table needs a name, e.g. name = "losses".',
                "[debugger.collections]",
            )
        rest = {k: v for k, v in data.items() if k not in ("name", "parameters")}
        params = {**dict(data.get("parameters") or {}), **rest}
        return cls(data["name"], params)


@dataclass(frozen=True)
class DebuggerHookConfig:
    """Output tensor capture: ``collection_configs`` (alias ``collections``) and
    ``hook_parameters``, the defaults of every collection (and ``save_all``).

    Tensors are always written into the job folder; ``s3_output_path`` and
    ``container_local_output_path`` are accepted for SDK compatibility and unused.
    """

    s3_output_path: str | None = None
    container_local_output_path: str | None = None
    hook_parameters: Mapping[str, Any] = field(default_factory=dict)
    collection_configs: tuple[CollectionConfig, ...] = ()

    def __post_init__(self) -> None:
        hook = normalize_parameters(self.hook_parameters, HOOK_KEYS, "debugger.hook_parameters")
        object.__setattr__(self, "hook_parameters", hook)
        configs = self.collection_configs
        if isinstance(configs, Mapping) or not isinstance(configs, list | tuple):
            raise invalid(configs, "collection_configs", "a list of CollectionConfig")
        typed = tuple(
            c if isinstance(c, CollectionConfig) else CollectionConfig.from_dict(c) for c in configs
        )
        names = [c.name for c in typed]
        if len(set(names)) != len(names):
            raise ConfigError(f"Collection names must be unique, got {names}. Fix: merge them.")
        object.__setattr__(self, "collection_configs", typed)

    def to_dict(self) -> dict[str, Any]:
        """The configuration as a JSON-serialisable dict."""
        return {
            "s3_output_path": self.s3_output_path,
            "container_local_output_path": self.container_local_output_path,
            "hook_parameters": dict(self.hook_parameters),
            "collection_configs": [c.to_dict() for c in self.collection_configs],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, section: str = "debugger") -> DebuggerHookConfig:
        """From the ``[debugger]`` table (``[[debugger.collections]]`` for the collections)."""
        valid = (
            "s3_output_path",
            "container_local_output_path",
            "hook_parameters",
            "collection_configs",
            "collections",
        )
        kwargs = given(check_keys(data, valid, section), {"collections": "collection_configs"})
        return build(cls, kwargs, section)
