"""Segments fetched from an object store are read from Arrow's memory.

A reader over the fetched Python ``bytes`` keeps them referenced from Arrow's
decoding threads a moment after the read returns; when the process exits in that
moment, the thread cannot take the GIL and the process aborts ("terminate called
without an active exception": a CI run's ``stepscope ls s3://...``). So no read of
an object store hands Arrow a Python object: ``store.arrow_reader`` copies.
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import stepscope
from stepscope.store import arrow_reader, encode_parquet, open_store

GOLDEN = Path(__file__).parent / "data" / "healthy"
SCALARS = "tensors/rank-0/scalars"


def test_a_reader_over_fetched_bytes_holds_no_python_object() -> None:
    table = pa.table({"step": list(range(2000)), "phase": ["train"] * 2000})
    data = encode_parquet(table)
    before = sys.getrefcount(data)
    reader = arrow_reader(data)
    assert sys.getrefcount(data) == before  # nothing for Arrow's threads to free
    with pq.ParquetFile(reader) as f:
        assert f.read().equals(table)
    held = pa.BufferReader(data)  # what it avoids: a reader over the bytes holds them
    assert sys.getrefcount(data) == before + 1
    del held


@pytest.fixture
def remote_job(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[tuple[Path, str]]:
    local = tmp_path / "job"
    shutil.copytree(GOLDEN, local)
    url = f"memory://arrow-{request.node.name}/job"
    store = open_store(url)
    for path in local.rglob("*"):
        if path.is_file():
            store.write_bytes(path.relative_to(local).as_posix(), path.read_bytes())
    yield local, url
    store.delete("")


def test_tensors_on_an_object_store_read_as_on_disk(remote_job: tuple[Path, str]) -> None:
    local, url = remote_job
    here, there = stepscope.open(local), stepscope.open(url)
    assert not there.store.is_local and there.tensors.names()
    assert there.tensors.names() == here.tensors.names()
    assert there.tensors.scalars().equals(here.tensors.scalars())
    name = here.tensors.names()[0]
    assert there.tensors.scalars(names=[name], phase="train").equals(
        here.tensors.scalars(names=[name], phase="train")
    )


def test_a_damaged_tensor_segment_on_an_object_store_is_skipped_and_named(
    remote_job: tuple[Path, str],
) -> None:
    local, url = remote_job
    [seg] = (local / SCALARS).glob("part-*.parquet")
    key = f"{SCALARS}/{seg.name}"
    open_store(url).write_bytes(key, seg.read_bytes()[:-100])
    job = stepscope.open(url)
    assert job.tensors.names() == []
    assert [w for w in job.warnings if seg.name in w] == [
        f"skipped {key}: not a Parquet file (no magic bytes): cut short or not a segment"
    ]


def test_no_reader_hands_arrow_a_python_file_of_an_object_store(
    remote_job: tuple[Path, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whole objects are fetched (``cat``), never opened as files for Arrow to read
    from its threads: every reader of a job, the rules, ``ls`` and the launcher's
    last step, with the store's file opening made to fail."""
    from fsspec.implementations.memory import MemoryFileSystem

    from stepscope.cli._ls import ls_rows
    from stepscope.launch._ending import last_step_end
    from stepscope.rules import evaluate_job

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError(f"an object store's file opened: {args[1:]}")

    local, url = remote_job
    monkeypatch.setattr(MemoryFileSystem, "_open", refuse)
    job = stepscope.open(url)
    assert len(job.steps()) == len(stepscope.open(local).steps()) > 0
    assert len(job.system()) > 0 and job.tensors.names()
    assert job.arrow("steps/rank-0", ["phase"]).num_rows > 0
    assert evaluate_job(job)
    (row,) = ls_rows(url.rsplit("/", 1)[0])
    assert row["problem"] is None and row["steps"] > 0
    assert last_step_end(job.store, 0) is not None
