"""Reading the configuration: a TOML file, then the environment, then arguments.

This is the one place where configuration comes in; the environment is read
only here, and only from the mapping the caller passes.
"""

from __future__ import annotations

import dataclasses
import re
import tomllib
from collections.abc import Callable, Mapping
from pathlib import Path

from stepscope.config._base import as_bool, as_text, suggest
from stepscope.config._profiler import check_interval
from stepscope.config._stepscope import JobConfig, StepscopeConfig, check_job_name
from stepscope.errors import ConfigError, quote

#: Environment variables read by :func:`resolve_config`, and the ``args`` they match.
ENV_VARS = {
    "STEPSCOPE_OUTPUT": "output",
    "STEPSCOPE_JOB": "job",
    "STEPSCOPE_INTERVAL_MS": "interval_ms",
    "STEPSCOPE_DISABLE": "disable_profiler",
}
ARGS = tuple(ENV_VARS.values())
_TOML_FIX = 'Fix the syntax (strings need quotes: name = "bert-42"); see docs/config.md.'


def load_toml(path: str | Path) -> dict[str, object]:
    """The contents of a TOML file as a dict; a ConfigError if it is missing or invalid."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(
            f"Configuration file {quote(str(path))} not found. Fix: check the path "
            "(relative paths start in the current folder) or create the file."
        ) from None
    except (OSError, UnicodeDecodeError) as error:
        raise ConfigError(f"Cannot read configuration file {quote(str(path))}: {error}.") from None
    try:
        return tomllib.loads(text)
    except RecursionError:  # tomllib recurses once per level of nested arrays or tables
        raise ConfigError(
            "Invalid TOML: nested too deep for the parser. Fix: flatten the nesting "
            "(a configuration needs a few levels, see docs/config.md).",
            str(path),
        ) from None
    except tomllib.TOMLDecodeError as error:
        found = re.search(r"\(at line (\d+), column (\d+)\)", str(error))
        reason = re.sub(r"\s*\(at line \d+, column \d+\)", "", str(error)) or "syntax error"
        if found is None:
            raise ConfigError(f"Invalid TOML: {reason}. {_TOML_FIX}", str(path)) from None
        line, column = found.groups()
        raise ConfigError(
            f"Invalid TOML at line {line}, column {column}: {reason}. {_TOML_FIX}",
            f"{path}:{line}:{column}",
        ) from None


def _with_output(config: StepscopeConfig, value: object) -> StepscopeConfig:
    # A later source's output replaces the file's, whichever of its two names it used.
    profiler = dataclasses.replace(config.profiler, output_path=None)
    job = JobConfig(as_text(value, "output"), config.job.name)
    return dataclasses.replace(config, profiler=profiler, job=job)


def _with_job(config: StepscopeConfig, value: object) -> StepscopeConfig:
    job = dataclasses.replace(config.job, name=check_job_name(value))
    return dataclasses.replace(config, job=job)


def _with_interval(config: StepscopeConfig, value: object) -> StepscopeConfig:
    interval = check_interval(value)
    profiler = dataclasses.replace(config.profiler, system_monitor_interval_millis=interval)
    return dataclasses.replace(config, profiler=profiler)


def _with_disable(config: StepscopeConfig, value: object) -> StepscopeConfig:
    disable = as_bool(value, "disable_profiler")
    profiler = dataclasses.replace(config.profiler, disable_profiler=disable)
    return dataclasses.replace(config, profiler=profiler)


_SETTERS: dict[str, Callable[[StepscopeConfig, object], StepscopeConfig]] = {
    "output": _with_output,
    "job": _with_job,
    "interval_ms": _with_interval,
    "disable_profiler": _with_disable,
}


def resolve_config(
    file: str | Path | None = None,
    env: Mapping[str, str] | None = None,
    args: Mapping[str, object] | None = None,
) -> StepscopeConfig:
    """The configuration from defaults < ``file`` (TOML) < ``env`` < ``args``.

    ``env`` is a mapping such as ``os.environ``; only ``STEPSCOPE_OUTPUT``,
    ``STEPSCOPE_JOB``, ``STEPSCOPE_INTERVAL_MS`` and ``STEPSCOPE_DISABLE`` are read,
    and an empty value counts as unset. ``args`` may hold ``output``, ``job``,
    ``interval_ms`` and ``disable_profiler``; None means "not given".
    """
    config = StepscopeConfig()
    if file is not None:
        data = load_toml(file)  # its errors name the file already
        try:
            config = StepscopeConfig.from_dict(data)
        except ConfigError as error:
            raise error.in_source(str(file)) from None
        except RecursionError:  # a value nested deeper than the parser's own limit
            raise ConfigError(
                "a value is nested too deep. Fix: flatten it (see docs/config.md).", str(file)
            ) from None
    for var, key in ENV_VARS.items():
        text = (env or {}).get(var)
        if text is not None and text.strip():
            try:
                config = _SETTERS[key](config, text.strip())
            except ConfigError as error:
                raise error.in_source(f"environment variable {var}={quote(text)}") from None
    for key, value in (args or {}).items():
        if key not in _SETTERS:
            close = suggest(key, ARGS)
            hint = f" Did you mean {close!r}?" if close else ""
            raise ConfigError(
                f"Unknown argument {quote(key)}.{hint} Valid arguments are {', '.join(ARGS)}."
            )
        if value is not None:
            try:
                config = _SETTERS[key](config, value)
            except ConfigError as error:
                raise error.in_source(f"argument {key}={quote(value)}") from None
    return config
