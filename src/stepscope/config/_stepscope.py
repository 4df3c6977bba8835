"""JobConfig and StepscopeConfig, the root of the configuration."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from stepscope.config._base import (
    as_text,
    build,
    check_keys,
    field_names,
    fields_to_dict,
    given,
    invalid,
)
from stepscope.config._debugger import DebuggerHookConfig
from stepscope.config._profiler import ProfilerConfig
from stepscope.errors import ConfigError, quote

DEFAULT_OUTPUT = "./stepscope-runs"
_JOB_NAME = re.compile(r"[A-Za-z0-9._-]{1,128}")


def check_job_name(name: object) -> str:
    """``name`` if it is a safe folder name, else a ConfigError suggesting one."""
    if isinstance(name, str) and _JOB_NAME.fullmatch(name) and name not in (".", ".."):
        return name
    fix = ""
    if isinstance(name, str):
        safe = re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-.")[:128]
        fix = f"Fix: e.g. {quote(safe, 140)}." if safe else ""  # whole: a name to copy
    raise invalid(
        name,
        "job name",
        "1 to 128 characters from A-Z, a-z, 0-9, '.', '_' and '-', other than '.' and '..' "
        "(the name becomes a folder name)",
        fix,
    )


@dataclass(frozen=True)
class JobConfig:
    """Where a job is written: the folder ``<output>/<name>`` (see docs/format.md).

    ``output`` is a local folder or any URL fsspec understands; ``name`` None means
    ``<script>-<YYYYmmdd-HHMMSS>``, chosen by the launcher.
    """

    output: str = DEFAULT_OUTPUT
    name: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "output", as_text(self.output, "output"))
        if self.name is not None:
            object.__setattr__(self, "name", check_job_name(self.name))

    def to_dict(self) -> dict[str, object]:
        """The settings as a JSON-serialisable dict (``from_dict`` reads it back)."""
        return fields_to_dict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, object], *, section: str = "job") -> JobConfig:
        """A JobConfig from ``{"output": ..., "name": ...}``."""
        return build(cls, given(check_keys(data, field_names(cls), section)), section)


@dataclass(frozen=True)
class StepscopeConfig:
    """The whole configuration: the ``[job]``, ``[profiler]``, ``[[rules]]`` and
    ``[debugger]`` sections of a stepscope TOML file.

    ``rules`` (raw dicts) is a placeholder until the rules configuration is typed;
    ``debugger`` is a :class:`DebuggerHookConfig` (docs/tensors.md).
    ``profiler.output_path``, when set, is the output folder: ``job.output`` takes
    its value (setting both to different folders is an error), so readers only need
    ``job.output``.
    """

    profiler: ProfilerConfig = field(default_factory=ProfilerConfig)
    job: JobConfig = field(default_factory=JobConfig)
    rules: tuple[dict[str, object], ...] = ()
    debugger: DebuggerHookConfig | None = None

    def __post_init__(self) -> None:
        if isinstance(self.profiler, Mapping):
            object.__setattr__(self, "profiler", ProfilerConfig.from_dict(self.profiler))
        if isinstance(self.job, Mapping):
            object.__setattr__(self, "job", JobConfig.from_dict(self.job))
        if not isinstance(self.profiler, ProfilerConfig):
            raise invalid(self.profiler, "profiler", "a ProfilerConfig or a dict")
        if not isinstance(self.job, JobConfig):
            raise invalid(self.job, "job", "a JobConfig or a dict")
        output = self.profiler.output_path
        if output is not None and output != self.job.output:
            if self.job.output != DEFAULT_OUTPUT:
                raise ConfigError(
                    f"Two output folders: profiler.output_path={quote(output)} and "
                    f"job.output={quote(self.job.output)}. They are the same setting. "
                    "Fix: keep only job.output."
                )
            object.__setattr__(self, "job", JobConfig(output, self.job.name))
        rules = self.rules
        if isinstance(rules, Mapping) or not isinstance(rules, list | tuple):
            raise invalid(rules, "rules", "a list of tables ([[rules]] in TOML)")
        for rule in rules:
            if not isinstance(rule, Mapping):
                raise invalid(rule, "rules entry", "tables ([[rules]] in TOML)")
        object.__setattr__(self, "rules", tuple(dict(rule) for rule in rules))
        if isinstance(self.debugger, Mapping):
            object.__setattr__(self, "debugger", DebuggerHookConfig.from_dict(self.debugger))
        if self.debugger is not None and not isinstance(self.debugger, DebuggerHookConfig):
            raise invalid(self.debugger, "debugger", "a table ([debugger] in TOML)")

    def to_dict(self) -> dict[str, object]:
        """The configuration as a JSON-serialisable dict (``from_dict`` reads it back)."""
        return fields_to_dict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, object], *, section: str = "") -> StepscopeConfig:
        """A StepscopeConfig from a dict with the layout of the TOML file."""
        section = section or "top level"
        return build(cls, given(check_keys(data, field_names(cls), section)), section)
