"""The dashboard's caches: segments read once, summaries kept per segment, never served stale.

The two-pass downsampling (:mod:`stepscope.analysis.rollup`) is checked against
the one-pass one it stands in for; the API tests run a running job whose
stream grows by a segment and then has that segment rewritten.
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from starlette.testclient import TestClient

from stepscope.analysis.rollup import Rolled, Rows, combine, fine_width, summarize
from stepscope.dashboard import _data, create_app
from stepscope.dashboard._cache import Sized
from stepscope.dashboard._streams import Streams
from stepscope.store import SegmentWriter, encode_parquet, open_store
from stepscope.testing import SyntheticJob, write_synthetic_job

T0 = 1_763_850_000.0
SEGMENT = 60  # rows per segment: 30 s at 500 ms
SPIKE, REWRITTEN = 9.99e12, 5.0e12


def test_streams_read_only_what_changed_and_match_a_full_read(tmp_path: Path) -> None:
    store = open_store(str(tmp_path))
    clock = [1000.0]
    writer = SegmentWriter(store, "s", segment_rows=5, clock=lambda: clock[0])
    streams = Streams()
    for i in range(23):
        clock[0] += 1
        writer.append(pa.record_batch({"time": [clock[0]], "v": [float(i)]}))
        writer.flush()
        _, parts = streams.parts(store, "s", "time")
        assert np.concatenate([p.column("v") for p in parts]).tolist() == list(range(i + 1))
    assert streams.files_read == 23  # one changed segment per refresh, never the old ones


def _series(n: int) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    rng = np.random.default_rng(3)
    walk, noise = np.cumsum(rng.normal(size=n)), rng.normal(size=n)
    walk[n // 3] = 1e6  # a one-sample spike
    noise[n // 4 : n // 2] = np.nan  # an outage
    return np.arange(n) * 0.5, {"walk": walk, "noise": noise}


def test_two_passes_equal_one_on_an_aligned_grid_whatever_the_parts() -> None:
    x, cols = _series(8193)  # [0, 4096] s: 64 chart buckets of 64 s, fine buckets of 8 s
    assert fine_width(x[0], x[-1], 64, len(x)) == 8.0
    cuts = [0, 100, 1000, 1001, 5000, len(x)]
    parts = [
        summarize(x[a:b], {k: v[a:b] for k, v in cols.items()}, 8.0)
        for a, b in itertools.pairwise(cuts)
    ]
    parts[2] = summarize(x[1000:1001], {"walk": cols["walk"][1000:1001]}, 8.0)  # no "noise"
    cols["noise"][1000] = np.nan
    one, two = Rows(x, cols), Rolled(combine(parts), x[0], x[-1], len(x))
    for method, buckets in (("minmax", 64), ("mean", 64), ("mean", 16)):
        x1, a = getattr(one, method)(["walk", "noise"], buckets)
        x2, b = getattr(two, method)(["walk", "noise"], buckets)
        assert np.array_equal(x1, x2)
        for k in a:
            assert np.allclose(a[k], b[k], equal_nan=True, rtol=1e-12), (method, k)
    assert two.totals(["walk"])["walk"] == pytest.approx(one.totals(["walk"])["walk"])
    assert two.present() == one.present() == ["walk", "noise"]


def test_two_passes_keep_every_extreme_on_any_grid() -> None:
    x, cols = _series(20_000)
    x = x + 3.3  # the chart's buckets no longer start on the fine grid
    width = fine_width(x[0], x[-1], 100, len(x))
    assert width is not None
    parts = [summarize(x[a : a + 600], {k: v[a : a + 600] for k, v in cols.items()}, width)
             for a in range(0, len(x), 600)]  # fmt: skip
    _, down = Rolled(combine(parts), x[0], x[-1], len(x)).minmax(["walk", "noise"], 100)
    for k, v in cols.items():
        assert np.nanmax(down[k]) == np.nanmax(v) and np.nanmin(down[k]) == np.nanmin(v)
    gap = np.isnan(down["noise"].reshape(-1, 2)).all(axis=1)
    assert 20 <= gap.sum() <= 26  # the outage (a quarter of the time) is still a hole


def test_summaries_are_bounded_by_bytes() -> None:
    cache = Sized(max_bytes=10_000)
    for i in range(10):
        cache.get(i, lambda: np.zeros(250))  # 2,000 bytes each
    assert cache.nbytes <= 10_000 and cache.get(9, lambda: np.ones(1))[0] == 0.0  # kept
    assert cache.get(0, lambda: np.ones(1))[0] == 1.0  # the oldest went first


def _rows(start: float, n: int, disk: float | None = None) -> pa.Table:
    t = start + np.arange(n) * 0.5
    read = np.full(n, 1e6)
    if disk is not None:
        read[n // 2] = disk
    cols = {"time": t, "node": ["node-a"] * n, "interval_ms": np.full(n, 500, np.int32),
            "cpu": 50 + 10 * np.sin(t / 7), "disk_read_bps": read}  # fmt: skip
    return pa.table(cols)


@pytest.fixture
def live(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """A running job whose node has ten 30-s segments; a client, the folder, the summaries."""
    store = write_synthetic_job(str(tmp_path / "live"), SyntheticJob(name="live", start_time=T0))
    store.write_json("job.json", store.read_json("job.json") | {"status": "Running",
                                                                "end_time": None})  # fmt: skip
    store.write_json("heartbeat/node-a.json", {"time": time.time() + 3600, "pid": 1})
    shutil.rmtree(tmp_path / "live" / "system" / "node-a")
    clock = [T0]
    writer = SegmentWriter(store, "system/node-a", segment_rows=SEGMENT, clock=lambda: clock[0])
    for k in range(10):
        clock[0] = T0 + k * SEGMENT * 0.5
        writer.append(_rows(clock[0], SEGMENT).to_batches()[0])
        writer.flush()
    monkeypatch.setattr(_data, "LIVE_CHECK_S", 0.0)  # list the files on every request
    made: list[Sized] = []
    monkeypatch.setattr(_data, "Sized", lambda: made.append(Sized()) or made[-1])
    before = set(threading.enumerate())
    with TestClient(create_app(str(tmp_path), "127.0.0.1", "t0ken-for-the-tests-0123456789"),
                    base_url="http://127.0.0.1:8765") as client:  # fmt: skip
        yield client, tmp_path / "live" / "system" / "node-a", made[0]
    for t in set(threading.enumerate()) - before:  # AnyIO's idle workers end with the loop
        t.join(timeout=10)


def _system(client: TestClient) -> dict[str, Any]:
    data: dict[str, Any] = client.get("/api/jobs/live/system?node=node-a&buckets=10").json()
    return data


def _disk_max(data: dict[str, Any]) -> float:
    values = data["charts"]["disk"]["series"][0]["values"]
    return float(max(v for v in values if v is not None))


def test_a_running_jobs_new_segment_appears_and_a_rewritten_one_is_not_served_stale(
    live: tuple[TestClient, Path, Sized],
) -> None:
    client, folder, summaries = live
    before = _system(client)
    assert before["samples"] == 10 * SEGMENT and _disk_max(before) == 1e6
    assert summaries.misses >= 10  # drawn from per-segment summaries, not in one pass
    seen = summaries.misses
    start = T0 + 10 * SEGMENT * 0.5
    name = folder / f"part-{int(start * 1000):013d}-1-00099.parquet"
    name.write_bytes(encode_parquet(_rows(start, 40, disk=SPIKE)))
    grown = _system(client)
    assert grown["samples"] == 10 * SEGMENT + 40 and grown["last"] == start + 39 * 0.5
    assert _disk_max(grown) == SPIKE
    assert summaries.misses - seen <= 2  # the new segment and the old ones combined, once
    name.write_bytes(encode_parquet(_rows(start, 41, disk=REWRITTEN)))  # the writer's next flush
    rewritten = _system(client)
    assert rewritten["samples"] == 10 * SEGMENT + 41 and _disk_max(rewritten) == REWRITTEN
    assert _system(client) == rewritten  # then served from the caches


def _end(folder: Path) -> None:
    job = folder.parents[1] / "job.json"
    meta = json.loads(job.read_text()) | {"status": "Completed", "end_time": time.time()}
    job.write_text(json.dumps(meta))


def test_a_finished_job_shows_the_rows_flushed_as_it_ended(
    live: tuple[TestClient, Path, Sized], monkeypatch: pytest.MonkeyPatch
) -> None:
    client, folder, _ = live
    monkeypatch.setattr(_data, "LIVE_CHECK_S", 3600.0)  # the listing of a poll while it ran
    assert _system(client)["samples"] == 10 * SEGMENT
    start = T0 + 10 * SEGMENT * 0.5
    last = folder / f"part-{int(start * 1000):013d}-1-00099.parquet"
    last.write_bytes(encode_parquet(_rows(start, 40)))  # the last flush, then the end recorded
    _end(folder)
    assert _system(client)["samples"] == 10 * SEGMENT + 40
    old = time.time() - 60  # the folder settled: its listing is kept while it stays unchanged
    os.utime(folder, (old, old))
    streams = client.app.app.app.state.source.streams  # Guard -> SecureHeaders -> Starlette
    _system(client)
    listed = streams.listings
    assert _system(client)["samples"] == 10 * SEGMENT + 40 and streams.listings == listed
    later = start + 40 * 0.5  # a helper's flush after the end (a new segment, by rename)
    tmp = folder / "flush.tmp-1"
    tmp.write_bytes(encode_parquet(_rows(later, 7)))
    os.replace(tmp, folder / f"part-{int(later * 1000):013d}-2-00001.parquet")
    assert _system(client)["samples"] == 10 * SEGMENT + 47 and streams.listings == listed + 1
