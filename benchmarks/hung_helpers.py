"""Benchmark: how long ``stepscope run`` takes to return after the training exits,
with its helpers well, or stopped (``SIGSTOP``) until the end of the training.

    python benchmarks/hung_helpers.py [--runs 3] [--stop none|sampler|rules|both] [--src S]

Each run is a real ``stepscope run`` of ``tests/scripts/mlp.py`` (160 steps paced
at 0.08 s: about 13 s of training). With ``--stop``, once the first verdicts are
written the benchmark stops the named helpers with ``SIGSTOP`` and leaves them so.
It prints, per run, the seconds from the training's end (``job.json``'s
``end_time``, stamped by the launcher when the command exits) to the launcher's
exit, and their median. ``--src`` runs another checkout's ``src`` (on
``PYTHONPATH``), to compare before and after.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

HERE = Path(__file__).parent
MLP = str(HERE.parent / "tests" / "scripts" / "mlp.py")
STEPSCOPE = str(Path(sys.executable).parent / "stepscope")
MODULES = {"sampler": ["stepscope.sampler.main"], "rules": ["stepscope.rules.runner"]}
MODULES["both"] = MODULES["sampler"] + MODULES["rules"]


def _stop_helpers(launcher: subprocess.Popen[bytes], modules: list[str]) -> None:
    for child in psutil.Process(launcher.pid).children():
        if any(m in " ".join(child.cmdline()) for m in modules):
            child.send_signal(signal.SIGSTOP)


def one_run(stop: str, env: dict[str, str]) -> float:
    """Seconds from the training's end to ``stepscope run``'s return."""
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [STEPSCOPE, "run", "-o", tmp, "--job", "j", "--", sys.executable, MLP]
        cmd += ["--steps", "160", "--step-sleep", "0.08"]
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        rules = Path(tmp) / "j" / "rules"
        if stop != "none":
            while not list(rules.glob("*.json")) and proc.poll() is None:
                time.sleep(0.1)
            _stop_helpers(proc, MODULES[stop])
        _, err = proc.communicate(timeout=600)
        returned = time.time()
        meta = json.loads((Path(tmp) / "j" / "job.json").read_text())
        if proc.returncode != 0:
            raise SystemExit(err.decode(errors="replace"))
        return returned - float(meta["end_time"])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--stop", choices=["none", "sampler", "rules", "both"], default="both")
    p.add_argument("--src", help="another checkout's src, to compare")
    args = p.parse_args()
    env = dict(os.environ, OMP_NUM_THREADS="1")
    if args.src:
        env["PYTHONPATH"] = args.src
    took = []
    for i in range(args.runs):
        took.append(one_run(args.stop, env))
        print(f"run {i + 1}: returned {took[-1]:.2f} s after the training ended", flush=True)
    print(f"median {statistics.median(took):.2f} s (stop={args.stop}, runs={args.runs})")


if __name__ == "__main__":
    main()
