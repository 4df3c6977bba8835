"""Small predecessor (SageMaker Debugger/Profiler) outputs, written to its published layout.

Used by tests/test_import_sagemaker.py; docs/sagemaker.md lists the fields used. The
predecessor's writer code is not available here: these follow its documented layout
(folder and file names, JSON keys, TFRecord framing and Event protos).
"""

from __future__ import annotations

import cProfile
import json
import struct
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

START = 1_763_850_000.0  # 2025-11-22 22:20 UTC; the tests' hour boundary is START + 2400
WRITE_LAG_S = 0.8  # a line is written this long after its sample


def hour_folder(t: float) -> str:
    return time.strftime("%Y%m%d%H", time.gmtime(t))


def metric_lines(
    t: float, cores: int, gpus: int, rng: np.random.Generator, iowait_name: str | None = None
) -> list[dict[str, object]]:
    """One sample as the predecessor writes it: one line per metric, each its own time;
    ``iowait_name``: I/O wait once for the node under that name, not per core."""
    lines: list[dict[str, object]] = []
    ts = t + 0.009 + rng.uniform(0, 0.002)
    if iowait_name is not None:
        value = round(float(rng.uniform(0, 5)), 2)
        lines.append(
            {
                "Type": "cpu",
                "Name": iowait_name,
                "Dimension": "I/OWaitPercentage",
                "Value": value,
                "Timestamp": ts,
            }
        )
    for c in range(cores):
        lines.append(
            {
                "Type": "cpu",
                "Name": f"cpu{c}",
                "Dimension": "CPUUtilization",
                "Value": round(float(rng.uniform(20, 90)), 2),
                "Timestamp": ts,
            }
        )
        if iowait_name is None:
            lines.append(
                {
                    "Type": "cpu",
                    "Name": f"cpu{c}",
                    "Dimension": "I/OWaitPercentage",
                    "Value": round(float(rng.uniform(0, 5)), 2),
                    "Timestamp": ts,
                }
            )
    for g in range(gpus):
        for dim in ("GPUUtilization", "GPUMemoryUtilization"):
            lines.append(
                {
                    "Type": "gpu",
                    "Name": f"gpu{g}",
                    "Dimension": dim,
                    "Value": round(float(rng.uniform(40, 95)), 2),
                    "Timestamp": ts + 0.001,
                }
            )
    lines.append(
        {
            "Type": "memory",
            "Name": "MemoryUsedPercent",
            "Dimension": "",
            "Value": 30.5,
            "Timestamp": ts + 0.0005,
        }
    )
    for name in ("IOPS", "ReadThroughputInBytesPerSecond", "WriteThroughputInBytesPerSecond"):
        lines.append(
            {
                "Type": "i/o",
                "Name": name,
                "Dimension": "",
                "Value": 1000.0,
                "Timestamp": ts + 0.0006,
            }
        )
    for name in ("ReceiveBytesPerSecond", "TransmitBytesPerSecond"):
        for dim, value in (("Algorithm", 100.0), ("Platform", 50.0)):
            lines.append(
                {
                    "Type": "network",
                    "Name": name,
                    "Dimension": dim,
                    "Value": value,
                    "Timestamp": ts + 0.004,
                }
            )
    return lines  # fmt: skip


