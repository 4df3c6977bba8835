"""DebuggerHookConfig and CollectionConfig: which output tensors are saved, and when.

Named as in the SageMaker SDK; the parameters of a collection and its save
schedule are in :mod:`._collection_params`. See docs/tensors.md.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from stepscope.config._base import build, check_keys, given, invalid
from stepscope.config._collection_params import (
    COLLECTION_KEYS,
    DEFAULT_SAVE_INTERVAL,
    HOOK_KEYS,
    REDUCTION_KEYS,
    SCHEDULE_KEYS,
    SaveConfig,
    normalize_parameters,
)
from stepscope.errors import ConfigError


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
    parameters: Mapping[str, object] = field(default_factory=dict)

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
        found = [r for key in REDUCTION_KEYS for r in self._names(key)]
        return tuple(dict.fromkeys(found))

    def _names(self, key: str) -> list[str]:
        """A list parameter (normalized to a list of names when built), or []."""
        value = self.parameters.get(key)
        return [str(v) for v in value] if isinstance(value, list) else []

    def _ints(self, key: str) -> list[int]:
        """A list of step numbers (normalized to ints when built), or []."""
        value = self.parameters.get(key)
        return [v for v in value if isinstance(v, int)] if isinstance(value, list) else []

    def _int(self, key: str) -> int | None:
        """A whole-number parameter (normalized to an int when built), or None."""
        value = self.parameters.get(key)
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    def with_defaults(self, defaults: Mapping[str, object]) -> CollectionConfig:
        """This collection with the hook's parameters filling in what it does not set."""
        merged = {k: v for k, v in defaults.items() if k in COLLECTION_KEYS}
        return CollectionConfig(self.name, {**merged, **self.parameters})

    def schedule(self, phase: str) -> SaveConfig:
        """The SaveConfig of ``phase`` (``train`` or ``eval``)."""
        key = {k: f"{phase}.{k}" if f"{phase}.{k}" in self.parameters else k for k in SCHEDULE_KEYS}
        return SaveConfig(
            save_interval=self._int(key["save_interval"]) or DEFAULT_SAVE_INTERVAL,
            save_steps=tuple(self._ints(key["save_steps"])),
            start_step=self._int(key["start_step"]) or 0,
            end_step=self._int(key["end_step"]),
        )

    def to_dict(self) -> dict[str, object]:
        """``{"name": ..., "parameters": {...}}`` (``from_dict`` reads it back)."""
        return {"name": self.name, "parameters": dict(self.parameters)}

    @classmethod
    def from_dict(cls, data: Mapping[str, object]) -> CollectionConfig:
        """From ``{"name": n, "parameters": {...}}`` or ``{"name": n, <parameters>}``."""
        name = data.get("name") if isinstance(data, Mapping) else None
        if not isinstance(name, str):
            raise ConfigError(
                'Each [[debugger.collections]] table needs a name, e.g. name = "losses".',
                "[debugger.collections]",
            )
        nested = data.get("parameters") or {}
        if not isinstance(nested, Mapping):
            raise invalid(nested, f"parameters of collection {name}", "a table of parameters")
        rest = {k: v for k, v in data.items() if k not in ("name", "parameters")}
        return cls(name, {**nested, **rest})


@dataclass(frozen=True)
class DebuggerHookConfig:
    """Output tensor capture: ``collection_configs`` (alias ``collections``) and
    ``hook_parameters``, the defaults of every collection (and ``save_all``).

    Tensors are always written into the job folder; ``s3_output_path`` and
    ``container_local_output_path`` are accepted for SDK compatibility and unused.
    """

    s3_output_path: str | None = None
    container_local_output_path: str | None = None
    hook_parameters: Mapping[str, object] = field(default_factory=dict)
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

    def to_dict(self) -> dict[str, object]:
        """The configuration as a JSON-serialisable dict."""
        return {
            "s3_output_path": self.s3_output_path,
            "container_local_output_path": self.container_local_output_path,
            "hook_parameters": dict(self.hook_parameters),
            "collection_configs": [c.to_dict() for c in self.collection_configs],
        }

    @classmethod
    def from_dict(
        cls, data: Mapping[str, object], *, section: str = "debugger"
    ) -> DebuggerHookConfig:
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
