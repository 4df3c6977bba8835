"""A stand-in for PyTorch's CUDA caching allocator, for machines without a GPU.

It keeps the allocator's books the way c10/cuda/CUDACachingAllocator.cpp does, in
miniature: requests rounded up to 512 bytes; blocks of at most 1 MiB from the small
pool's 2 MiB segments, larger ones from the large pool (a 20 MiB segment for requests
under 10 MiB, else the request rounded up to 2 MiB); a freed block is cached, and
reused for a request it fits (best fit, the rest split off; no coalescing, which is
where this miniature fragments sooner than the real one). Its counters carry the
real names, nested as ``torch.cuda.memory_stats_as_nested_dict()`` returns them
(``allocated_bytes.all.current`` is ``stats["allocated_bytes"]["all"]["current"]``).
Segments lie at device-like addresses; ``_record_memory_history`` and ``_snapshot``
keep and return the history as ``torch.cuda.memory`` does (segments with the blocks
that tile them, ``device_traces`` of alloc/free/segment_alloc/oom entries with frames),
so PyTorch's own ``torch.cuda._memory_viz`` reads it. Past ``capacity`` a new
segment raises a real ``torch.cuda.OutOfMemoryError`` with the real message.

:func:`install` puts it, and a CUDA event stand-in, where the agent looks
(``torch.cuda``), in a training process of a CPU build of torch.
"""

from __future__ import annotations

import itertools
import sys
import time
import types
from collections import defaultdict, deque

KB, MB = 1 << 10, 1 << 20
ROUND, SMALL, SMALL_SEGMENT, MIN_LARGE, LARGE_SEGMENT = 512, MB, 2 * MB, 10 * MB, 20 * MB
STATS = ("current", "peak", "allocated", "freed")
POOLS = ("all", "small_pool", "large_pool")
ADDRESS = 0x7F0000000000  # where the stand-in's first segment lies (as a device pointer)
Block = tuple[int, int, int]  # a cached block: size, segment, offset
COUNTED = ("allocated_bytes", "reserved_bytes", "active_bytes", "requested_bytes",
           "allocation", "segment", "active", "inactive_split", "inactive_split_bytes")  # fmt: skip


