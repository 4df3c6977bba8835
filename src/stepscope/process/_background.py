"""How the launcher's helper processes stay out of the training's way.

The node's sampler and the live rule runner run beside the training on the
same cores. When a core is contended, the training must win: the launcher
starts them with ``--nice`` (a lower CPU priority, taken at their start, before
they create any thread) and with one thread for the numeric libraries (numpy's
OpenBLAS pool otherwise keeps a thread per core spinning after each call; the
live rule runner's DuckDB connections use one thread too). Measured in
BENCHMARKS.md ("Agent overhead").
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import os
import sys
from collections.abc import Iterator, Mapping
from typing import NoReturn

HELPER_NICE = 10
ONE_THREAD = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def helper_env(base: Mapping[str, str]) -> dict[str, str]:
    """``base`` with the numeric libraries held to one thread."""
    return {**base, **ONE_THREAD}


def add_nice_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--nice", type=int, default=0, help="lower this process's CPU priority by this much"
    )


def lower_priority(nice: int) -> None:
    """Lower this process's CPU priority by ``nice``, every thread of it included.

    ``os.nice`` sets the calling thread (and the threads it starts later); threads
    a library started at import (pyarrow's) are set one by one: on Linux a thread
    id is a ``PRIO_PROCESS`` id. Where the system refuses, we run as we are.
    """
    if not nice:
        return
    with contextlib.suppress(OSError):
        os.nice(nice)
    target = os.getpriority(os.PRIO_PROCESS, 0)
    tasks = "/proc/self/task"
    for tid in os.listdir(tasks) if os.path.isdir(tasks) else []:
        with contextlib.suppress(OSError, ValueError):
            os.setpriority(os.PRIO_PROCESS, int(tid), target)


def exit_at_once(code: int) -> NoReturn:
    """End a helper process whose work is done and stored, without the interpreter's
    teardown: freeing pandas, DuckDB and pyarrow took the rule runner 0.5-0.9 s and the
    sampler 0.2-0.3 s after their last write, and `stepscope run` waits for them
    (BENCHMARKS.md, "What a run costs"). Their files are written whole (atomically)
    before this; only stdout and stderr are left buffered, flushed here."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code)


@contextlib.contextmanager
def imports_without_gc() -> Iterator[None]:
    """Import a helper's libraries with the cyclic garbage collector off, then freeze
    what they made. pandas', numpy's and pyarrow's imports make about 10^5 objects that
    the collector walks again and again while they load (a seventh of their imports'
    CPU) and at every later full collection; frozen, they are never walked again.
    Objects are still freed when their last reference goes."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if enabled:
            gc.enable()
