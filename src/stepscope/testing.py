"""Synthetic jobs for the report's tests and benchmark, written through the store's writer.

The data is deterministic (seeded) and realistic in shape: a training loop with
periodic evaluation, a few slow steps, one CPU spike and one GPU dip at known
times, so that tests can check that the report's charts keep them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from stepscope import __version__
from stepscope.jobfolder import (
    EVENTS_SCHEMA,
    STEPS_SCHEMA,
    JobMeta,
    RuleVerdict,
    paths,
    write_meta,
)
from stepscope.store import SegmentWriter, Store, open_store


@dataclass(frozen=True)
class SyntheticJob:
    """The shape of a synthetic job."""

    name: str = "synthetic"
    hours: float = 0.05
    nodes: Sequence[str] = ("node-a",)
    ranks_per_node: int = 1
    cores: int = 8
    gpus: int = 0
    interval_ms: int = 500
    step_s: float = 0.4
    start_time: float = 1_763_850_000.0
    init_s: float = 12.0
    final_s: float = 3.0
    command: Sequence[str] = ("python", "train.py", "--lr", "0.1")
    seed: int = 0

    @property
    def loop_start(self) -> float:
        return self.start_time + self.init_s

    @property
    def end_time(self) -> float:
        return self.loop_start + self.hours * 3600 + self.final_s

    @property
    def spike_time(self) -> float:
        """When the CPU of every node hits 100 % for one sample."""
        return self.loop_start + self.hours * 3600 * 0.37


class _Clock:
    """The time a SegmentWriter names its segments by: the rows' own times."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _write_stream(store: Store, prefix: str, table: pa.Table, time_col: str) -> None:
    clock = _Clock()
    writer = SegmentWriter(store, prefix, clock=clock)
    for batch in table.to_batches(max_chunksize=writer.segment_rows):
        clock.now = float(batch.column(time_col)[0].as_py())
        writer.append(batch)
        clock.now = float(batch.column(time_col)[-1].as_py())
        writer.flush()


def _system_table(spec: SyntheticJob, node: str, rng: np.random.Generator) -> pa.Table:
    t = np.arange(spec.start_time, spec.end_time, spec.interval_ms / 1000)
    n = len(t)
    wave = 0.5 + 0.5 * np.sin(np.linspace(0, 12 * np.pi, n))
    cores = np.clip(40 + 30 * wave[None, :] + rng.normal(0, 8, (spec.cores, n)), 0, 100)
    spike = int(np.searchsorted(t, spec.spike_time))
    cores[:, spike] = 100.0
    cols: dict[str, npt.ArrayLike] = {
        "time": t,
        "node": np.full(n, node),
        "interval_ms": np.full(n, spec.interval_ms, np.int32),
    }
    cpu = cores.mean(axis=0).astype(np.float32)
    cols["cpu"] = cpu
    cols["cpu_iowait"] = np.clip(rng.gamma(1.0, 1.5, n), 0, 100).astype(np.float32)
    cols.update({f"cpu{i}": cores[i].astype(np.float32) for i in range(spec.cores)})
    mem_total = 6.4e10
    mem_used = mem_total * (0.3 + 0.1 * wave)
    cols["mem_used"] = mem_used
    cols["mem_percent"] = (100 * mem_used / mem_total).astype(np.float32)
    for col, scale in (
        ("disk_read_bps", 5e7),
        ("disk_write_bps", 1e7),
        ("net_rx_bps", 2e8),
        ("net_tx_bps", 2e8),
    ):
        values = rng.gamma(2.0, scale / 2, n)
        values[0] = np.nan  # the first sample of a sampler has no throughput
        cols[col] = values
    cols["proc_cpu"] = (cpu * spec.cores * 0.8).astype(np.float32)
    cols["proc_rss"] = np.full(n, 8e9)
    for g in range(spec.gpus):
        cols.update(_gpu_columns(g, n, wave, spike, rng))
    return pa.table(cols)


def _gpu_columns(
    g: int, n: int, wave: npt.NDArray[np.float64], spike: int, rng: np.random.Generator
) -> dict[str, npt.NDArray[np.float32] | npt.NDArray[np.float64]]:
    util = np.clip(85 - 20 * wave + rng.normal(0, 4, n), 0, 100)
    util[spike] = 0.0  # the GPUs starve while the CPU spikes
    total = 4.2e10
    used = total * np.clip(0.6 + 0.01 * g + rng.normal(0, 0.01, n), 0, 1)
    return {
        f"gpu{g}_util": util.astype(np.float32),
        f"gpu{g}_mem_used": used,
        f"gpu{g}_mem_total": np.full(n, total),
        f"gpu{g}_mem_util": (100 * used / total).astype(np.float32),
        f"gpu{g}_power_w": (150 + 2.5 * util).astype(np.float32),
        f"gpu{g}_temp_c": (45 + 0.3 * util).astype(np.float32),
    }