def write_system(
    root: Path,
    node: str,
    start: float,
    seconds: float,
    cores: int = 4,
    gpus: int = 1,
    interval: float = 0.5,
    seed: int = 0,
    iowait_name: str | None = None,
) -> int:
    """Minute files of a node. A line goes to the hour folder of when it is written
    (about WRITE_LAG_S after its sample), its file is named by its sample's minute: the
    last minute of an hour is split across two hour folders. Returns the samples written."""
    rng = np.random.default_rng(seed)
    files: dict[Path, list[str]] = {}
    n = int(seconds / interval)
    for i in range(n):
        t = start + i * interval
        minute = int(t // 60 * 60)
        for line in metric_lines(t, cores, gpus, rng, iowait_name):
            hour = hour_folder(float(line["Timestamp"]) + WRITE_LAG_S)  # type: ignore[arg-type]
            path = root / "profiler-output/system/incremental" / hour / f"{minute}.{node}.json"
            files.setdefault(path, []).append(json.dumps(line))
    for path, lines in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("\n".join(lines) + "\n")
    return n  # fmt: skip


@dataclass
class TraceSpec:
    """One process's timeline: steps of ``step_s``, data fetches of ``fetch_s`` (0: none)."""

    node_id: str
    steps: int = 20
    step_s: float = 0.2
    fetch_s: float = 0.05
    optimizer_s: float = 0.02
    workers: int = 2
    pid: int = 4242
    start: float = START + 2340.0  # inside the tests' system samples (2330-2450 s)
    first_step: int = 0  # the step number of the first step (a later file of a rank)
    settings: bool = True  # write the loader's settings event (num_workers)
    per_batch: bool = False  # a DataLoaderWorker event per batch, not one per worker
    init_s: float = 0.0  # from the trace's start to its first fetch: the process's start-up


def write_timeline(root: Path, spec: TraceSpec) -> list[tuple[float, float]]:
    """A model timeline as the predecessor writes it; returns its steps' (start, end)."""
    base_us = spec.start * 1e6
    events: list[dict[str, object]] = [
        {"name": "process_name", "ph": "M", "pid": 0, "args": {"name": "default",
         "start_time_since_epoch_in_micros": base_us}},
        {"name": "process_name", "ph": "M", "pid": 1, "args": {"name": "Step:ModeKeys.TRAIN"}},
        {"name": "process_name", "ph": "M", "pid": 2, "args": {"name": "Forward"}},
        {"name": "process_name", "ph": "M", "pid": 3, "args": {"name": "Backward"}},
    ]  # fmt: skip
    if spec.fetch_s and spec.settings:
        events.append({"name": "_MultiProcessingDataLoaderIter.__init__", "ph": "X", "ts": 0,
                       "dur": 1000, "pid": 0, "tid": 1, "args": {"num_workers": str(spec.workers),
                       "pin_memory": "False", "pid": spec.pid}})  # fmt: skip
    t, spans = 2000.0 + spec.init_s * 1e6, []
    for k in range(spec.steps):
        if spec.fetch_s:
            events.append({"name": "DataLoaderIter::GetNext", "ph": "X", "ts": t,
                           "dur": spec.fetch_s * 1e6, "pid": 0, "tid": 1,
                           "args": {"worker_id": k % max(spec.workers, 1)}})  # fmt: skip
            if spec.per_batch and spec.workers:
                w = k % spec.workers
                events.append({"name": "DataLoaderWorker", "ph": "X", "ts": t - spec.fetch_s * 1e6,
                               "dur": spec.fetch_s * 1e6, "pid": 0, "tid": 10 + w,
                               "args": {"worker_id": w, "pid": spec.pid + 1 + w}})  # fmt: skip
            t += spec.fetch_s * 1e6
        work = spec.step_s * 1e6
        events.append(
            {
                "name": "Step:ModeKeys.TRAIN",
                "ph": "X",
                "ts": t,
                "dur": work,
                "pid": 1,
                "tid": 1,
                "args": {"step_num": str(spec.first_step + k)},
            }
        )
        events.append({"name": "Net", "ph": "X", "ts": t, "dur": work * 0.4, "pid": 2, "tid": 1})
        events.append(
            {"name": "Net.fc1", "ph": "X", "ts": t, "dur": work * 0.2, "pid": 2, "tid": 1}
        )
        events.append(
            {
                "name": "Backward",
                "ph": "X",
                "ts": t + work * 0.45,
                "dur": work * 0.5,
                "pid": 3,
                "tid": 1,
            }
        )
        events.append(
            {"name": "cudaLaunchKernel", "ph": "X", "ts": t + 10, "dur": 5, "pid": 0, "tid": 1}
        )
        spans.append((spec.start + t / 1e6, spec.start + (t + work) / 1e6))
        t += work + spec.optimizer_s * 1e6
    for w in range(spec.workers if spec.fetch_s and not spec.per_batch else 0):
        events.append(
            {
                "name": "DataLoaderWorker",
                "ph": "X",
                "ts": 1500 + w,
                "dur": t - 1500,
                "pid": 0,
                "tid": 10 + w,
                "args": {"worker_id": w, "pid": spec.pid + 1 + w},
            }
        )
    end_us = int(spec.start * 1e6 + t)
    folder = root / "profiler-output/framework/pevents" / hour_folder(spec.start)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{end_us}_{spec.node_id}_model_timeline.json"
    path.write_text("[\n" + ",\n".join(json.dumps(e) for e in events) + "\n]\n")
    return spans  # fmt: skip


def write_python_profile(root: Path, node_id: str) -> Path:
    window = f"{int(START)}_train-5_{int(START) + 9}_train-9"
    folder = root / f"profiler-output/framework/pytorch/cprofile/{node_id}/{window}"
    folder.mkdir(parents=True, exist_ok=True)
    prof = cProfile.Profile()
    prof.runcall(sum, range(1000))
    prof.dump_stats(str(folder / "python_stats"))
    return folder


def write_detailed(root: Path, node_id: str) -> Path:
    folder = (
        root / "profiler-output/framework/pytorch/detailed_profiling" / hour_folder(START) / node_id
    )
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "detailed.json"
    path.write_text(
        json.dumps(
            {
                "traceEvents": [
                    {"name": "aten::mm", "ph": "X", "ts": 1, "dur": 3, "pid": 1, "tid": 1}
                ]
            }
        )
    )
    return path


# -- debugger tensors: TFRecord framing around Event protos -------------------------------


def _crc32c(data: bytes) -> int:
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 & -(crc & 1))
    return crc ^ 0xFFFFFFFF


