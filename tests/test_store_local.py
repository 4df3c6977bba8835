"""A local job folder is served without fsspec, and answers as fsspec's local filesystem did."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import fsspec
import pytest

from stepscope.store import open_store
from stepscope.store._local import local_root

URLS = ["runs/x", "~/a", "/tmp/a/", "file:///tmp/a", "local:///tmp/b", "./a/../b", ".", "/",
        "file://rel/x", "file:/tmp/x", "runs/a:b", "/tmp//a"]  # fmt: skip


@pytest.mark.parametrize("url", URLS)
def test_a_local_url_names_the_folder_fsspec_names(url: str) -> None:
    _, root = fsspec.core.url_to_fs(url)
    assert local_root(url) == (root.rstrip("/") or "/")
    assert open_store(url).is_local and not open_store(url).is_remote


@pytest.mark.parametrize("url", ["memory://x", "s3://bucket/runs", "simplecache::memory://x"])
def test_other_urls_go_to_fsspec(url: str) -> None:
    assert local_root(url) is None


def _fill(store_url: str) -> None:
    store = open_store(store_url)
    store.write_json("job.json", {"status": "Running"})
    store.write_bytes("steps/rank-0/part-000001.parquet", b"rows")
    store.write_bytes("steps/rank-0/part-000002.parquet", b"more")
    store.write_bytes("system/n1/part-000001.parquet", b"samples")


def test_a_local_store_answers_as_the_memory_store(tmp_path: Path) -> None:
    """Every call, on a local folder and on fsspec's memory store with the same files."""
    local, memory = str(tmp_path / "job"), "memory://stepscope-local-test/job"
    answers = []
    for url in (local, memory):
        _fill(url)
        store = open_store(url)
        steps = store.sub("steps")
        answers.append(
            [
                store.list(),
                store.list("steps", suffix=".parquet"),
                store.list("missing"),
                store.listdir(),
                store.listdir("steps/rank-0"),
                store.listdir("missing"),
                store.listdir("job.json"),
                store.exists("job.json"),
                store.exists("nothing.json"),
                store.isdir("steps"),
                store.isdir("job.json"),
                store.read_json("job.json"),
                store.read_many(["steps/rank-0/part-000002.parquet", "job.json"])[0],
                steps.list(),
            ]
        )
        with pytest.raises(FileNotFoundError):
            store.read_bytes("nothing.json")
        store.delete("steps")
        store.delete("job.json")
        assert store.list() == ["system/n1/part-000001.parquet"]
    assert answers[0] == answers[1]


@pytest.mark.process
def test_opening_a_local_store_imports_no_fsspec(tmp_path: Path) -> None:
    code = (
        "import sys; from stepscope.store import open_store; "
        f"s = open_store({str(tmp_path)!r}); s.write_json('a.json', 1); s.list(); s.listdir(); "
        "print('fsspec' in sys.modules)"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.stdout.strip() == "False", out.stderr
