"""Where a rank's profiling artifacts go: ``profiling/rank-<r>/`` in the job folder.

Profilers that can only write to a file (the PyTorch profiler's trace export)
write into a staging folder first: ``FrameworkProfile.local_path`` when given,
else a private temporary folder. Every artifact then goes into the job as one
whole file (docs/format.md), so the job folder may live on object storage.
After ``file_open_fail_threshold`` failed writes the sink gives up: profiling
stops for the rest of the process, and the faults are recorded.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypeAlias

from stepscope.agent._faults import FaultBoundary
from stepscope.store import Store

if TYPE_CHECKING:
    from stepscope.config import FrameworkProfile

PREFIX = "profiling"

# A value that ``json.dumps`` writes as it is: what artifacts and records hold.
JSON: TypeAlias = "str | int | float | bool | Sequence[JSON] | Mapping[str, JSON] | None"


@dataclass(frozen=True)
class Export:
    """What a window's export wrote: its fields go into the window's record."""

    path: str | None  # the main artifact's key; None if its write failed
    files: list[str]  # every artifact written
    details: dict[str, JSON] = field(default_factory=dict)  # the profiler's own fields

    def to_dict(self) -> dict[str, JSON]:
        """The record's fields, in this order (docs/format.md)."""
        return {"path": self.path, "files": self.files, **self.details}


# What a profiler's ``stop()`` returns: the rest of its work, run by the background
# thread with the sink and the window's base name.
Finish = Callable[["ArtifactSink", str], Export]


@dataclass(frozen=True)
class FileBounds:
    """``FrameworkProfile``'s file settings, as the profilers use them."""

    local_path: str | None = None
    file_max_size: int = 10485760
    file_close_interval: float = 60.0
    file_open_fail_threshold: int = 50

    @classmethod
    def from_profile(cls, profile: FrameworkProfile | None) -> FileBounds:
        """The bounds of a ``FrameworkProfile`` (defaults when there is none)."""
        if profile is None:
            return cls()
        return cls(
            profile.local_path,
            profile.file_max_size,
            profile.file_close_interval,
            profile.file_open_fail_threshold,
        )


class ArtifactSink:
    """Writes artifacts of one rank; names are unique within the process."""

    def __init__(self, store: Store, rank: int, bounds: FileBounds, faults: FaultBoundary) -> None:
        self.store, self.rank, self.bounds, self.faults = store, rank, bounds, faults
        self.folder = f"{PREFIX}/rank-{rank}"
        self.failures = 0
        self._names: set[str] = set()
        self._staging: str | None = None
        self._lock = threading.Lock()

    @property
    def disabled(self) -> bool:
        """True once ``file_open_fail_threshold`` writes have failed."""
        return self.failures >= self.bounds.file_open_fail_threshold

    def base(self, kind: str, first: int, last: int) -> str:
        """A fresh base name ``<kind>-<first>-<last>`` (``-2``, ``-3``... if taken)."""
        with self._lock:
            name, n = f"{kind}-{first}-{last}", 1
            while name in self._names:
                n += 1
                name = f"{kind}-{first}-{last}-{n}"
            self._names.add(name)
            return name

    def staging_file(self, name: str) -> str:
        """A path in the staging folder for a profiler that writes files itself."""
        with self._lock:
            if self._staging is None:
                if self.bounds.local_path:
                    self._staging = os.path.join(self.bounds.local_path, f"rank-{self.rank}")
                    os.makedirs(self._staging, exist_ok=True)
                else:
                    self._staging = tempfile.mkdtemp(prefix="stepscope-profiling-")
            return os.path.join(self._staging, name)

    def write(self, name: str, data: bytes) -> str | None:
        """Store ``data`` as ``profiling/rank-<r>/<name>``; the key, or None if it failed."""
        if self.disabled:
            return None
        key = f"{self.folder}/{name}"
        try:
            self.store.write_bytes(key, data)
        except Exception as exc:
            self.failures += 1
            self.faults.record("profiling-files", exc)
            return None
        return key

    def write_json(self, name: str, obj: JSON) -> str | None:
        """Store ``obj`` as JSON (NaN-free, sorted keys)."""
        return self.write(name, json.dumps(obj, indent=1, sort_keys=True, default=str).encode())

    def close(self) -> None:
        """Remove a private staging folder (a configured ``local_path`` is kept)."""
        if self._staging is not None and not self.bounds.local_path:
            shutil.rmtree(self._staging, ignore_errors=True)
        self._staging = None
