"""run_cost.py's training: the CPU MLP of ``_mlp_loop`` for ``--steps`` steps.

Prints one JSON line of wall-clock stamps (``time.time()``, comparable across the
processes of one machine): the script's first line (before ``import torch``), the
end of its first step, and the end of its ``main``.
"""

from __future__ import annotations

import time

T_START = time.time()

import argparse  # noqa: E402  (the stamp above comes first)
import json  # noqa: E402

from _mlp_loop import Loop  # noqa: E402


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=3000)
    p.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    a = p.parse_args()
    loop = Loop(threads=a.threads)
    loop.run(1)
    first = time.time()
    loop.run(a.steps - 1)
    stamps = {"start": T_START, "first_step": first, "end": time.time()}
    print(json.dumps(stamps), flush=True)


if __name__ == "__main__":
    main()
