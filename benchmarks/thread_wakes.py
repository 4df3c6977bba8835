"""How often the training thread sleeps under `stepscope run`, and who wakes.

Runs the MLP loop of ``benchmarks/_mlp_loop.py`` bare and under `stepscope run`
(default settings), alternating ``--rounds`` times; after ``--warmup`` seconds
it reads every thread's voluntary context switches and CPU time from procfs
over a window of ``--window`` seconds. The training thread does not sleep in a
bare run of this loop (no I/O, one torch thread): under `stepscope run` each
of its sleeps is a wait for the GIL that an agent thread took, ~70-100 us on
this VM (BENCHMARKS.md, "GIL handoffs"). Counts, not times: steady on a
loaded host. ``--src`` measures another checkout (its ``src`` folder, with its
C extension built in place: ``python setup.py build_ext --inplace`` there).
Linux only.

    python benchmarks/thread_wakes.py --rounds 2
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).parent
LOOP = [sys.executable, str(HERE / "_mlp_loop.py"), "--steps", "1000000", "--threads", "1"]


def threads(pid: int) -> dict[int, tuple[str, int, float]]:
    """(name, voluntary switches, CPU s) of each thread of ``pid``."""
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        base = f"/proc/{pid}/task/{tid}"
        with open(f"{base}/status") as f:
            status = f.read()
        with open(f"{base}/schedstat") as f:
            cpu_ns = int(f.read().split()[0])
        name = status.split("Name:", 1)[1].split("\n", 1)[0].strip()
        vol = int(status.split("\nvoluntary_ctxt_switches:")[1].split()[0])
        out[int(tid)] = (name, vol, cpu_ns / 1e9)
    return out


def _training_pid(proc: subprocess.Popen[bytes], watched: bool) -> int:
    """The training process: the command itself, or the launcher's child running it."""
    if not watched:
        return proc.pid
    import psutil

    for _ in range(200):
        for child in psutil.Process(proc.pid).children():
            if "_mlp_loop.py" in " ".join(child.cmdline()):
                return int(child.pid)
        time.sleep(0.05)
    raise RuntimeError("the training process did not start")


def window(watched: bool, warmup: float, seconds: float, env: dict[str, str]) -> None:
    with tempfile.TemporaryDirectory() as out:
        cmd = LOOP
        if watched:
            cmd = [sys.executable, "-m", "stepscope.cli", "run", "-o", out, "--", *LOOP]
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            pid = _training_pid(proc, watched)
            time.sleep(warmup)
            before = threads(pid)
            time.sleep(seconds)
            after = threads(pid)
        finally:
            proc.terminate()
            proc.wait()
    side = "stepscope" if watched else "bare"
    for tid, (name, vol, cpu) in sorted(after.items()):
        if tid not in before:
            continue
        _, vol0, cpu0 = before[tid]
        role = "training" if tid == pid else f"{name} {tid}"
        sleeps, cpu_ms = (vol - vol0) / seconds, (cpu - cpu0) / seconds * 1e3
        if sleeps or role == "training":
            print(f"{side:9s} {role:16s} sleeps {sleeps:6.2f}/s  CPU {cpu_ms:7.2f} ms/s")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--warmup", type=float, default=10.0, help="s before the window")
    p.add_argument("--window", type=float, default=20.0, help="s of the window")
    p.add_argument("--src", help="another checkout's src folder (PYTHONPATH)")
    a = p.parse_args()
    env = dict(os.environ)
    if a.src:
        env["PYTHONPATH"] = a.src
    for _ in range(a.rounds):
        window(False, a.warmup, a.window, env)
        window(True, a.warmup, a.window, env)


if __name__ == "__main__":
    main()
