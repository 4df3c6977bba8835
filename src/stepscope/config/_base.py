"""Errors, warnings and the value checks shared by every configuration class.

Exception hierarchy::

    ValueError
    └── ConfigError            every configuration problem (bad value, unknown key,
                               conflicting ranges, unreadable file)
    UserWarning
    └── ProfilingCostWarning   a profiling window that will slow training down

Every message says what was wrong, the accepted values and how to fix it.
"""

from __future__ import annotations

import copy
import dataclasses
import difflib
import math
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from enum import Enum
from typing import TYPE_CHECKING, Literal, TypeAlias, TypeVar, overload

from stepscope.errors import ConfigError, quote

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

T = TypeVar("T")

#: A JSON value as written: what ``json.dumps`` takes (the configuration's ``to_dict``).
Json: TypeAlias = "str | int | float | bool | Sequence[Json] | Mapping[str, Json] | None"

#: Detailed and dataloader windows longer than this warn (ProfilingCostWarning).
MAX_CHEAP_STEPS = 3
MAX_CHEAP_SECONDS = 10.0

_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


class ProfilingCostWarning(UserWarning):
    """A profiling window long enough to slow training down noticeably."""


def invalid(value: object, name: str, accepted: str, fix: str = "") -> ConfigError:
    """``Invalid value <value> for <name>. Accepted values are <accepted>. <fix>``."""
    message = f"Invalid value {quote(value)} for {name}. Accepted values are {accepted}."
    return ConfigError(f"{message} {fix}" if fix else message)


def as_int(value: object, name: str, minimum: int, fix: str = "") -> int:
    """``value`` as an int >= ``minimum``; accepts "5" and 5.0 (pasted or from JSON)."""
    accepted = f"whole numbers >= {minimum}"
    result: int
    if isinstance(value, bool):
        raise invalid(value, name, accepted, fix)
    if isinstance(value, int):
        result = value
    elif isinstance(value, float) and value.is_integer():
        result = int(value)
    elif isinstance(value, str):
        try:
            result = int(value.strip())
        except ValueError:
            raise invalid(value, name, accepted, fix) from None
    else:
        raise invalid(value, name, accepted, fix)
    if result < minimum:
        raise invalid(value, name, accepted, fix)
    return result


def as_float(value: object, name: str, *, positive: bool, fix: str = "") -> float:
    """``value`` as a finite float, > 0 if ``positive`` else >= 0; accepts "1.5"."""
    accepted = "numbers > 0" if positive else "numbers >= 0"
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise invalid(value, name, accepted, fix)
    try:
        result = float(value)
    except (ValueError, OverflowError):  # OverflowError: an int past 1e308
        raise invalid(value, name, accepted, fix) from None
    if not math.isfinite(result) or result < 0 or (positive and result == 0):
        raise invalid(value, name, accepted, fix)
    return result


def as_bool(value: object, name: str) -> bool:
    """``value`` as a bool; accepts "true"/"false"/"1"/"0"/"yes"/"no" in any case."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in _TRUE + _FALSE:
        return value.strip().lower() in _TRUE
    raise invalid(value, name, "true or false (also 1/0, yes/no)")


@overload
def as_text(value: object, name: str, *, allow_none: Literal[False] = False) -> str: ...
@overload
def as_text(value: object, name: str, *, allow_none: bool) -> str | None: ...
def as_text(value: object, name: str, *, allow_none: bool = False) -> str | None:
    """``value`` as a non-empty string (paths may be ``os.PathLike``)."""
    if value is None and allow_none:
        return None
    if isinstance(value, os.PathLike):
        value = os.fspath(value)
    if not isinstance(value, str) or not value.strip():
        raise invalid(value, name, "non-empty strings (a path or URL)")
    return value


def suggest(key: str, valid: Iterable[str]) -> str | None:
    """The valid key ``key`` was probably meant to be, or None."""
    valid = list(valid)
    # A key that is part of a valid one ("profiler" for "python_profiler") first.
    containing = sorted((v for v in valid if len(key) >= 4 and key.lower() in v), key=len)
    if containing:
        return containing[0]
    # difflib's ratio cannot reach its 0.6 cutoff for a key over 2.33x the longest valid
    # one, and its cost grows with the key's length (seconds for a 10 MB key).
    if not valid or len(key) > 3 * max(map(len, valid)):
        return None
    close = difflib.get_close_matches(key, valid, n=1)
    return close[0] if close else None


def check_keys(data: object, valid: Iterable[str], section: str) -> Mapping[str, object]:
    """Refuse anything but a mapping whose keys are all in ``valid``, suggesting fixes."""
    valid = list(valid)
    where = f"[{section}]"
    if not isinstance(data, Mapping):
        raise ConfigError(
            f"Expected a table of keys, got {type(data).__name__} {quote(data)}. "
            f"Valid keys are {', '.join(valid)}.",
            where,
        )
    for key in data:
        if key not in valid:
            close = suggest(str(key), valid)
            hint = f" Did you mean {close!r}?" if close else ""
            raise ConfigError(
                f"Unknown key {quote(key)}.{hint} Valid keys are {', '.join(valid)}. "
                "Fix the spelling or remove the key.",
                where,
            )
    return data


def given(
    data: Mapping[str, object], aliases: Mapping[str, str] | None = None
) -> dict[str, object]:
    """Keys of ``data`` whose value is not None, with seed aliases renamed to our names.

    None means "not given" (JSON null; TOML has none), so the field keeps its default.
    """
    out: dict[str, object] = {}
    for key, value in data.items():
        name = (aliases or {}).get(key, key)
        if value is None:
            continue
        if name in out:
            alias = key if key != name else next(a for a, n in (aliases or {}).items() if n == name)
            raise ConfigError(f"Both {name!r} and its alias {alias!r} are set. Keep only {name!r}.")
        out[name] = value
    return out


def build(cls: Callable[..., T], kwargs: Mapping[str, object], section: str) -> T:
    """``cls(**kwargs)``, with ``[section]`` prefixed to the message of a ConfigError.

    ``kwargs`` are not validated yet: the configuration classes check and convert
    every field when built (``__post_init__``), whatever its declared type.
    """
    try:
        return cls(**kwargs)
    except ConfigError as error:
        raise error.in_section(section) from None


def fields_to_dict(obj: DataclassInstance) -> dict[str, object]:
    """The fields of a config dataclass as JSON-serialisable values (enums by value)."""
    out: dict[str, object] = {}
    for field in dataclasses.fields(obj):
        value = getattr(obj, field.name)
        to_dict = getattr(value, "to_dict", None)
        if isinstance(value, Enum):
            value = value.value
        elif to_dict is not None:
            value = to_dict()
        elif isinstance(value, tuple | list):
            value = [copy.deepcopy(item) for item in value]
        else:
            value = copy.deepcopy(value)
        out[field.name] = value
    return out


def field_names(cls: DataclassInstance | type[DataclassInstance]) -> list[str]:
    """The names of the fields of a dataclass, in order."""
    return [field.name for field in dataclasses.fields(cls)]
