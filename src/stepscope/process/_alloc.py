"""Memory freed by a stepscope process goes back to the system.

A day-long job's rules copy and drop frames of 10^5-10^6 rows. glibc's malloc raises
its mmap threshold after such frees (up to 32 MB), so later large arrays come from the
heap and their memory stays with the process; Arrow's default pool (mimalloc) keeps
what it freed too. Measured on a 24-hour imported node (576,000 steps): the rules'
evaluation held 605 MB when done and peaked at 666 MB; with a fixed 128 KiB threshold
and Arrow on the system allocator, 229 MB when done and 532 MB at the peak
(BENCHMARKS.md, "SageMaker import"). Only stepscope's own processes (the CLI, the rule
runner) call this: a training process keeps the allocator it has.
"""

from __future__ import annotations

import ctypes

M_MMAP_THRESHOLD = -3  # glibc's mallopt parameter numbers (malloc.h)
M_ARENA_MAX = -8
THRESHOLD = 128 * 1024  # glibc's default, kept fixed: large arrays are mmap'd, then unmapped


def give_back_freed_memory() -> None:
    """Make large frees return memory to the system in this process (best effort: on
    a platform without glibc or pyarrow, nothing changes)."""
    try:
        libc = ctypes.CDLL("libc.so.6")  # not find_library: it runs ldconfig
        libc.mallopt(M_MMAP_THRESHOLD, THRESHOLD)
        # One heap for all threads: Arrow's reader threads each kept an arena of
        # freed blocks that malloc_trim did not give back.
        libc.mallopt(M_ARENA_MAX, 1)
    except (OSError, AttributeError):  # not glibc
        pass
    try:
        import pyarrow as pa

        pa.set_memory_pool(pa.system_memory_pool())
    except (ImportError, NotImplementedError):
        pass
