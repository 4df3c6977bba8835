"""The system sampler: a real sampler process against a real job folder.

The only fake is NVML (``tests/fakes/pynvml.py``). Waits have generous timeouts
that only guard against hangs; nothing asserts how long anything took.
"""

from __future__ import annotations

import importlib.util
import itertools
import json
import os
import signal
import statistics
import subprocess
import sys
import threading
import time
from array import array
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import psutil
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from stepscope.sampler._nvml import Gpus
from stepscope.sampler._probe import (
    ACCEPTED_INTERVALS_MS,
    SystemProbe,
    rows_to_batches,
    validate_interval_ms,
)
from stepscope.sampler.main import Sampler, next_tick
from stepscope.store import open_store

FAKES = Path(__file__).parent / "fakes"
NODE = "n0"
MESSAGE_700 = (
    "Invalid value 700 for system_monitor_interval_millis. "
    "Accepted values are 100, 200, 500, 1000, 5000, 60000."
)
# docs/format.md, written out here so that the test checks the code against the document.
BASE_TYPES = {
    "time": pa.float64(), "node": pa.string(), "interval_ms": pa.int32(),
    "cpu": pa.float32(), "cpu_iowait": pa.float32(), "mem_used": pa.float64(),
    "mem_percent": pa.float32(), "disk_read_bps": pa.float64(), "disk_write_bps": pa.float64(),
    "net_rx_bps": pa.float64(), "net_tx_bps": pa.float64(), "proc_cpu": pa.float32(),
    "proc_cpu_main": pa.float32(), "proc_run_wait": pa.float32(), "proc_io_wait": pa.float32(),
    "proc_read_bps": pa.float64(), "proc_write_bps": pa.float64(), "proc_rss": pa.float64(),
    "cpu_steal": pa.float32(),
    "run_queue": pa.int32(),
    "swap_used": pa.float64(), "swap_in_bps": pa.float64(), "swap_out_bps": pa.float64(),
    "proc_thread_run_wait": pa.float32(), "own_cpu": pa.float32(),
    "others_cpu_group": pa.float32(), "others_groups": pa.int32(),
    "proc_pool_run_wait": pa.float32(),
}  # fmt: skip
OTHERS_TYPES = {
    "time": pa.float64(), "node": pa.string(), "pid": pa.int32(), "name": pa.string(),
    "command": pa.string(), "cpu": pa.float32(),
}  # fmt: skip
GPU_TYPES = {
    "util": pa.float32(), "mem_used": pa.float64(), "mem_total": pa.float64(),
    "mem_util": pa.float32(), "power_w": pa.float32(), "temp_c": pa.float32(),
}  # fmt: skip
RATES = ["cpu", "cpu_iowait", "disk_read_bps", "disk_write_bps", "net_rx_bps", "net_tx_bps"]
RATES += ["cpu_steal", "swap_in_bps", "swap_out_bps"]
# Burns CPU in itself and in one child (so children count) for argv[1] seconds,
# then prints its end time. The child also stops when its parent is gone.
BURNER = """
import os, subprocess, sys, time
parent, end = os.getppid(), time.time() + float(sys.argv[1])
kids = [] if "child" in sys.argv else [subprocess.Popen([sys.executable, *sys.argv, "child"])]
while time.time() < end and ("child" not in sys.argv or os.getppid() == parent):
    sum(range(1000))
for kid in kids:
    kid.wait()
print(time.time(), flush=True)
"""


def wait_for(check: Callable[[], Any], what: str, timeout: float = 120.0) -> Any:
    """Poll ``check`` until it returns something truthy; the timeout only catches hangs
    (generous: under the suite's load a sampler's start-up, imports included, and its
    first scans of the host take many times their quiet seconds)."""
    deadline = time.monotonic() + timeout
    while not (result := check()):
        assert time.monotonic() < deadline, f"gave up waiting for {what}"
        time.sleep(0.05)
    return result


def read_system(job: Path) -> pa.Table:
    files = sorted((job / "system" / NODE).glob("part-*.parquet"))
    assert files, "no system segment written"
    return pa.concat_tables([pq.read_table(f) for f in files], promote_options="permissive")


def columns(table: pa.Table) -> dict[str, list[Any]]:
    return {name: table.column(name).to_pylist() for name in table.column_names}


