"""The reader API over job folders written through the store's own writers."""

from __future__ import annotations

import time

import pyarrow as pa
import pytest

import stepscope
from stepscope.jobfolder import STEPS_SCHEMA, SYSTEM_BASE_SCHEMA
from stepscope.store import SegmentWriter, open_store


def _steps(rank: int, node: str, n: int, t0: float) -> pa.RecordBatch:
    cols = {f.name: [None] * n for f in STEPS_SCHEMA}
    cols.update(
        rank=[rank] * n,
        local_rank=[rank % 2] * n,
        node=[node] * n,
        pid=[100 + rank] * n,
        phase=["train"] * n,
        step=list(range(int(t0) - 1000, int(t0) - 1000 + n)),
        start=[t0 + i for i in range(n)],
        end=[t0 + i + 0.5 for i in range(n)],
        duration=[0.5] * n,
        profiled=[False] * n,
    )
    return pa.RecordBatch.from_pydict(cols, schema=STEPS_SCHEMA)


def _system(node: str, n: int, t0: float, gpus: int) -> pa.RecordBatch:
    cols: dict = {f.name: [None] * n for f in SYSTEM_BASE_SCHEMA}
    cols.update(
        time=[t0 + i * 0.5 for i in range(n)],
        node=[node] * n,
        interval_ms=[500] * n,
        cpu=[float(i % 100) for i in range(n)],
    )
    fields = list(SYSTEM_BASE_SCHEMA)
    for g in range(gpus):
        cols[f"gpu{g}_util"] = [50.0 + g] * n
        fields.append(pa.field(f"gpu{g}_util", pa.float32()))
    return pa.RecordBatch.from_pydict(cols, schema=pa.schema(fields))


@pytest.fixture(params=["local", "memory"])
def job_url(request, tmp_path) -> str:
    base = str(tmp_path) if request.param == "local" else f"memory://reader-{time.time_ns()}"
    url = f"{base}/job"
    store = open_store(url)
    store.write_json(
        "job.json",
        {
            "format_version": 1,
            "name": "job",
            "status": "Completed",
            "start_time": 1000.0,
            "end_time": 1100.0,
        },
    )
    for rank, node in ((0, "a"), (1, "a"), (2, "b")):
        w = SegmentWriter(store, f"steps/rank-{rank}", segment_rows=4)
        for part in range(3):  # several segments per rank
            w.append(_steps(rank, node, 4, 1000.0 + part * 4))
            w.flush()
    for node, gpus in (("a", 2), ("b", 0)):  # nodes differ in columns
        w = SegmentWriter(store, f"system/{node}")
        w.append(_system(node, 20, 1000.0, gpus))
        w.flush()
    return url


def test_selection_by_rank_node_phase_and_time(job_url):
    job = stepscope.open(job_url)
    assert job.ranks() == [0, 1, 2] and job.nodes() == ["a", "b"]
    assert len(job.steps()) == 36
    assert set(job.steps(ranks=[2])["node"]) == {"b"}
    assert len(job.steps(nodes=["a"])) == 24
    window = job.steps(ranks=[0], start=1002.0, end=1005.0)
    assert list(window["start"]) == [1002.0, 1003.0, 1004.0]
    assert job.steps(phase="eval").empty


def test_system_union_by_name_and_long_form(job_url):
    job = stepscope.open(job_url)
    wide = job.system()
    assert len(wide) == 40
    assert wide.loc[wide["node"] == "b", "gpu0_util"].isna().all()
    assert (wide.loc[wide["node"] == "a", "gpu1_util"] == 51.0).all()
    long = job.system_long(nodes=["a"], start=1000.0, end=1002.0)
    assert set(long["metric"]) == {"cpu", "gpu0_util", "gpu1_util"}
    assert len(long) == 4 * 3  # 4 samples in [1000, 1002) x 3 metrics with values


def test_sql_over_views(job_url):
    job = stepscope.open(job_url)
    df = job.sql("SELECT rank, count(*) AS n FROM steps GROUP BY rank ORDER BY rank")
    assert list(df["n"]) == [12, 12, 12]


def test_not_a_job_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"no job\.json"):
        stepscope.open(tmp_path)


def test_newer_format_is_refused(tmp_path):
    open_store(tmp_path).write_json("job.json", {"format_version": 99, "status": "Completed"})
    with pytest.raises(ValueError, match="Upgrade"):
        _ = stepscope.open(tmp_path).meta
