"""The sampler's view of the job's processes (sampler/_tree.py, _tasks.py): real jobs.

Short-lived DataLoader workers are counted (found at the next sample, counted from
their start, and through their parent once reaped); the job's threads in disk sleep
and its storage bytes are recorded. Nothing asserts how long anything took.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from stepscope.sampler._tree import ProcessTree

pytestmark = pytest.mark.process

# Workers that live about 0.3 s each (an epoch of 4 batches, not persistent), each
# burning CPU in __getitem__; at the end the script prints what its reaped children
# used (RUSAGE_CHILDREN) and waits, so that the last reading follows the last reap.
SHORT_WORKERS = textwrap.dedent(
    """
    import json, resource, time, torch
    from torch.utils.data import DataLoader, Dataset

    class Busy(Dataset):
        def __len__(self):
            return 16
        def __getitem__(self, i):
            end = time.thread_time() + 0.02
            while time.thread_time() < end:
                pass
            return torch.zeros(4)

    torch.set_num_threads(1)
    loader = DataLoader(Busy(), batch_size=4, num_workers=2)
    for epoch in range(12):
        for batch in loader:
            pass
        time.sleep(0.3)  # between epochs: no worker alive
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    print(json.dumps({"children_cpu": used.ru_utime + used.ru_stime}), flush=True)
    time.sleep(0.6)
    """
)

WRITER = textwrap.dedent(
    """
    import os, sys, threading, time
    block, end = b"x" * 2**20, time.monotonic() + 4
    def write(i):
        with open(os.path.join(sys.argv[1], f"shard-{i}.bin"), "wb") as f:
            f.write(block * 8)
            os.fsync(f.fileno())
    while time.monotonic() < end:
        if sys.argv[2] == "write":
            shards = [threading.Thread(target=write, args=(i,)) for i in (0, 1)]
            for t in shards:
                t.start()
            for t in shards:
                t.join()
        else:
            sum(i * i for i in range(20000))
    """
)


def watch(args: list[str]) -> tuple[list[dict[str, float | None]], str]:
    """Read the job's ProcessTree every 0.1 s until it exits: its readings and stdout."""
    job = subprocess.Popen([sys.executable, *args], stdout=subprocess.PIPE, text=True)
    tree, rows, last = ProcessTree(job.pid), [], time.monotonic()
    tree.read(None)
    while job.poll() is None:
        time.sleep(0.1)
        now = time.monotonic()
        cpu, _ = tree.read(now - last)
        if cpu is not None:
            dt = now - last
            rows.append({"dt": dt, "cpu": cpu, "main": tree.main_cpu, "io_wait": tree.io_wait,
                         "write_bps": tree.io_bps[1], "pool_wait": tree.pool_run_wait})  # fmt: skip
        last = now
    out, _ = job.communicate(timeout=60)
    return rows, out


def test_short_lived_dataloader_workers_are_counted() -> None:
    rows, out = watch(["-c", SHORT_WORKERS])
    children = json.loads(out.strip().splitlines()[-1])["children_cpu"]
    assert children > 0.5  # the workers truly worked: 12 epochs of 16 x 20 ms
    pool_seconds = sum(((r["cpu"] or 0.0) - (r["main"] or 0.0)) * (r["dt"] or 0.0) for r in rows)
    # Before: a worker counted from the (1 s) listing that found it, most never.
    assert pool_seconds / 100.0 >= 0.8 * children
    assert pool_seconds / 100.0 <= 1.2 * children + 0.1  # never counted twice


# Two persistent workers on one core (the job pinned to it): both burn CPU, so each
# waits for the core while the other runs; or both sleep, and wait for no core.
PINNED_WORKERS = textwrap.dedent(
    """
    import os, sys, time, torch
    from torch.utils.data import DataLoader, Dataset

    class Items(Dataset):
        def __len__(self):
            return 64
        def __getitem__(self, i):
            if sys.argv[1] == "sleep":
                time.sleep(0.05)
            else:
                end = time.thread_time() + 0.05
                while time.thread_time() < end:
                    pass
            return torch.zeros(4)

    os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    torch.set_num_threads(1)
    loader = DataLoader(Items(), batch_size=4, num_workers=2, persistent_workers=True)
    end = time.monotonic() + 4
    while time.monotonic() < end:
        for batch in loader:
            pass
    """
)


def test_workers_waiting_for_a_core_are_recorded() -> None:
    """``pool_run_wait``: the workers' main threads' wait for a core, summed."""
    busy, _ = watch(["-c", PINNED_WORKERS, "busy"])
    asleep, _ = watch(["-c", PINNED_WORKERS, "sleep"])
    busy_waits = [r["pool_wait"] for r in busy if r["pool_wait"] is not None]
    sleep_waits = [r["pool_wait"] for r in asleep if r["pool_wait"] is not None]
    assert busy_waits and sleep_waits  # known once a worker was read twice
    # two busy workers on one core: together they wait about one interval in each
    assert statistics.median(busy_waits) >= 40.0, busy_waits
    assert statistics.median(sleep_waits) < 20.0 <= statistics.median(busy_waits), sleep_waits


def test_threads_in_disk_sleep_and_written_bytes(tmp_path: Path) -> None:
    rows, _ = watch(["-c", WRITER, str(tmp_path), "write"])
    waits = [r["io_wait"] for r in rows if r["io_wait"] is not None]
    assert len(waits) >= 10 and max(waits) > 0
    written = sum((r["write_bps"] or 0.0) * (r["dt"] or 0.0) for r in rows)
    assert written > 32 * 2**20  # 16 MB a round, many rounds


def test_a_computing_job_has_no_disk_sleep(tmp_path: Path) -> None:
    """The silent twin: the same script computing instead of writing."""
    rows, _ = watch(["-c", WRITER, str(tmp_path), "compute"])
    waits = [r["io_wait"] for r in rows if r["io_wait"] is not None]
    assert len(waits) >= 10 and statistics.median(waits) == 0
    written = sum((r["write_bps"] or 0.0) * (r["dt"] or 0.0) for r in rows)
    assert written < 2**20


# The watched command execs (a shell that becomes python, as the first read may catch
# any job between its fork and its exec), then forks a worker that burns CPU.
EXEC_THEN_FORK = textwrap.dedent(
    """
    import os, sys, time
    sys.stdin.readline()  # wait until the watcher has read the tree once more
    if os.fork() == 0:
        end = time.thread_time() + 0.5
        while time.thread_time() < end:
            pass
        os._exit(0)
    os.wait()
    """
)


def test_workers_of_a_command_read_before_its_exec_are_pool_children() -> None:
    with subprocess.Popen(
        ["sh", "-c", 'read go; exec "$0" -c "$1"', sys.executable, EXEC_THEN_FORK],
        stdin=subprocess.PIPE, text=True,
    ) as job:  # fmt: skip
        tree = ProcessTree(job.pid)
        tree.read(None)  # the shell's command line, before the exec
        assert job.stdin is not None
        job.stdin.write("go\ngo\n")
        job.stdin.flush()
        pool, last = 0.0, time.monotonic()
        while job.poll() is None:
            time.sleep(0.05)
            now = time.monotonic()
            cpu, _ = tree.read(now - last)
            if cpu is not None and tree.main_cpu is not None:
                pool += (cpu - tree.main_cpu) * (now - last) / 100.0
            last = now
        # Before: the worker matched the shell's command line, not python's, and its
        # CPU counted as the main process's.
        assert pool >= 0.35