class Procs:
    """Processes a test starts; whatever is still running at the end is killed."""

    def __init__(self, tmp: Path) -> None:
        self.tmp, self.started = tmp, []

    def start(self, args: list[str], **kw: Any) -> subprocess.Popen[str]:
        kw.setdefault("stdout", subprocess.PIPE)
        kw.setdefault("stderr", subprocess.PIPE)
        proc = subprocess.Popen(args, text=True, **kw)
        self.started.append(proc)
        return proc

    def burner(self, seconds: float) -> subprocess.Popen[str]:
        script = self.tmp / "burn.py"
        script.write_text(BURNER)
        return self.start([sys.executable, str(script), str(seconds)], stderr=None)

    def sleeper(self) -> subprocess.Popen[str]:
        return self.start([sys.executable, "-c", "import time; time.sleep(120)"])

    def sampler(self, job: Path, watch: int, *args: str, **kw: Any) -> subprocess.Popen[str]:
        # the launcher's first write makes the job folder; no writer makes it (again)
        job.mkdir(parents=True, exist_ok=True)
        cmd = [sys.executable, "-m", "stepscope.sampler.main", "--job-url", str(job)]
        cmd += ["--node", NODE, "--interval-ms", "100", "--watch-pid", str(watch), *args]
        return self.start(cmd, **kw)

    def close(self) -> None:
        for proc in self.started:
            for child in _children(proc.pid):
                child.kill()
            if proc.poll() is None:
                proc.kill()
            proc.communicate()


def _children(pid: int) -> list[psutil.Process]:
    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.Error:
        return []


@pytest.fixture
def procs(tmp_path: Path) -> Iterator[Procs]:
    p = Procs(tmp_path)
    yield p
    p.close()


def env_with_fake_nvml(gpus: int) -> dict[str, str]:
    path = os.pathsep.join(p for p in (str(FAKES), os.environ.get("PYTHONPATH")) if p)
    return {**os.environ, "PYTHONPATH": path, "STEPSCOPE_FAKE_NVML_GPUS": str(gpus)}


def stop(proc: subprocess.Popen[str], sig: int = signal.SIGTERM) -> tuple[int, str]:
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=30)
    return proc.returncode, err


def started(job: Path) -> bool:
    return (job / "nodes" / f"{NODE}.json").exists()


def flushed(job: Path) -> bool:
    return any((job / "system" / NODE).glob("part-*.parquet"))


# -- the interval ------------------------------------------------------------------


def test_interval_validation_message() -> None:
    with pytest.raises(ValueError) as err:
        validate_interval_ms(700)
    assert str(err.value) == MESSAGE_700
    assert [validate_interval_ms(ms) for ms in ACCEPTED_INTERVALS_MS] == [
        100, 200, 500, 1000, 5000, 60000,
    ]  # fmt: skip
    with pytest.raises(ValueError):
        validate_interval_ms(True)


def test_interval_choices_match_the_configuration() -> None:
    from stepscope.config import SYSTEM_MONITOR_INTERVALS

    assert tuple(SYSTEM_MONITOR_INTERVALS) == ACCEPTED_INTERVALS_MS


@pytest.mark.process
def test_cli_rejects_a_bad_interval(tmp_path: Path) -> None:
    cmd = [sys.executable, "-m", "stepscope.sampler.main", "--job-url", str(tmp_path)]
    p = subprocess.run(
        [*cmd, "--node", NODE, "--interval-ms", "700"], capture_output=True, text=True
    )
    assert p.returncode == 2
    assert p.stderr.strip() == f"stepscope: sampler: {MESSAGE_700}"
    assert not (tmp_path / "system").exists()


