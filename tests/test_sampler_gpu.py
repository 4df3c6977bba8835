"""The sampler against a real NVIDIA GPU and driver (skipped on CPU-only machines)."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from stepscope.sampler._nvml import Gpus


def _gpu_count() -> int:
    gpus = Gpus.open()
    if gpus is None:
        return 0
    gpus.close()
    return len(gpus.info)


pytestmark = [
    pytest.mark.gpu,
    pytest.mark.process,
    pytest.mark.skipif(_gpu_count() == 0, reason="needs an NVIDIA GPU and driver"),
]


def test_real_gpus_read_plausible_values() -> None:
    gpus = Gpus.open()
    assert gpus is not None
    try:
        row: dict[str, Any] = {}
        gpus.sample(row)
    finally:
        gpus.close()
    for gpu in gpus.info:
        p = f"gpu{gpu.index}_"
        assert gpu.name and gpu.mem_total > 2**30
        assert 0 <= row[p + "util"] <= 100
        assert 0 < row[p + "mem_used"] <= row[p + "mem_total"] == gpu.mem_total
        assert 0 <= row[p + "mem_util"] <= 100
        assert row[p + "power_w"] is None or 5 < row[p + "power_w"] < 2000  # None: unsupported
        assert 10 < row[p + "temp_c"] < 120


def test_sampler_process_writes_gpu_columns(tmp_path: Path) -> None:
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    cmd = [sys.executable, "-m", "stepscope.sampler.main", "--job-url", str(tmp_path)]
    cmd += ["--node", "g0", "--interval-ms", "100", "--watch-pid", str(sleeper.pid)]
    sampler = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 30
        while not (tmp_path / "nodes" / "g0.json").exists():
            assert time.monotonic() < deadline, "the sampler did not start"
            time.sleep(0.05)
        time.sleep(1.0)
        sampler.send_signal(signal.SIGTERM)
        _, err = sampler.communicate(timeout=30)
    finally:
        sleeper.kill()
        sleeper.wait()
        if sampler.poll() is None:
            sampler.kill()
            sampler.communicate()
    assert (sampler.returncode, err) == (0, "")
    files = sorted((tmp_path / "system" / "g0").glob("part-*.parquet"))
    table = pq.read_table(files[0])
    assert all(f"gpu{i}_util" in table.column_names for i in range(_gpu_count()))
    assert table.column("gpu0_mem_total").to_pylist()[-1] > 0