class StandInAllocator:
    """``malloc``/``free`` by handle; ``memory_stats_as_nested_dict`` as torch's."""

    def __init__(self, capacity: int = 80 << 30) -> None:
        self.books: dict[str, dict[str, dict[str, int]]] = {
            name: {pool: dict.fromkeys(STATS, 0) for pool in POOLS} for name in COUNTED
        }
        # pool -> free blocks (size, segment, offset); handle -> pool, size, requested,
        # segment, offset; segment -> (address, size, pool)
        self.cached: dict[str, list[Block]] = defaultdict(list)
        self.live: dict[int, tuple[str, int, int, int, int]] = {}
        self.segments: list[tuple[int, int, str]] = []
        self.handles = itertools.count(1)
        self.device_allocs = 0
        self.ooms = 0
        self.capacity = capacity  # bytes the device has: past it, OutOfMemoryError
        self.history: deque[dict[str, object]] | None = None  # while recording

    def _add(self, name: str, pool: str, amount: int) -> None:
        for p in ("all", pool):
            stat = self.books[name][p]
            stat["current"] += amount
            stat["allocated" if amount > 0 else "freed"] += abs(amount)
            stat["peak"] = max(stat["peak"], stat["current"])

    def malloc(self, nbytes: int) -> int:
        size = max(ROUND, -(-nbytes // ROUND) * ROUND)
        pool = "small_pool" if size <= SMALL else "large_pool"
        fits = [b for b in self.cached[pool] if b[0] >= size]
        if fits:
            block, seg, offset = min(fits)
            self.cached[pool].remove((block, seg, offset))
            self._add("inactive_split_bytes", pool, -block)
            self._add("inactive_split", pool, -1)
        else:
            block, seg, offset = self._segment(pool, size, nbytes), len(self.segments) - 1, 0
        if block > size:  # split: the rest stays cached
            self.cached[pool].append((block - size, seg, offset + size))
            self._add("inactive_split_bytes", pool, block - size)
            self._add("inactive_split", pool, 1)
        grown = (("allocated_bytes", size), ("active_bytes", size), ("requested_bytes", nbytes),
                 ("allocation", 1), ("active", 1))  # fmt: skip
        for name, amount in grown:
            self._add(name, pool, amount)
        handle = next(self.handles)
        self.live[handle] = (pool, size, nbytes, seg, offset)
        self._trace("alloc", self.segments[seg][0] + offset, size)
        return handle

    def _segment(self, pool: str, size: int, nbytes: int) -> int:
        if pool == "small_pool":
            segment = SMALL_SEGMENT
        elif size < MIN_LARGE:
            segment = LARGE_SEGMENT
        else:
            segment = -(-size // SMALL_SEGMENT) * SMALL_SEGMENT
        reserved = self.books["reserved_bytes"]["all"]["current"]
        if reserved + segment > self.capacity:  # as c10's malloc: count, record, raise
            self.ooms += 1
            self._trace("oom", 0, nbytes, device_free=self.capacity - reserved)
            raise _oom(nbytes, self.capacity, reserved)
        self._add("reserved_bytes", pool, segment)
        self._add("segment", pool, 1)
        self.device_allocs += 1
        address = ADDRESS + sum(s for _, s, _ in self.segments)
        self.segments.append((address, segment, pool))
        self._trace("segment_alloc", address, segment)
        return segment

    def free(self, handle: int) -> None:
        pool, size, nbytes, seg, offset = self.live.pop(handle)
        shrunk = (("allocated_bytes", -size), ("active_bytes", -size),
                  ("requested_bytes", -nbytes), ("allocation", -1), ("active", -1),
                  ("inactive_split_bytes", size), ("inactive_split", 1))  # fmt: skip
        for name, amount in shrunk:
            self._add(name, pool, amount)
        self.cached[pool].append((size, seg, offset))
        for action in ("free_requested", "free_completed"):
            self._trace(action, self.segments[seg][0] + offset, size)

    def memory_stats_as_nested_dict(self, device: object = None) -> dict[str, object]:
        """What ``torch.cuda.memory_stats_as_nested_dict()`` returns (a fresh copy)."""
        stats: dict[str, object] = {
            name: {pool: dict(s) for pool, s in pools.items()} for name, pools in self.books.items()
        }
        oversize = dict.fromkeys(STATS, 0)
        stats |= {"oversize_allocations": oversize, "oversize_segments": dict(oversize),
                  "num_alloc_retries": 0, "num_ooms": self.ooms, "num_sync_all_streams": 0,
                  "num_device_alloc": self.device_allocs, "num_device_free": 0,
                  "max_split_size": -1}  # fmt: skip
        return stats

    # -- torch.cuda.memory's history (the snapshot pytorch.org/memory_viz reads) ------
    def _trace(self, action: str, addr: int, size: int, **more: int) -> None:
        if self.history is not None:
            frames = [{"filename": f.f_code.co_filename, "line": f.f_lineno,
                       "name": f.f_code.co_name} for f in _caller_frames()]  # fmt: skip
            entry = {"action": action, "addr": addr, "size": size, "stream": 0,
                     "time_us": time.time_ns() // 1000, "frames": frames, **more}  # fmt: skip
            self.history.append(entry)

    def _record_memory_history(
        self, enabled: str | None = "all", *, max_entries: int = 100_000, **_: object
    ) -> None:
        """``torch.cuda.memory._record_memory_history``: None stops and drops the trace."""
        self.history = None if enabled is None else deque(maxlen=max_entries)

    def _snapshot(self, device: object = None) -> dict[str, object]:
        """``torch.cuda.memory._snapshot()``: segments with their blocks, and the trace."""
        return {"segments": [self._segment_doc(i) for i in range(len(self.segments))],
                "device_traces": [list(self.history or ())],
                "allocator_settings": {"PYTORCH_CUDA_ALLOC_CONF": ""}}  # fmt: skip

    def _segment_doc(self, seg: int) -> dict[str, object]:
        address, total, pool = self.segments[seg]
        blocks = [(o, s, n, "active_allocated") for _, s, n, g, o in self.live.values() if g == seg]
        blocks += [(o, s, 0, "inactive") for c in self.cached.values() for s, g, o in c if g == seg]
        docs = [{"address": address + o, "size": s, "requested_size": n, "state": state,
                 "frames": []} for o, s, n, state in sorted(blocks)]  # fmt: skip
        allocated = sum(int(b["size"]) for b in docs if b["state"] == "active_allocated")
        return {"device": 0, "address": address, "total_size": total, "stream": 0,
                "segment_type": pool.split("_")[0], "allocated_size": allocated,
                "active_size": allocated, "requested_size": sum(b[2] for b in blocks),
                "blocks": docs}  # fmt: skip


def _caller_frames() -> list[types.FrameType]:
    """The training script's frames above the allocator (the stack the real one keeps)."""
    frame, out = sys._getframe(3), []
    while frame is not None and len(out) < 4:
        out.append(frame)
        frame = frame.f_back
    return out


def _oom(nbytes: int, capacity: int, reserved: int) -> Exception:
    import torch

    return torch.cuda.OutOfMemoryError(
        f"CUDA out of memory. Tried to allocate {nbytes / MB:.2f} MiB. GPU 0 has a total "
        f"capacity of {capacity / (1 << 30):.2f} GiB of which {(capacity - reserved) / MB:.2f} "
        f"MiB is free. Of the allocated memory {reserved / MB:.2f} MiB is reserved by PyTorch."
    )


class StandInEvent:
    """``torch.cuda.Event(enable_timing=True)``: a completed event 1 ms after the last."""

    clock = itertools.count()

    def __init__(self, enable_timing: bool = False) -> None:
        self.t = 0

    def record(self) -> None:
        self.t = next(self.clock)

    def synchronize(self) -> None:
        pass

    def elapsed_time(self, end: StandInEvent) -> float:
        return float(end.t - self.t)


def install(allocator: StandInAllocator) -> None:
    """Make this CPU-only torch look, to the agent, like a process that uses CUDA."""
    import torch

    torch.cuda._initialized = True  # what torch.cuda.is_initialized() reads
    torch.cuda.Event = StandInEvent  # type: ignore[misc,assignment]
    torch.cuda.memory_stats_as_nested_dict = allocator.memory_stats_as_nested_dict  # type: ignore[assignment]
    torch.cuda.memory._record_memory_history = allocator._record_memory_history  # type: ignore[assignment]
    torch.cuda.memory._snapshot = allocator._snapshot  # type: ignore[assignment]
