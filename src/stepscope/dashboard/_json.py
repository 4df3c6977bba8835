"""The API's JSON: compact bytes, NaN and infinities as null (JSON has no NaN)."""

from __future__ import annotations

import json
import math


def clean(obj: object) -> object:
    """``obj`` with NaN and infinities as None (JSON has no NaN)."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {str(k): clean(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [clean(v) for v in obj]
    return obj


def encode(obj: object) -> bytes:
    """Compact JSON bytes of ``obj`` (NaN as null, unknown types as strings)."""
    try:  # chart specs are already clean: the fast path
        return json.dumps(obj, separators=(",", ":"), default=str, allow_nan=False).encode()
    except ValueError:
        return json.dumps(clean(obj), separators=(",", ":"), default=str).encode()
