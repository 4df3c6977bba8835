"""Synthetic job folders for the rule tests, written through the store's own writer.

GPU metrics imitate an 8x A100-SXM4-40GB node in training (as tests/fakes/pynvml.py):
utilization 85-98 % with short dips, ~31 GiB of 40 GiB used, power following
utilization, 61-66 C. Each builder takes arrays so a test states its problem exactly.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

import stepscope
from stepscope.jobfolder import EVENTS_SCHEMA, STEPS_SCHEMA
from stepscope.rules import RuleResult, Status, evaluate_job
from stepscope.store import SegmentWriter, Store, open_store

T0 = 1_760_000_000.0
MEM_TOTAL = 42949672960.0
NODE = "node-a"


def new_job(
    path: Path,
    rules: list[dict[str, Any]] | None = None,
    status: str = "Completed",
    start: float = T0,
    end: float | None = None,
) -> Store:
    """A job folder with its job.json (status, start, rule set)."""
    store = open_store(str(path))
    meta = {
        "format_version": 1,
        "name": path.name,
        "command": ["python", "train.py"],
        "cwd": str(path.parent),
        "config": {"rules": rules or []},
        "hosts": [NODE],
        "start_time": start,
        "end_time": end,
        "status": status,
        "exit_code": 0,
        "reason": None,
        "stepscope_version": "0.1.0",
    }
    store.write_json("job.json", meta)
    return store


def write_rows(
    store: Store,
    prefix: str,
    frame: pd.DataFrame,
    schema: pa.Schema | None = None,
    segment_rows: int = 50_000,
) -> None:
    """Append ``frame`` to the stream ``prefix`` with a SegmentWriter, and flush."""
    # Segments are named after their first row's time, as a live writer names them.
    first = float(frame["time" if "time" in frame else "start"].iloc[0])
    writer = SegmentWriter(store, prefix, segment_rows=segment_rows, clock=lambda: first)
    table = pa.Table.from_pandas(frame, schema=schema, preserve_index=False)
    for batch in table.to_batches(max_chunksize=segment_rows):
        writer.append(batch)
        writer.flush()


def node_info(
    store: Store,
    node: str = NODE,
    gpus: int = 8,
    interval_ms: int = 500,
    autogroup: bool | None = None,
) -> None:
    gpu_list = [
        {"index": i, "name": "NVIDIA A100-SXM4-40GB", "mem_total": MEM_TOTAL} for i in range(gpus)
    ]
    store.write_json(
        f"nodes/{node}.json",
        {
            "node": node,
            "hostname": node,
            "cpu_count": 4,
            "mem_total": 6.8e10,
            "gpus": gpu_list,
            "interval_ms": interval_ms,
            "clock_offset_s": 0.0,
            "boot_time": T0 - 1e4,
            "sched_autogroup": autogroup,
        },
    )


def busy_gpu(n: int, seed: int = 0, level: float = 92.0, dip_every: int = 50) -> np.ndarray:
    """A training GPU's utilization: ``level`` +- 6 %, a short dip to 0 every ``dip_every``."""
    rng = np.random.default_rng(seed)
    util = np.clip(rng.normal(level, 3.0, n).round(), 0, 100)
    if dip_every:
        util[seed % dip_every :: dip_every] = 0.0
    return util


def flat_mem(n: int, seed: int = 0, percent: float = 77.5) -> np.ndarray:
    rng = np.random.default_rng(seed + 100)
    return percent + rng.normal(0.0, 0.02, n)


def system_frame(
    n: int,
    node: str = NODE,
    start: float = T0,
    interval: float = 0.5,
    cpu: np.ndarray | float = 45.0,
    iowait: np.ndarray | float = 1.0,
    gpu_util: list[np.ndarray] | None = None,
    gpu_mem: list[np.ndarray] | None = None,
    proc_cpu: float = 150.0,
    proc_io_wait: float | None = None,
) -> pd.DataFrame:
    """Wide samples of one node (docs/format.md); no GPU columns when ``gpu_util`` is None,
    no ``proc_io_wait`` (an older sampler) when it is None."""
    t = start + interval * np.arange(n)
    cpu_arr = np.broadcast_to(np.asarray(cpu, dtype=np.float32), (n,))
    cols: dict[str, Any] = {
        "time": t,
        "node": node,
        "interval_ms": np.int32(interval * 1000),
        "cpu": cpu_arr,
        "cpu_iowait": np.broadcast_to(np.float32(iowait), (n,)).astype(np.float32),
        **{f"cpu{i}": cpu_arr for i in range(4)},
        "mem_used": np.full(n, 2.0e10),
        "mem_percent": np.full(n, 30.0, np.float32),
        "disk_read_bps": np.full(n, 1e6),
        "disk_write_bps": np.full(n, 1e5),
        "net_rx_bps": np.full(n, 1e4),
        "net_tx_bps": np.full(n, 1e4),
        "proc_cpu": np.full(n, proc_cpu, np.float32),
        "proc_rss": np.full(n, 4e9),
    }
    if proc_io_wait is not None:
        cols["proc_io_wait"] = np.full(n, proc_io_wait, np.float32)
    for i, util in enumerate(gpu_util or []):
        mem = gpu_mem[i] if gpu_mem else flat_mem(n, i)
        cols[f"gpu{i}_util"] = util.astype(np.float32)
        cols[f"gpu{i}_mem_used"] = mem / 100.0 * MEM_TOTAL
        cols[f"gpu{i}_mem_total"] = np.full(n, MEM_TOTAL)
        cols[f"gpu{i}_mem_util"] = mem.astype(np.float32)
        cols[f"gpu{i}_power_w"] = (60 + 3.5 * util).astype(np.float32)
        cols[f"gpu{i}_temp_c"] = (61 + util / 20).astype(np.float32)
    return pd.DataFrame(cols)


