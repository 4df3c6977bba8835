"""Imported jobs of ``benchmarks/diagnosis.py``: a synthetic SageMaker Debugger/Profiler
job, written by the tests' generator (tests/sagemaker_source.py, the predecessor's
published layout), imported with ``stepscope import sagemaker`` (which evaluates the
rules: ProfilerReport), then scored as a recorded run (issue 30: imported jobs are
diagnosed like recorded ones).

``loader``: 2 data-loader workers on 8 cores the system metrics show mostly idle, the
loop waiting 0.1 s for each 0.2 s step (the predecessor's Dataloader finding);
``healthy``: 8 workers, a 2 ms wait.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))

import sagemaker_source as sm  # noqa: E402

SOURCES = {
    "loader": sm.TraceSpec("0-algo-1", steps=40, fetch_s=0.1, workers=2),
    "healthy": sm.TraceSpec("0-algo-1", steps=40, fetch_s=0.002, workers=8),
}


def write_source(kind: str, root: Path) -> None:
    """One node's minute files (8 cores, no GPU) and rank 0's timeline of ``kind``."""
    shutil.rmtree(root, ignore_errors=True)
    sm.write_system(root, "algo-1", sm.START + 2330, 60, cores=8, gpus=0)
    sm.write_timeline(root, SOURCES[kind])
    (root / "profiler-output/training_job_end.ts").parent.mkdir(parents=True, exist_ok=True)
    (root / "profiler-output/training_job_end.ts").write_text("1")


def import_one(kind: str, job: Path, env: dict[str, str]) -> tuple[int, float, str]:
    """Write the source beside ``job`` and import it; exit code, wall (s), stderr."""
    source = job.with_name(job.name + "-source")
    write_source(kind, source)
    shutil.rmtree(job, ignore_errors=True)
    cmd = [sys.executable, "-m", "stepscope.cli", "import", "sagemaker", str(source), str(job)]
    t0 = time.monotonic()
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    return done.returncode, time.monotonic() - t0, done.stderr[-2000:]
