"""Detailed traces and Python profiles: kept as they are, linked as windows of a rank.

A file's rank is that of the trace node id named in its path (``.../<node id>/...``),
rank 0 when none is. Python profiles are grouped by their folder (one window each);
the folder name ``<start>_<phase>-<step>_<end>_<phase>-<step>`` gives the steps.
"""

from __future__ import annotations

import gzip
import posixpath
import re

from stepscope.importers.sagemaker._ranks import RankOf
from stepscope.importers.sagemaker._source import Listing
from stepscope.importers.sagemaker._tally import Tally
from stepscope.importers.sagemaker._windows import write_window
from stepscope.store import Store

_STEP = re.compile(r"-(\d+)(?:_|$)")
_PY_SUFFIX = {"python_stats": ".pstats", "python_stats.json": ".pyinstrument.json",
              "python_stats.html": ".html"}  # fmt: skip


def import_artifacts(
    src: Store, listing: Listing, out: Store, ranks: dict[str, RankOf], tally: Tally
) -> None:
    """Keep every detailed trace and Python profile of the source."""
    for i, key in enumerate(listing.detailed):
        data = src.read_bytes(key)
        if not key.endswith(".gz"):
            data = gzip.compress(data, mtime=0)
        write_window(out, _rank(key, ranks), "detailed", (0, 0), i + len(listing.timelines) + 1,
                     {".pt.trace.json.gz": data}, key)  # fmt: skip
        tally.read("detailed traces kept")
    folders: dict[str, list[str]] = {}
    for key in listing.python:
        folders.setdefault(posixpath.dirname(key), []).append(key)
    for i, (folder, keys) in enumerate(sorted(folders.items())):
        steps = [int(s) for s in _STEP.findall(posixpath.basename(folder))]
        span = (steps[0], steps[-1]) if steps else (0, 0)
        files = {}
        for key in keys:
            name = posixpath.basename(key)
            files[_PY_SUFFIX.get(name, "." + name)] = src.read_bytes(key)
        write_window(out, _rank(folder, ranks), "python", span, i, files, folder)
        tally.read("python profiles kept", len(keys))


def _rank(key: str, ranks: dict[str, RankOf]) -> int:
    parts = set(key.split("/"))
    for nid, where in sorted(ranks.items()):
        if nid in parts or any(p.startswith(nid) for p in parts):
            return where.rank
    return 0
