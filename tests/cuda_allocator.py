"""A stand-in for PyTorch's CUDA caching allocator, for machines without a GPU.

It keeps the allocator's books the way c10/cuda/CUDACachingAllocator.cpp does, in
miniature: requests rounded up to 512 bytes; blocks of at most 1 MiB from the small
pool's 2 MiB segments, larger ones from the large pool (a 20 MiB segment for requests
under 10 MiB, else the request rounded up to 2 MiB); a freed block is cached, and
reused for a request it fits (best fit, the rest split off; no coalescing, which is
where this miniature fragments sooner than the real one). Its counters carry the
real names, nested as ``torch.cuda.memory_stats_as_nested_dict()`` returns them
(``allocated_bytes.all.current`` is ``stats["allocated_bytes"]["all"]["current"]``).

:func:`install` puts it, and a CUDA event stand-in, where the agent looks
(``torch.cuda``), in a training process of a CPU build of torch.
"""

from __future__ import annotations

import itertools
from collections import defaultdict

KB, MB = 1 << 10, 1 << 20
ROUND, SMALL, SMALL_SEGMENT, MIN_LARGE, LARGE_SEGMENT = 512, MB, 2 * MB, 10 * MB, 20 * MB
STATS = ("current", "peak", "allocated", "freed")
POOLS = ("all", "small_pool", "large_pool")
COUNTED = ("allocated_bytes", "reserved_bytes", "active_bytes", "requested_bytes",
           "allocation", "segment", "active", "inactive_split", "inactive_split_bytes")  # fmt: skip


class StandInAllocator:
    """``malloc``/``free`` by handle; ``memory_stats_as_nested_dict`` as torch's."""

    def __init__(self) -> None:
        self.books: dict[str, dict[str, dict[str, int]]] = {
            name: {pool: dict.fromkeys(STATS, 0) for pool in POOLS} for name in COUNTED
        }
        self.cached: dict[str, list[int]] = defaultdict(list)  # pool -> free block sizes
        self.live: dict[int, tuple[str, int, int]] = {}  # handle -> pool, size, requested
        self.handles = itertools.count(1)
        self.device_allocs = 0

    def _add(self, name: str, pool: str, amount: int) -> None:
        for p in ("all", pool):
            stat = self.books[name][p]
            stat["current"] += amount
            stat["allocated" if amount > 0 else "freed"] += abs(amount)
            stat["peak"] = max(stat["peak"], stat["current"])

    def malloc(self, nbytes: int) -> int:
        size = max(ROUND, -(-nbytes // ROUND) * ROUND)
        pool = "small_pool" if size <= SMALL else "large_pool"
        fits = [b for b in self.cached[pool] if b >= size]
        if fits:
            block = min(fits)
            self.cached[pool].remove(block)
            self._add("inactive_split_bytes", pool, -block)
            self._add("inactive_split", pool, -1)
        else:
            block = self._segment(pool, size)
        if block > size:  # split: the rest stays cached
            self.cached[pool].append(block - size)
            self._add("inactive_split_bytes", pool, block - size)
            self._add("inactive_split", pool, 1)
        grown = (("allocated_bytes", size), ("active_bytes", size), ("requested_bytes", nbytes),
                 ("allocation", 1), ("active", 1))  # fmt: skip
        for name, amount in grown:
            self._add(name, pool, amount)
        handle = next(self.handles)
        self.live[handle] = (pool, size, nbytes)
        return handle

    def _segment(self, pool: str, size: int) -> int:
        if pool == "small_pool":
            segment = SMALL_SEGMENT
        elif size < MIN_LARGE:
            segment = LARGE_SEGMENT
        else:
            segment = -(-size // SMALL_SEGMENT) * SMALL_SEGMENT
        self._add("reserved_bytes", pool, segment)
        self._add("segment", pool, 1)
        self.device_allocs += 1
        return segment

    def free(self, handle: int) -> None:
        pool, size, nbytes = self.live.pop(handle)
        shrunk = (("allocated_bytes", -size), ("active_bytes", -size),
                  ("requested_bytes", -nbytes), ("allocation", -1), ("active", -1),
                  ("inactive_split_bytes", size), ("inactive_split", 1))  # fmt: skip
        for name, amount in shrunk:
            self._add(name, pool, amount)
        self.cached[pool].append(size)

    def memory_stats_as_nested_dict(self, device: object = None) -> dict[str, object]:
        """What ``torch.cuda.memory_stats_as_nested_dict()`` returns (a fresh copy)."""
        stats: dict[str, object] = {
            name: {pool: dict(s) for pool, s in pools.items()} for name, pools in self.books.items()
        }
        oversize = dict.fromkeys(STATS, 0)
        stats |= {"oversize_allocations": oversize, "oversize_segments": dict(oversize),
                  "num_alloc_retries": 0, "num_ooms": 0, "num_sync_all_streams": 0,
                  "num_device_alloc": self.device_allocs, "num_device_free": 0,
                  "max_split_size": -1}  # fmt: skip
        return stats


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