def _masked(data: bytes) -> int:
    crc = _crc32c(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def _varint(n: int) -> bytes:
    n &= (1 << 64) - 1
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _field(num: int, wire: int, payload: bytes | int) -> bytes:
    key = _varint(num << 3 | wire)
    if wire == 0:
        return key + _varint(int(payload))  # type: ignore[arg-type]
    assert isinstance(payload, bytes)
    return key + (_varint(len(payload)) + payload if wire == 2 else payload)


_TF_DTYPES = {np.dtype("float32"): 1, np.dtype("float64"): 2, np.dtype("int32"): 3,
              np.dtype("int64"): 9, np.dtype("bool"): 10}  # fmt: skip


def event_record(wall: float, step: int, tensors: dict[str, np.ndarray]) -> bytes:
    values = b""
    for name, arr in tensors.items():
        shape = b"".join(_field(2, 2, _field(1, 0, d)) for d in arr.shape)
        proto = _field(1, 0, _TF_DTYPES[arr.dtype]) + _field(2, 2, shape)
        proto += _field(
            4, 2, np.ascontiguousarray(arr).astype(arr.dtype.newbyteorder("<")).tobytes()
        )
        values += _field(1, 2, _field(1, 2, name.encode()) + _field(8, 2, proto))
    event = _field(1, 1, struct.pack("<d", wall)) + _field(2, 0, step) + _field(5, 2, values)
    header = struct.pack("<Q", len(event))
    return header + struct.pack("<I", _masked(header)) + event + struct.pack("<I", _masked(event))


def write_tensors(
    root: Path,
    worker: str,
    steps: dict[int, dict[str, np.ndarray]],
    mode: str = "TRAIN",
    collections: dict[str, list[str]] | None = None,
) -> None:
    """One event file and one index file per step, as the debugger writes them."""
    out = root / "debug-output"
    for step, tensors in steps.items():
        rel = f"events/{step:012d}/{step:012d}_{worker}.tfevents"
        record = event_record(START + 2340 + step, step, tensors)
        (out / rel).parent.mkdir(parents=True, exist_ok=True)
        (out / rel).write_bytes(record)
        index = {"meta": {"mode": mode, "mode_step": step, "event_file_name": rel},
                 "tensor_payload": [{"tensorname": n, "start_idx": 0, "length": len(record)}
                                    for n in tensors]}  # fmt: skip
        ipath = out / f"index/{step // 1000:09d}/{step:012d}_{worker}.json"
        ipath.parent.mkdir(parents=True, exist_ok=True)
        ipath.write_text(json.dumps(index))
    if collections:
        cpath = out / f"collections/000000000/{worker}_collections.json"
        cpath.parent.mkdir(parents=True, exist_ok=True)
        body = {"collections": {k: {"name": k, "tensor_names": v} for k, v in collections.items()}}
        cpath.write_text(json.dumps(body))


def write_old_job(root: Path) -> None:
    """The tests' predecessor job (docs/sagemaker.md shows its import): 2 ranks, 2 min."""
    # 2330..2450 s after START: the minute 2390-2450 crosses the hour at START + 2400.
    write_system(root, "algo-1", START + 2330, 120, cores=4, gpus=1)
    write_timeline(root, TraceSpec("0-algo-1", steps=30, workers=2))
    write_timeline(root, TraceSpec("1-algo-1", steps=30, fetch_s=0.0))  # no loader events
    write_python_profile(root, "0-algo-1")
    write_detailed(root, "1-algo-1")
    tensors = {
        k: {
            "loss": np.array(1.0 / (k + 1), np.float32),
            "fc.weight": np.full((3, 2), k, np.float32),
        }
        for k in range(5)
    }
    write_tensors(root, "worker_0", tensors, collections={"losses": ["loss"]})
    (root / "profiler-output/training_job_end.ts").write_text("1")
