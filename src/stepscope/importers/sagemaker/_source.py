"""The predecessor's output, listed once and sorted into its parts (docs/sagemaker.md).

```
SRC/                                   a training job's output prefix (or a local copy)
  profiler-output/system/incremental/YYYYMMDDHH/<minute>.<node>.json
  profiler-output/framework/pevents/YYYYMMDDHH/<end_us>_<node id>_model_timeline.json
  profiler-output/framework/pevents/.../*_horovod_timeline.json, *pythontimeline.json
  profiler-output/framework/<fw>/detailed_profiling/.../*.json[.gz]
  profiler-output/framework/<fw>/{cprofile,pyinstrument}/.../python_stats[.json]
  debug-output/index/<9 digits>/<step:012>_<worker>.json
  debug-output/events/<12 digits>/<step:012>_<worker>.tfevents
  debug-output/collections/<9 digits>/<worker>_collections.json
```
``SRC`` may also be ``profiler-output/`` itself: parts are found by their folder names.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from stepscope.errors import UsageError
from stepscope.store import Store, open_store

_SYSTEM = re.compile(r"(?:^|/)system/incremental/(\d{10})/(\d+)\.([^/]+)\.json$")
_TIMELINE = re.compile(r"(?:^|/)framework/pevents/\d{10}/([^/]+)\.json$")
_DETAILED = re.compile(r"(?:^|/)framework/[^/]+/detailed_profiling/.+\.json(?:\.gz)?$")
_PYTHON = re.compile(r"(?:^|/)framework/[^/]+/(cprofile|pyinstrument)/.+")
_INDEX = re.compile(r"(?:^|/)index/\d+/(\d+)_([^/]+)\.json$")
_EVENTS = re.compile(r"(?:^|/)events/\d+/(\d+)_([^/]+)\.tfevents$")
_COLLECTIONS = re.compile(r"(?:^|/)collections/\d+/([^/]+)_collections\.json$")


@dataclass(frozen=True)
class SystemFile:
    """One minute file of a node's system metrics (``hour``: its ``YYYYMMDDHH`` folder)."""

    key: str
    hour: str
    minute: int
    node: str


@dataclass
class Listing:
    """The source's files by part; ``other`` has no known part (counted, listed)."""

    system: list[SystemFile] = field(default_factory=list)
    timelines: list[str] = field(default_factory=list)
    detailed: list[str] = field(default_factory=list)
    python: list[str] = field(default_factory=list)
    index: list[str] = field(default_factory=list)
    events: list[str] = field(default_factory=list)
    collections: list[str] = field(default_factory=list)
    other: list[str] = field(default_factory=list)


def open_source(url: str) -> tuple[Store, Listing]:
    """The store of ``url`` and its files by part; a clear error when nothing is there."""
    store = open_store(url)
    try:
        keys = store.list("")
    except FileNotFoundError:
        keys = []
    listing = classify(keys)
    found = listing.system or listing.timelines or listing.index or listing.detailed
    if not found:
        raise UsageError(
            f"No SageMaker Debugger/Profiler output at {url!r}: found no "
            "profiler-output/system/incremental/, profiler-output/framework/ or debugger "
            "index/ files. Pass the training job's output prefix (the folder holding "
            "profiler-output/ or debug-output/), a local copy of it, or an s3:// URL."
        )
    return store, listing


def classify(keys: list[str]) -> Listing:
    """Sort ``keys`` into the parts of the layout (deterministic: sorted input)."""
    out = Listing()
    # The first pattern that matches says the part (system minute files are parsed).
    parts = (
        (_TIMELINE, out.timelines),
        (_DETAILED, out.detailed),
        (_PYTHON, out.python),
        (_INDEX, out.index),
        (_EVENTS, out.events),
        (_COLLECTIONS, out.collections),
    )
    for key in sorted(keys):
        if m := _SYSTEM.search(key):
            out.system.append(SystemFile(key, m.group(1), int(m.group(2)), m.group(3)))
            continue
        part = next((found for pattern, found in parts if pattern.search(key)), out.other)
        part.append(key)
    # A minute can be split across two hour folders: order by minute, then hour.
    out.system.sort(key=lambda f: (f.node, f.minute, f.hour, f.key))
    return out


def worker_of(key: str) -> str | None:
    """The worker name of a debugger index or event file (``worker_0``)."""
    m = _INDEX.search(key) or _EVENTS.search(key) or _COLLECTIONS.search(key)
    if m is None:
        return None
    return m.group(m.lastindex or 1)
