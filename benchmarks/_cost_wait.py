"""run_cost.py's wrapper around the training: runs it, waits for it with ``wait4``, and
writes its CPU seconds (user + system, its children included) and the moment it was
reaped to the JSON file named first::

    python -I _cost_wait.py OUT.json -- python _cost_train.py ...

Run with ``-I``: the agent's ``sitecustomize`` (on ``PYTHONPATH`` under ``stepscope run``)
stays out of the wrapper and goes into the training only. Signals are passed on.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time


def main() -> int:
    out, command = sys.argv[1], sys.argv[3:]
    child = subprocess.Popen(command)
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda s, _f: child.send_signal(s))
    while True:
        try:
            _, status, usage = os.wait4(child.pid, 0)
            break
        except InterruptedError:
            continue
    reaped = time.time()
    child.returncode = os.waitstatus_to_exitcode(status)  # reaped here, not by Popen
    cpu = usage.ru_utime + usage.ru_stime
    with open(out, "w") as f:
        json.dump({"cpu_s": cpu, "reaped": reaped}, f)
    return child.returncode if child.returncode >= 0 else 128 - child.returncode


if __name__ == "__main__":
    sys.exit(main())
