"""A derived file beside each PyTorch trace that keeps its kernel breakdown
(docs/format.md, "profiling/"), so ``show``, the report and the dashboard parse a
trace once, not every time they are asked.

``<trace>.kernels.json`` holds the breakdown with every kernel (callers cut the top
list), and the trace's size and modification time when it was made: a trace
changed since (a window written again under the same name) makes it stale, and it
is made again. Only local job folders get one; a folder that cannot be written (a
read-only copy) just parses each time. The file is disposable: deleting it costs
one parse.
"""

from __future__ import annotations

import contextlib
import json
import os

from stepscope.read._kernels import (
    DeviceBusy,
    KernelBreakdown,
    KindTime,
    NoKernels,
    TopKernel,
)
from stepscope.store import Store

SUFFIX = ".kernels.json"
VERSION = 1  # of the derived file: another version is ignored and made again


def cache_key(store: Store, trace: str) -> tuple[str, list[int]] | None:
    """The cache file's key and the trace's ``[size, mtime_ns]``; None where there is
    no local file to stat (object stores)."""
    local = store.local_path(trace)
    if local is None:
        return None
    try:
        st = os.stat(local)
    except OSError:
        return None
    return trace + SUFFIX, [st.st_size, st.st_mtime_ns]


def load_cached(store: Store, key: str, stamp: list[int]) -> KernelBreakdown | NoKernels | None:
    """The breakdown kept under ``key`` if it was made from a trace stamped ``stamp``;
    None when there is none, it is stale, or it does not decode (then it is remade)."""
    local = store.local_path(key)
    if local is None or not os.path.exists(local):
        return None
    try:
        with open(local, encoding="utf-8") as f:
            doc = json.load(f)
        if doc.get("version") != VERSION or doc.get("trace") != stamp:
            return None
        return _decode(doc["breakdown"])
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def save_cached(
    store: Store, key: str, stamp: list[int], result: KernelBreakdown | NoKernels
) -> None:
    """Keep ``result`` under ``key``; a folder that cannot be written keeps nothing."""
    doc = {"version": VERSION, "trace": stamp, "breakdown": result.to_json()}
    # a read-only folder, a full disk: nothing kept, the next read parses again
    with contextlib.suppress(OSError):
        store.write_bytes(key, json.dumps(doc, separators=(",", ":")).encode())


def _decode(raw: dict[str, object]) -> KernelBreakdown | NoKernels:
    if "not_applicable" in raw:
        return NoKernels(str(raw["not_applicable"]))
    kinds, top, devices = raw["kinds"], raw["top"], raw["devices"]
    if not isinstance(kinds, list) or not isinstance(top, list) or not isinstance(devices, list):
        raise TypeError("breakdown lists expected")
    events, kernels = raw["events"], raw["kernels"]
    if not isinstance(events, int) or not isinstance(kernels, int):
        raise TypeError("event counts expected")
    return KernelBreakdown(
        events,
        kernels,
        [KindTime(**k) for k in kinds],
        [TopKernel(**t) for t in top],
        [DeviceBusy(**d) for d in devices],
    )
