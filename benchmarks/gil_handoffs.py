"""What the agent's writer thread costs the training thread in GIL waits, per operation.

The MLP loop of ``benchmarks/_mlp_loop.py`` trains on the main thread while a
background thread repeats one writer operation every 50 ms. Operations take
turns block by block, in one process, so that they are compared side by side:

* ``idle``: the thread wakes and does nothing (the floor);
* ``write``: ``Store.write_bytes`` of a 100 KB file (the agent's local write);
* ``write_open``: the same file written the way it was before 2026-11-25
  (``os.makedirs`` + ``open()`` + ``os.replace``), for comparison;
* ``encode``: ``encode_parquet`` of a 10,000-row steps segment;
* ``batch``: a flush's steps batch of 1,230 rows (2 s of a 1.6 ms loop): the
  step buffer's ``take`` and ``AgentWriter._steps_batch`` (from a pool of
  buffers filled beforehand: the training thread fills it, one row a step);
* ``poll``: the profiling thread's look for new control requests (once a
  second in every watched process), with one acknowledged request in the folder
  (``control.Requests``: the folder's mtime first);
* ``poll_list``: the same look by listing the folder (the poll before 2026-11-25,
  and still the poll of a folder changed in the last seconds).

For each, per operation: how often the training thread had to sleep (its
voluntary context switches: waits for the GIL, on this loop) and how long it
was blocked (wall time minus CPU time minus run-queue time, from
``/proc/self/task/<tid>/schedstat``), minus the ``idle`` floor. Linux only.
These are counts and sums of a mechanism, steadier than loop-time ratios on a
shared machine.

    python benchmarks/gil_handoffs.py --rounds 20
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa

sys.path.insert(0, str(Path(__file__).parent))

from _mlp_loop import Loop
from _switched import thread_state

from stepscope.agent._faults import FaultBoundary
from stepscope.agent._stepbuf import PyStepBuffer, new_step_buffer
from stepscope.agent._writer import STEP_DICT, AgentWriter, Clock, Identity
from stepscope.jobfolder import control
from stepscope.store import Store, encode_parquet, open_store

POOL = 800  # filled step buffers, one per ``batch`` call


def write_open(store: Store, key: str, data: bytes) -> None:
    """The local write before 2026-11-25: Python's file object and makedirs."""
    full = store.path(key)
    os.makedirs(os.path.dirname(full), exist_ok=True)
    with open(f"{full}.tmp-{os.getpid()}", "wb") as f:
        f.write(data)
    os.replace(f"{full}.tmp-{os.getpid()}", full)


def operations(folder: str) -> dict[str, Callable[[], object]]:
    store = open_store(folder)
    clock = Clock()
    writer = AgentWriter(
        store, Identity(0, 0, "node", 1), clock, FaultBoundary(None, {}), PyStepBuffer()
    )
    t = time.perf_counter()
    row = ("train", 0, t, t + 1.6e-3, 1e-4, 5e-4, 7e-4, 2e-4, 0.0, 0.0, False, None)
    rows = [(row[0], i, *row[2:]) for i in range(1230)]

    def filled(n: int) -> Any:
        buf = new_step_buffer()
        for r in rows * n:
            buf.append(r)
        return buf

    table = pa.Table.from_batches([writer._steps_batch(filled(8).take(clock.wall0, clock.perf0))])
    pool = [filled(1) for _ in range(POOL)]

    def batch() -> None:
        buf = pool.pop() if pool else filled(1)  # (the pool outlasts --rounds 20)
        writer._steps_batch(buf.take(clock.wall0, clock.perf0))

    segment = encode_parquet(table, STEP_DICT)
    store.write_json(f"{control.CONTROL}/profile-1.json", {"windows": []})
    store.write_json(f"{control.ACK}/profile-1.json", {"accepted": True})
    seen = {"profile-1.json"}
    requests = control.Requests(store, "profile")
    requests.pending()
    return {
        "idle": lambda: None,
        "write": lambda: store.write_bytes("steps/rank-0/a.parquet", segment),
        "write_open": lambda: write_open(store, "steps/rank-0/b.parquet", segment),
        "encode": lambda: encode_parquet(table, STEP_DICT),
        "batch": batch,
        "poll": requests.pending,
        "poll_list": lambda: control.pending(store, "profile", seen),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--rounds", type=int, default=20, help="blocks of each operation")
    p.add_argument("--steps", type=int, default=400, help="training steps per block")
    a = p.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        ops = operations(folder)
        current, done = ["idle"], [0]

        def background() -> None:
            while True:
                time.sleep(0.05)
                ops[current[0]]()
                done[0] += 1

        threading.Thread(target=background, daemon=True).start()
        loop, tid = Loop(threads=1), threading.get_native_id()
        loop.run(a.steps)
        totals = {k: [0, 0, 0.0] for k in ops}  # operations, switches, blocked s
        for r in range(a.rounds):
            names = list(ops)[r % len(ops) :] + list(ops)[: r % len(ops)]
            for name in names:
                current[0] = name
                time.sleep(0.06)  # the previous operation's last call ends
                n0, (_, v0, b0) = done[0], thread_state(tid)
                loop.run(a.steps)
                _, v1, b1 = thread_state(tid)
                t = totals[name]
                t[0], t[1], t[2] = t[0] + done[0] - n0, t[1] + v1 - v0, t[2] + b1 - b0
    n0, sw0, blocked0 = totals["idle"]
    print(f"{'operation':12s} {'calls':>6s} {'sleeps/call':>12s} {'blocked us/call':>16s}")
    for name, (n, sw, blocked) in totals.items():
        floor = (0.0, 0.0) if name == "idle" else (sw0 / n0, blocked0 / n0)
        sw_c, us_c = sw / n - floor[0], (blocked / n - floor[1]) * 1e6
        extra = "" if name == "idle" else " (minus idle)"
        print(f"{name:12s} {n:6d} {sw_c:12.2f} {us_c:16.0f}{extra}")


if __name__ == "__main__":
    main()