@pytest.mark.process
def test_the_sampler_process_stays_light(tmp_path: Path, procs: Procs) -> None:
    """No torch, pandas or duckdb in the sampler process, through sampling and flushing."""
    watched = procs.start([sys.executable, "-c", "import time; time.sleep(0.5)"])
    code = (
        "import sys\n"
        "from stepscope.sampler.main import main\n"
        f"main(['--job-url', {str(tmp_path)!r}, '--node', 'n0', '--interval-ms', '100',"
        f" '--watch-pid', '{watched.pid}'])\n"
        "print(sorted({'torch', 'pandas', 'duckdb'} & set(sys.modules)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert (out.returncode, out.stdout, out.stderr) == (0, "[]\n", "")
    assert read_system(tmp_path).num_rows >= 1


def test_next_tick_keeps_the_grid_and_skips_missed_ticks() -> None:
    assert next_tick(10.0, 10.001, 0.5) == 10.5
    assert next_tick(10.0, 11.7, 0.5) == 12.0  # 10.5, 11.0 and 11.5 were missed: no burst
    assert next_tick(10.0, 9.0, 0.5) == 10.5  # a clock read before the tick


# -- a real run --------------------------------------------------------------------


@pytest.mark.process
def test_sampler_process_records_a_cpu_burner(tmp_path: Path, procs: Procs) -> None:
    job = tmp_path / "job"
    burner = procs.burner(60)
    t0 = time.monotonic()
    sampler = procs.sampler(job, burner.pid)
    wait_for(lambda: started(job), "the sampler to start")
    time.sleep(1.5)
    tree = [psutil.Process(burner.pid), *_children(burner.pid)]
    code, err = stop(sampler)
    elapsed = time.monotonic() - t0
    # what the burner's tree had of the CPU over its life so far, in % of one core: how
    # busy the machine is sets it, and the sampler's proc_cpu must follow it
    used = sum(sum(p.cpu_times()[:2]) for p in tree)
    share = 100 * used / (time.time() - min(p.create_time() for p in tree))
    assert (code, err) == (0, "")
    table = read_system(job)
    cols = columns(table)

    cores = [n for n in table.column_names if n.startswith("cpu") and n[3:].isdigit()]
    assert len(cores) == psutil.cpu_count()
    expected = BASE_TYPES | dict.fromkeys(cores, pa.float32())
    assert {f.name: f.type for f in table.schema} == expected
    assert not any(name.startswith("gpu") for name in table.column_names)
    # a fixed 100 ms schedule cannot give more than one row per tick (+ the final one)
    assert 5 <= table.num_rows <= elapsed / 0.1 + 2
    assert set(cols["interval_ms"]) == {100}
    assert set(cols["node"]) == {NODE}
    assert cols["time"] == sorted(set(cols["time"]))
    assert all(cols[name][0] is None for name in [*RATES, *cores, "proc_cpu"])
    for name in [*RATES, *cores, "proc_cpu", "mem_used", "mem_percent", "proc_rss"]:
        assert all(v is not None and v >= 0 for v in cols[name][1:]), name
    for name in ["run_queue", "swap_used"]:  # counts, not rates: in the first sample too
        assert all(v is not None and v >= 0 for v in cols[name]), name
    assert max(cols["run_queue"]) >= 1  # the burner runs (the sampler does not count itself)
    for name in ["cpu", "cpu_iowait", "mem_percent", "cpu_steal", *cores]:
        assert max(cols[name][1:]) <= 100.0, name
    # the tree's CPU, its child's included: about its share (its start-up, before the
    # sampler's first row, counts in the share), not a fixed figure a loaded machine misses
    assert statistics.median(cols["proc_cpu"][1:]) > 0.5 * share > 0, (cols["proc_cpu"], share)
    # the child runs a program of its own (argv differs): a main process, not a pool child
    assert cols["proc_cpu_main"][1:] == cols["proc_cpu"][1:]
    # run-queue wait of the main threads: known from the second sample on, a share of it
    assert cols["proc_run_wait"][0] is None
    assert all(v is not None and 0 <= v <= 100 * 2 for v in cols["proc_run_wait"][1:])
    # per thread: the most-waiting thread's wait, never below the main thread's
    assert cols["proc_thread_run_wait"][0] is None
    waits = zip(cols["proc_thread_run_wait"][1:], cols["proc_run_wait"][1:], strict=True)
    waits = list(waits)
    assert all(t is not None and m is not None and m <= t <= 100 * 2 for t, m in waits), waits
    # stepscope's own CPU (the sampler itself): known from the second sample on
    assert cols["own_cpu"][0] is None and all(v is not None for v in cols["own_cpu"][1:])
    assert min(cols["proc_rss"]) > 1e6

    facts = json.loads((job / "nodes" / f"{NODE}.json").read_text())
    assert facts["cpu_count"] == len(cores) and facts["gpus"] == []
    assert facts["node"] == NODE and facts["interval_ms"] == 100
    assert facts["clock_offset_s"] == 0.0 and facts["mem_total"] > 0
    assert facts["boot_time"] < min(cols["time"])


def read_others(job: Path) -> pa.Table | None:
    files = sorted((job / "others" / NODE).glob("part-*.parquet"))
    return pa.concat_tables([pq.read_table(f) for f in files]) if files else None


@pytest.mark.process
def test_sampler_process_names_busy_processes_outside_the_job(tmp_path: Path, procs: Procs) -> None:
    """others/<node>/: a busy process outside the job is named; the job's own are not."""
    job = tmp_path / "job"
    busy = procs.start([sys.executable, "-c", "while True: pass"])
    watched = procs.burner(60)  # the job: busy too, in itself and a child
    sampler = procs.sampler(job, watched.pid)

    def busy_named() -> pa.Table | None:
        table = read_others(job)
        return table if table is not None and busy.pid in table.column("pid").to_pylist() else None

    table = wait_for(busy_named, "a row of the busy process in others/")
    assert (stop(sampler)) == (0, "")
    table = read_others(job)
    assert table is not None
    assert {f.name: f.type for f in table.schema} == OTHERS_TYPES
    rows = table.to_pylist()
    job_pids = {watched.pid, *(c.pid for c in _children(watched.pid))}
    assert not job_pids & {r["pid"] for r in rows}
    mine = [r for r in rows if r["pid"] == busy.pid]
    assert mine[0]["name"].startswith("python") and "while True" in mine[0]["command"]
    assert all(r["cpu"] >= 5.0 and r["node"] == NODE for r in rows)
    times = sorted({r["time"] for r in rows})
    assert len(rows) <= 5 * len(times)  # the top 5 at most per scan


@pytest.mark.process
def test_sigint_stops_with_a_final_flush(tmp_path: Path, procs: Procs) -> None:
    job = tmp_path / "job"
    sampler = procs.sampler(job, procs.sleeper().pid, "--flush-seconds", "60")
    wait_for(lambda: started(job), "the sampler to start")
    assert not flushed(job)  # nothing flushed yet: the rows come from the final flush
    assert stop(sampler, signal.SIGINT) == (0, "")
    assert read_system(job).num_rows >= 1


@pytest.mark.process
def test_ends_by_itself_when_the_watched_process_exits(tmp_path: Path, procs: Procs) -> None:
    job = tmp_path / "job"
    burner = procs.burner(1.0)
    sampler = procs.sampler(job, burner.pid)
    burner_out, _ = burner.communicate(timeout=60)
    assert sampler.wait(timeout=30) == 0
    times = columns(read_system(job))["time"]
    exited = float(burner_out.split()[-1])  # the burner's own line comes after its child's
    assert max(times) >= exited - 0.05  # the final sample came after the exit


@pytest.mark.process
def test_outlives_a_killed_parent_while_the_training_runs(tmp_path: Path, procs: Procs) -> None:
    job = tmp_path / "job"
    sleeper = procs.sleeper()
    # A stand-in for the launcher: starts the sampler (default --parent-pid: its parent).
    launcher = (
        "import subprocess, sys, time\n"
        "p = subprocess.Popen(sys.argv[1:])\n"
        "print(p.pid, flush=True)\n"
        "time.sleep(120)\n"
    )
    job.mkdir(parents=True, exist_ok=True)  # as the launcher's first write does
    cmd = [sys.executable, "-m", "stepscope.sampler.main", "--job-url", str(job)]
    cmd += ["--node", NODE, "--interval-ms", "100", "--watch-pid", str(sleeper.pid)]
    parent = procs.start([sys.executable, "-c", launcher, *cmd])
    assert parent.stdout is not None
    orphan = psutil.Process(int(parent.stdout.readline()))
    try:
        wait_for(lambda: started(job), "the sampler to start")
        parent.kill()
        parent.wait()
        # monitoring goes on while the training runs: it keeps the heartbeat, says why
        wait_for(lambda: (job / "heartbeat" / f"{NODE}.json").exists(), "its heartbeat")
        assert _running(orphan)
        (fault,) = (job / "faults").glob("launcher-*.json")
        assert "ended before the training" in json.loads(fault.read_text())["error"]
        sleeper.kill()
        wait_for(lambda: not _running(orphan), "the orphaned sampler to end")
    finally:
        if _running(orphan):
            orphan.kill()
    assert read_system(job).num_rows >= 1  # it flushed before leaving


def _running(proc: psutil.Process) -> bool:
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


# -- GPUs --------------------------------------------------------------------------


def load_fake_nvml(monkeypatch: pytest.MonkeyPatch, gpus: int) -> ModuleType:
    monkeypatch.setenv("STEPSCOPE_FAKE_NVML_GPUS", str(gpus))
    spec = importlib.util.spec_from_file_location("pynvml", FAKES / "pynvml.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "pynvml", module)  # before exec: dataclasses look it up
    spec.loader.exec_module(module)
    return module


@pytest.mark.process
def test_sampler_process_with_four_fake_gpus(
    tmp_path: Path, procs: Procs, monkeypatch: pytest.MonkeyPatch
) -> None:
    job = tmp_path / "job"
    fake = vars(load_fake_nvml(monkeypatch, 4))  # for its traces
    env = env_with_fake_nvml(4)
    sampler = procs.sampler(job, procs.sleeper().pid, "--flush-seconds", "0.2", env=env)
    wait_for(lambda: flushed(job) and read_system(job).num_rows >= 3, "three samples")
    assert stop(sampler) == (0, "")
    table = read_system(job)
    cols = columns(table)
    gpu_columns = {f.name: f.type for f in table.schema if f.name.startswith("gpu")}
    assert gpu_columns == {f"gpu{i}_{k}": t for i in range(4) for k, t in GPU_TYPES.items()}
    for i in range(4):
        assert set(cols[f"gpu{i}_util"]) <= set(fake["UTIL_GPU"])
        assert set(cols[f"gpu{i}_mem_total"]) == {42949672960.0}
        used = {m * 2**20 for m in fake["MEM_USED_MIB"]}
        assert set(cols[f"gpu{i}_mem_used"]) <= used
        watts = array("f", [round(mw / 1000, 1) for mw in fake["POWER_MW"]])  # W, as float32
        assert set(cols[f"gpu{i}_power_w"]) <= set(watts)
        assert set(cols[f"gpu{i}_temp_c"]) <= set(fake["TEMP_C"])
        for used_b, pct in zip(cols[f"gpu{i}_mem_used"], cols[f"gpu{i}_mem_util"], strict=True):
            assert pct == pytest.approx(100 * used_b / 42949672960, abs=0.06)
    assert len(set(cols["gpu0_util"])) > 1  # the trace is replayed, not one value
    facts = json.loads((job / "nodes" / f"{NODE}.json").read_text())
    assert facts["gpus"] == [
        {"index": i, "name": "NVIDIA A100-SXM4-40GB", "mem_total": 42949672960.0} for i in range(4)
    ]


@pytest.mark.process
@pytest.mark.parametrize("nvml", ["real", "fake-without-gpu"])
def test_no_gpu_means_no_gpu_columns_and_silence(tmp_path: Path, procs: Procs, nvml: str) -> None:
    if nvml == "real" and Gpus.open() is not None:
        pytest.skip("this machine has a GPU")
    job = tmp_path / "job"
    env = env_with_fake_nvml(0) if nvml != "real" else None
    sampler = procs.sampler(job, procs.sleeper().pid, "--flush-seconds", "0.2", env=env)
    wait_for(lambda: flushed(job), "a flush")
    assert stop(sampler) == (0, "")
    assert not [n for n in read_system(job).column_names if n.startswith("gpu")]
    assert json.loads((job / "nodes" / f"{NODE}.json").read_text())["gpus"] == []


def test_gpus_in_process_with_the_fake(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = load_fake_nvml(monkeypatch, 2)
    gpus = Gpus.open()
    assert gpus is not None
    assert [g.name for g in gpus.info] == ["NVIDIA A100-SXM4-40GB"] * 2
    row: dict[str, Any] = {}
    gpus.sample(row)
    assert row["gpu1_util"] == fake.UTIL_GPU[1] and row["gpu0_temp_c"] == fake.TEMP_C[0]
    assert row["gpu0_power_w"] == fake.POWER_MW[0] / 1000
    gpus.close()
    assert fake._State.initialised == 0  # shut down
    load_fake_nvml(monkeypatch, 0)
    assert Gpus.open() is None
    monkeypatch.setitem(sys.modules, "pynvml", None)  # nvidia-ml-py not installed
    assert Gpus.open() is None


# -- rows and batches --------------------------------------------------------------


def test_batches_have_the_format_types_and_split_when_columns_change() -> None:
    row = {"time": 1.0, "node": NODE, "interval_ms": 100, "cpu": 12.345, "cpu0": 99.96}
    row |= {"disk_read_bps": 1234.56, "gpu0_mem_used": 5.0, "gpu0_util": 50.0}
    fewer = {k: v for k, v in row.items() if not k.startswith("gpu")}
    batches = rows_to_batches([row, row, fewer])
    assert [b.num_rows for b in batches] == [2, 1]
    schema = batches[0].schema
    assert [schema.field(n).type for n in ("time", "node", "interval_ms", "cpu0")] == [
        pa.float64(), pa.string(), pa.int32(), pa.float32(),
    ]  # fmt: skip
    assert schema.field("gpu0_mem_used").type == pa.float64()
    first = batches[0].to_pylist()[0]
    assert first["cpu"] == pytest.approx(12.3) and first["cpu0"] == pytest.approx(100.0)
    assert first["disk_read_bps"] == 1235.0  # whole bytes per second


def test_probe_rates_are_null_first_then_measured() -> None:
    probe = SystemProbe(os.getpid())
    first = probe.read(time.monotonic())
    sum(range(3_000_000))  # some CPU for this process between the readings
    second = probe.read(time.monotonic())
    assert first["cpu"] is None and first["proc_cpu"] is None and first["net_rx_bps"] is None
    assert second["proc_cpu"] is not None and second["proc_cpu"] > 0
    assert second["cpu"] is not None and 0 <= second["cpu"] <= 100
    assert first["proc_rss"] == pytest.approx(psutil.Process().memory_info().rss, rel=0.5)


def test_set_interval_takes_effect_at_the_next_tick(tmp_path: Path) -> None:
    sampler = Sampler(open_store(tmp_path), NODE, interval_ms=60000, probe=SystemProbe())
    thread = threading.Thread(target=sampler.run)
    thread.start()
    try:
        wait_for(lambda: sampler.samples >= 1, "the first sample")
        with pytest.raises(ValueError, match="Invalid value 700"):
            sampler.set_interval(700)
        sampler.set_interval(100)  # without it, the second tick is a minute away
        wait_for(lambda: sampler.samples >= 3, "two more samples")
    finally:
        sampler.stop()
        thread.join(timeout=30)
    intervals = columns(read_system(tmp_path))["interval_ms"]
    assert intervals[0] == 60000 and set(intervals[1:]) == {100}


# -- the fault boundary ------------------------------------------------------------


@pytest.mark.process
def test_unwritable_store_buffers_rows_and_records_the_fault(tmp_path: Path, procs: Procs) -> None:
    job = tmp_path / "job"
    sampler = procs.sampler(job, procs.sleeper().pid, "--flush-seconds", "0.2")
    wait_for(lambda: flushed(job), "a first flush")
    folder = job / "system" / NODE
    fault_file = job / "faults" / f"sampler-{NODE}-{sampler.pid}.json"

    broken = time.time()
    folder.rename(folder.with_name("saved"))
    folder.write_text("a file where the sampler's folder was")
    fault = wait_for(lambda: _fault(fault_file, min_count=8), "eight failed flushes")
    assert sampler.poll() is None, "the sampler must keep running"
    folder.unlink()
    folder.with_name("saved").rename(folder)
    restored = time.time()
    wait_for(lambda: max(columns(read_system(job))["time"]) > restored, "rows after repair")
    code, err = stop(sampler)

    assert code == 0
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("stepscope: sampler: ")
    assert fault["error"].split(":")[0] in ("FileExistsError", "NotADirectoryError")
    assert fault["component"] == "sampler" and fault["node"] == NODE
    assert fault["pid"] == sampler.pid and fault["dropped_rows"] == 0
    assert broken <= fault["first_time"] <= fault["time"]
    times = columns(read_system(job))["time"]
    assert times == sorted(set(times))  # no row twice
    during = [t for t in times if broken < t < restored]
    assert len(during) >= 3  # rows sampled while the store failed were kept
    gaps = [b - a for a, b in itertools.pairwise(times)]
    assert max(gaps) < (restored - broken) / 2  # no hole where the outage was


def _fault(path: Path, min_count: int) -> dict[str, Any] | None:
    if not path.exists():
        return None
    fault: dict[str, Any] = json.loads(path.read_text())
    return fault if fault["count"] >= min_count else None


def test_a_full_buffer_drops_the_oldest_rows_and_counts_them(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    sampler = Sampler(store, NODE, interval_ms=100, max_buffer_rows=4, probe=SystemProbe())
    (tmp_path / "system").mkdir()
    (tmp_path / "system" / NODE).write_text("not a folder")
    times = []
    for _ in range(5):  # 5 failing flushes of 2 rows each
        for _ in range(2):
            sampler.sample()
            times.append(sampler.gaps.last_wall)
        sampler.flush()
    # The first 2 rows went to the segment writer before its write failed; of the
    # 8 that followed, the buffer kept the newest 4.
    assert sampler.faults.doc["dropped_rows"] == 4 and sampler.faults.doc["count"] == 5
    assert len(sampler._pending) == 4
    gap_file = tmp_path / "faults" / f"sampling-gap-{NODE}-{os.getpid()}.json"
    assert not gap_file.exists(), "a drop's gap is recorded once the store is back"
    (tmp_path / "system" / NODE).unlink()
    sampler.flush()
    sampler.close()
    stored = columns(read_system(tmp_path))["time"]
    assert stored == times[:2] + times[-4:]
    fault = json.loads((tmp_path / "faults" / f"sampler-{NODE}-{os.getpid()}.json").read_text())
    assert fault["dropped_rows"] == 4
    assert (fault["dropped_first_time"], fault["dropped_last_time"]) == (times[2], times[5])
    # the hole in system/: from the newest stored row to the oldest kept one, with its cause
    (gap,) = json.loads(gap_file.read_text())["gaps"]
    assert (gap["start"], gap["end"]) == (times[1], times[6])
    assert gap["cause"].startswith("4 sample(s) dropped") and "36,000" not in gap["cause"]
    assert "buffer of 4 rows" in gap["cause"]


def test_the_row_buffer_holds_its_bound_and_loses_nothing_within_it(tmp_path: Path) -> None:
    from stepscope.sampler._output import Faults, RowBuffer
    from stepscope.store import SegmentWriter

    store = open_store(tmp_path)
    faults = Faults(store, NODE)
    rows = [{"time": 100.0 + i, "node": NODE, "interval_ms": 1000} for i in range(10)]
    within = RowBuffer(10, faults)  # silent twin: 10 rows in a buffer of 10
    for r in rows:
        within.add(r)
    assert len(within) == 10 and within.dropped_span() is None
    full = RowBuffer(6, faults)
    for r in rows:
        full.add(r)
    assert len(full) == 6 and faults.doc["dropped_rows"] == 4  # the oldest 4 went
    assert full.dropped_span() == (100.0, 104.0, 4)  # no row stored before: from the first
    assert full.dropped_span() is None  # handed over once
    writer = SegmentWriter(store, "system/" + NODE)
    full.store(writer)
    assert len(full) == 0
    assert columns(read_system(tmp_path))["time"] == [104.0 + i for i in range(6)]
    for i in range(8):  # after a store: a new span starts at the newest stored row
        full.add({"time": 200.0 + i, "node": NODE, "interval_ms": 1000})
    assert full.dropped_span() == (109.0, 202.0, 2)


def test_pool_children_are_told_from_main_processes() -> None:
    from stepscope.sampler._roles import is_pool_child

    train = ["python", "train.py", "--lr", "0.1"]
    assert not is_pool_child(train, None)  # the watched process
    assert is_pool_child(train, train)  # a forked DataLoader worker
    spawn = ["python", "-c", "from multiprocessing.spawn import spawn_main; spawn_main()"]
    assert is_pool_child([*spawn, "--multiprocessing-fork"], train)
    # torchrun's ranks and a script started by a shell run programs of their own
    assert not is_pool_child(["python", "-u", "train.py"], ["torchrun", "train.py"])
    assert not is_pool_child(train, ["bash", "run.sh"])