def _steps_table(spec: SyntheticJob, node: str, rank: int, rng: np.random.Generator) -> pa.Table:
    count = max(int(spec.hours * 3600 / spec.step_s), 3)
    dur = rng.lognormal(np.log(spec.step_s), 0.08, count)
    slow = rng.choice(count, size=max(count // 2000, 1), replace=False)
    dur[slow] *= 6  # a few outliers
    dur *= spec.hours * 3600 / dur.sum()  # the loop fills its time
    end = spec.loop_start + np.cumsum(dur)
    start = end - dur
    phase = np.where(np.arange(count) % 50 == 49, "eval", "train")
    step = np.zeros(count, np.int64)
    for p in ("train", "eval"):
        mask = phase == p
        step[mask] = np.arange(mask.sum())
    frac = rng.dirichlet([2, 5, 8, 2, 1], count).astype(np.float32)
    parts = frac * dur[:, None].astype(np.float32)
    eval_mask = phase == "eval"
    parts[eval_mask, 2:4] = 0.0  # no backward or optimizer when evaluating
    cols: dict[str, npt.ArrayLike] = {
        "rank": np.full(count, rank, np.int32),
        "local_rank": np.full(count, rank % spec.ranks_per_node, np.int32),
        "node": np.full(count, node),
        "pid": np.full(count, 1000 + rank, np.int32),
        "phase": phase,
        "step": step,
        "start": start,
        "end": end,
        "duration": dur.astype(np.float32),
    }
    for i, p in enumerate(("data_wait", "forward", "backward", "optimizer")):
        cols[p] = parts[:, i]
    cols["other"] = np.maximum(dur.astype(np.float32) - parts[:, :4].sum(axis=1), 0).astype(
        np.float32
    )
    cols["profiled"] = np.zeros(count, bool)
    for p in ("gpu_forward", "gpu_backward", "gpu_optimizer"):
        cols[p] = pa.nulls(count, pa.float32())
    return pa.table(cols, schema=STEPS_SCHEMA)


def _events_table(spec: SyntheticJob, node: str, rank: int) -> pa.Table:
    times = [spec.start_time, spec.start_time + 1.0, spec.end_time - 0.5]
    kinds = ["process_start", "agent_start", "agent_stop"]
    return pa.table(
        {
            "time": times,
            "rank": [rank] * 3,
            "local_rank": [rank % spec.ranks_per_node] * 3,
            "node": [node] * 3,
            "pid": [1000 + rank] * 3,
            "kind": kinds,
            "detail": ["{}"] * 3,
        },
        schema=EVENTS_SCHEMA,
    )


def write_synthetic_job(
    url: str, spec: SyntheticJob | None = None, rules: Sequence[RuleVerdict] = ()
) -> Store:
    """Write a complete job folder at ``url`` (and its ``rules/<rule>.json``); returns its store."""
    spec = spec or SyntheticJob()
    store = open_store(url)
    rng = np.random.default_rng(spec.seed)
    meta = JobMeta(
        name=spec.name,
        command=list(spec.command),
        cwd="/home/me/project",
        config={},
        hosts=list(spec.nodes),
        start_time=spec.start_time,
        end_time=spec.end_time,
        status="Completed",
        exit_code=0,
        stepscope_version=__version__,
    )
    write_meta(store, meta)
    for i, node in enumerate(spec.nodes):
        store.write_json(
            paths.node_key(node),
            {
                "node": node,
                "hostname": node,
                "cpu_count": spec.cores,
                "mem_total": 6.4e10,
                "gpus": [
                    {"index": g, "name": "NVIDIA A100-SXM4-40GB", "mem_total": 4.2e10}
                    for g in range(spec.gpus)
                ],
                "interval_ms": spec.interval_ms,
                "clock_offset_s": 0.0,
                "boot_time": spec.start_time - 1e5,
            },
        )
        _write_stream(store, paths.system_stream(node), _system_table(spec, node, rng), "time")
        for local in range(spec.ranks_per_node):
            rank = i * spec.ranks_per_node + local
            _write_stream(
                store, paths.steps_stream(rank), _steps_table(spec, node, rank, rng), "start"
            )
            _write_stream(store, paths.events_stream(rank), _events_table(spec, node, rank), "time")
    for result in rules:
        store.write_json(paths.rule_key(result["rule"]), result)
    return store
