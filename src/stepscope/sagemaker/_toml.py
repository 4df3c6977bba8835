"""A configuration dict as a TOML file, for ``stepscope run --config``.

Only what ``StepscopeConfig.to_dict()`` holds: tables, lists, strings, numbers and
flags. Every table is written inline, so the file is one ``key = value`` line per
section. ``None`` means "not given" in stepscope's configuration and is left out.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping

_BARE = re.compile(r"[A-Za-z0-9_-]+")


def _key(key: str) -> str:
    return key if _BARE.fullmatch(key) else json.dumps(key)


def value(v: object) -> str:
    """One TOML value (an inline table for a mapping)."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if not math.isfinite(v):
            return "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf")
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v)  # JSON's escapes are TOML's basic-string escapes
    if isinstance(v, Mapping):
        items = [f"{_key(str(k))} = {value(x)}" for k, x in v.items() if x is not None]
        return "{" + ", ".join(items) + "}"
    if isinstance(v, list | tuple):
        return "[" + ", ".join(value(x) for x in v) + "]"
    raise TypeError(f"cannot write {v!r} ({type(v).__name__}) as TOML")


def dumps(data: Mapping[str, object]) -> str:
    """``data`` as a TOML document of top-level keys with inline values."""
    return "".join(f"{_key(k)} = {value(v)}\n" for k, v in data.items() if v is not None)
