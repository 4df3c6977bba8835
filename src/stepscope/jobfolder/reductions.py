"""The reductions of saved tensors (``l2``, ``abs_mean``, ...) in numpy: one definition
for the agent (frameworks whose values reach the host as numpy) and the readers.

Not imported by :mod:`stepscope.jobfolder` itself: importing this module loads numpy.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import SupportsFloat

import numpy as np
import numpy.typing as npt

_NP_REDUCE: dict[str, Callable[[npt.NDArray[np.float64]], SupportsFloat]] = {
    "min": np.min,
    "max": np.max,
    "mean": np.mean,
    "std": np.std,
    "variance": np.var,
    "sum": np.sum,
    "prod": np.prod,
    "l1": lambda x: np.abs(x).sum(),
    "l2": lambda x: np.sqrt(np.square(x, dtype=np.float64).sum()),
}


def np_reduce(x: npt.ArrayLike, name: str) -> float:
    """Reduction ``name`` (``l2``, ``abs_mean``, ...) of an array, as the agent computes it."""
    base = name.removeprefix("abs_")
    if base not in _NP_REDUCE:
        raise KeyError(
            f"Unknown reduction {name!r}. Known: {', '.join(_NP_REDUCE)} and their abs_ forms."
        )
    values = np.asarray(x, dtype=np.float64)
    return float(_NP_REDUCE[base](np.abs(values) if base != name else values))