def write_system(store: Store, frame: pd.DataFrame, node: str = NODE, **kw: Any) -> None:
    write_rows(store, f"system/{node}", frame, **kw)


def steps_frame(
    n: int,
    rank: int = 0,
    node: str = NODE,
    start: float = T0 + 5.0,
    duration: np.ndarray | float = 0.2,
    data_wait: np.ndarray | float = 0.005,
    forward: np.ndarray | float = 0.06,
    phase: str = "train",
    profiled: np.ndarray | bool = False,
    gpu: tuple[float, float, float] | None = None,
) -> pd.DataFrame:
    """``n`` consecutive steps of one rank (each starts where the previous ended);
    ``gpu``: the device's forward, backward and optimizer seconds (CUDA-event spans),
    unknown (null, a CPU job) when None."""
    d = np.broadcast_to(np.asarray(duration, dtype=np.float64), (n,)).copy()
    ends = start + np.cumsum(d)
    wait = np.broadcast_to(np.asarray(data_wait, dtype=np.float64), (n,))
    fwd = np.broadcast_to(np.asarray(forward, dtype=np.float64), (n,))
    back, opt = d * 0.4, np.full(n, 0.002)
    return pd.DataFrame(
        {
            "rank": np.int32(rank),
            "local_rank": np.int32(rank % 8),
            "node": node,
            "pid": np.int32(1000 + rank),
            "phase": phase,
            "step": np.arange(n, dtype=np.int64),
            "start": ends - d,
            "end": ends,
            "duration": d.astype(np.float32),
            "data_wait": wait.astype(np.float32),
            "forward": fwd.astype(np.float32),
            "backward": back.astype(np.float32),
            "optimizer": opt.astype(np.float32),
            "other": np.maximum(d - wait - fwd - back - opt, 0).astype(np.float32),
            "profiled": np.broadcast_to(np.asarray(profiled, dtype=bool), (n,)),
            **{
                col: np.full(n, np.nan if gpu is None else gpu[i], np.float32)
                for i, col in enumerate(("gpu_forward", "gpu_backward", "gpu_optimizer"))
            },
        }
    )


def write_steps(store: Store, frame: pd.DataFrame, **kw: Any) -> None:
    rank = int(frame["rank"].iloc[0])
    write_rows(store, f"steps/rank-{rank}", frame, STEPS_SCHEMA, **kw)


def write_process_start(store: Store, rank: int = 0, node: str = NODE, time: float = T0) -> None:
    frame = pd.DataFrame(
        {
            "time": [time],
            "rank": np.int32([rank]),
            "local_rank": np.int32([rank % 8]),
            "node": [node],
            "pid": np.int32([1000 + rank]),
            "kind": ["process_start"],
            "detail": [json.dumps({"argv": ["train.py"]})],
        }
    )
    write_rows(store, f"events/rank-{rank}", frame, EVENTS_SCHEMA)


def write_event(
    store: Store, kind: str, detail: dict[str, Any], rank: int = 0, time: float = T0 + 1.0
) -> None:
    """One lifecycle event of ``rank`` (``threads``, ``dataloader``...: docs/format.md)."""
    frame = pd.DataFrame(
        {
            "time": [time],
            "rank": np.int32([rank]),
            "local_rank": np.int32([rank % 8]),
            "node": [NODE],
            "pid": np.int32([1000 + rank]),
            "kind": [kind],
            "detail": [json.dumps(detail)],
        }
    )
    write_rows(store, f"events/rank-{rank}", frame, EVENTS_SCHEMA)


def gpu_job(path: Path, n: int, gpu_util: list[np.ndarray], **kw: Any) -> Store:
    """A one-node GPU job: samples, node facts, one rank's steps and its start event."""
    store = new_job(path, end=T0 + n * 0.5)
    node_info(store, gpus=len(gpu_util))
    write_system(store, system_frame(n, gpu_util=gpu_util, **kw))
    write_steps(store, steps_frame(int(n * 0.5 / 0.2) - 30))
    write_process_start(store)
    return store


def judge(path: Path, rule: str, **params: Any) -> RuleResult:
    """The one verdict of ``rule`` (with ``params``) over the job at ``path``."""
    (res,) = evaluate_job(stepscope.open(str(path)), [{"name": rule, "parameters": params}])
    return res


def fires(res: RuleResult) -> None:
    """A firing verdict: IssuesFound with triggers, findings and datapoints."""
    assert res.status is Status.ISSUES_FOUND, res
    assert res.triggers > 0 and res.findings and res.datapoints > 0


def silent(res: RuleResult) -> None:
    """A silent twin's verdict: NoIssuesFound on datapoints > 0, no finding."""
    assert res.status is Status.NO_ISSUES_FOUND, res
    assert res.datapoints > 0 and not res.findings
