"""How fast the CLI answers: this code against a base commit's, side by side.

    python benchmarks/cli.py                      # base: fa081fd (before issue 20's item 10)
    python benchmarks/cli.py --base HEAD~3 --runs 21

Writes a folder of 13 small synthetic jobs (stepscope.testing), extracts the base
commit's ``src`` (``git archive``) next to it, then times each command as a fresh
process (what a user waits for), the two codes interleaved run by run and in
alternating order, so that a change of the machine's load hits both alike.
Prints the median and the 10th-90th percentile of each, in seconds, of wall
time and of CPU time (user + system: less moved by other processes' load). The agent's
start-up in a training process (``import stepscope.agent.bootstrap``, what the
injected sitecustomize imports) is timed the same way: it must not grow.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from io import BytesIO
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
NATIVE_GLOB = "_native*.so"  # the compiled agent: not in git, copied beside the base's code


def base_src(commit: str, into: Path) -> Path:
    """The ``src`` folder of ``commit``, extracted under ``into``."""
    data = subprocess.run(
        ["git", "-C", str(REPO), "archive", commit, "src"], capture_output=True, check=True
    ).stdout
    with tarfile.open(fileobj=BytesIO(data)) as tar:
        tar.extractall(into, filter="data")
    for so in (REPO / "src/stepscope/agent").glob(NATIVE_GLOB):
        shutil.copy(so, into / "src/stepscope/agent" / so.name)
    return into / "src"


def write_jobs(out: Path, count: int) -> None:
    sys.path.insert(0, str(REPO / "src"))
    from stepscope.testing import SyntheticJob, write_synthetic_job

    for i in range(count):
        spec = SyntheticJob(
            name=f"job-{i:02d}",
            hours=0.01 * (1 + i % 4),  # 36-144 s of 0.4 s steps
            start_time=1_763_850_000.0 + 1000 * i,
            seed=i,
        )
        write_synthetic_job(str(out / spec.name), spec)


def timed(src: Path, argv: list[str]) -> tuple[float, float]:
    """Wall seconds and CPU seconds (user + system) of one run of ``argv``."""
    env = {**os.environ, "PYTHONPATH": str(src)}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def spread(xs: list[float]) -> str:
    qs = statistics.quantiles(xs, n=10) if len(xs) > 1 else [xs[0]] * 9
    return f"{statistics.median(xs):.3f} ({qs[0]:.3f}-{qs[-1]:.3f})"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", default="fa081fd", help="commit to compare with (default fa081fd)")
    ap.add_argument("--runs", type=int, default=15, help="runs of each command and code")
    ap.add_argument("--jobs", type=int, default=13, help="jobs in the listed folder")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="stepscope-cli-bench-") as tmp:
        root = Path(tmp)
        write_jobs(root / "runs", args.jobs)
        sides = {"new": REPO / "src", "base": base_src(args.base, root / "base")}
        cli = [sys.executable, "-m", "stepscope.cli"]
        commands = {
            "ls": [*cli, "ls", str(root / "runs")],
            "show": [*cli, "show", str(root / "runs/job-03")],
            "show --json": [*cli, "show", "--json", str(root / "runs/job-03")],
            "--help": [*cli, "--help"],
            "agent start-up import": [sys.executable, "-c", "import stepscope.agent.bootstrap"],
        }
        wall: dict[tuple[str, str], list[float]] = {}
        cpu: dict[tuple[str, str], list[float]] = {}
        load = [os.getloadavg()[0]]
        for run in range(args.runs):
            for name, argv in commands.items():
                order = list(sides) if run % 2 == 0 else list(sides)[::-1]
                for side in order:
                    w, c = timed(sides[side], argv)
                    wall.setdefault((name, side), []).append(w)
                    cpu.setdefault((name, side), []).append(c)
            load.append(os.getloadavg()[0])
        print(f"{args.runs} interleaved runs, median (p10-p90) seconds; load average "
              f"{min(load):.1f}-{max(load):.1f} on {os.cpu_count()} cores")  # fmt: skip
        print(f"| command | wall, new | wall, base ({args.base}) | CPU, new | CPU, base |")
        print("|---|---|---|---|---|")
        for name in commands:
            new, base = (name, "new"), (name, "base")
            print(f"| `{name}` | {spread(wall[new])} | {spread(wall[base])} "
                  f"| {spread(cpu[new])} | {spread(cpu[base])} |")  # fmt: skip


if __name__ == "__main__":
    main()
