"""run_cost.py's start-up table: what each process stepscope adds imports (``-X importtime``)."""

from __future__ import annotations

import os
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from _cost_runs import without_pyc_off

HEAVY = ("numpy", "pandas", "pyarrow", "duckdb", "psutil", "fsspec", "torch")
REPEATS = 3


def _processes(tmp: str) -> dict[str, list[str]]:
    run = ["-m", "stepscope.cli", "run", "-o", tmp, "--job"]
    return {
        "launcher (`stepscope run -- true`)": [*run, "JOB", "--", "true"],
        # the module and the loop its main() imports (at the module's import before)
        "sampler": ["-c", "import stepscope.sampler.main, stepscope.sampler._sampler"],
        "rule runner": ["-c", "import stepscope.rules.runner"],
        "agent (in the training)": ["-c", "import stepscope.agent.bootstrap"],
    }


def _importtime(stderr: str) -> tuple[float, dict[str, float]]:
    """Seconds of all top-level imports, and the cumulative seconds of the heavy ones."""
    total, heavy = 0.0, {}  # type: float, dict[str, float]
    for line in stderr.splitlines():
        if not line.startswith("import time:") or "|" not in line:
            continue
        _, cumulative, name = line.split("|")
        if not cumulative.strip().isdigit():
            continue  # the header
        seconds = int(cumulative) / 1e6
        if not name.startswith("  "):  # names are indented by nesting; top level: 1 space
            total += seconds
        if name.strip() in HEAVY:
            heavy[name.strip()] = heavy.get(name.strip(), 0.0) + seconds
    return total, heavy


def _one(src: Path, argv: list[str]) -> tuple[float, float, dict[str, float]]:
    """Imports and CPU seconds of one fresh process, and its heavy imports."""
    env = {**without_pyc_off(os.environ), "PYTHONPATH": str(src)}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run(
        [sys.executable, "-X", "importtime", *argv], env=env, capture_output=True, text=True
    )
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    imports, heavy = _importtime(out.stderr)
    return imports, cpu, heavy


def import_table(srcs: dict[str, Path]) -> None:
    """Median over ``REPEATS`` fresh processes of each side's imports and CPU."""
    print(f"Start-up of each process, median of {REPEATS}: imports (-X importtime), CPU of the")
    print("whole process; heavy modules among its imports (cumulative ms)")
    print()
    print("| process | side | imports, s | CPU, s | heavy imports |")
    print("|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for name, argv in _processes(tmp).items():
            for side, src in srcs.items():
                got = []
                for i in range(REPEATS):
                    job = [a if a != "JOB" else f"{side.split()[0]}-{i}" for a in argv]
                    got.append(_one(src, job))
                imports = statistics.median(g[0] for g in got)
                cpu = statistics.median(g[1] for g in got)
                heavy = ", ".join(f"{k} {v * 1e3:.0f}" for k, v in sorted(got[-1][2].items()))
                print(f"| {name} | {side} | {imports:.2f} | {cpu:.2f} | {heavy or '-'} |")
