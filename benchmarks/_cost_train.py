"""run_cost.py's training: the CPU MLP of ``_mlp_loop`` for ``--steps`` steps.

Prints one JSON line of wall-clock stamps (``time.time()``, comparable across the
processes of one machine): the script's first line (before ``import torch``), the
end of its first step, and the end of its ``main``; and the CPU seconds from the first
step to the end of the loop, of the training thread (``time.thread_time``: the agent's
per-step hooks are in it) and of the whole process (``time.process_time``: the agent's
threads too), and the seconds the training thread waited for a core (its run-queue
delay, ``/proc/thread-self/schedstat``); the process's CPU seconds at its first line
(under ``stepscope run`` the agent's start-up is in them) and at the end of ``main``.
CPU time holds on a shared machine where wall time swings.
"""

from __future__ import annotations

import time

T_START = time.time()
CPU_START = time.process_time()  # the agent's start-up is in it (its sitecustomize ran)

import argparse  # noqa: E402  (the stamp above comes first)
import json  # noqa: E402

from _mlp_loop import Loop  # noqa: E402


def run_delay() -> float:
    """Seconds this thread has waited for a core (Linux schedstat), 0 where unknown."""
    try:
        with open("/proc/thread-self/schedstat") as f:
            return int(f.read().split()[1]) / 1e9
    except (OSError, IndexError, ValueError):
        return 0.0


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=3000)
    p.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    a = p.parse_args()
    loop = Loop(threads=a.threads)
    loop.run(1)
    first, thread0, process0 = time.time(), time.thread_time(), time.process_time()
    waited0 = run_delay()
    loop.run(a.steps - 1)
    thread_s, process_s = time.thread_time() - thread0, time.process_time() - process0
    waited_s = run_delay() - waited0
    stamps = {"start": T_START, "first_step": first, "end": time.time()}
    stamps |= {"steps": a.steps - 1, "thread_cpu": thread_s, "process_cpu": process_s}
    stamps |= {"run_delay": waited_s, "cpu_start": CPU_START, "cpu_end": time.process_time()}
    print(json.dumps(stamps), flush=True)


if __name__ == "__main__":
    main()
