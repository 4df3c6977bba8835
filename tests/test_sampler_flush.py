"""The sampler's flush thread (sampler/_flusher.py): sampling goes on while a store
call blocks, and store stalls are recorded (only those that are faults)."""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pyarrow.parquet as pq

from stepscope.jobfolder import FaultLog
from stepscope.sampler._flusher import COMPONENT, SLOW_S, Stalls
from stepscope.sampler._probe import SystemProbe
from stepscope.sampler.main import Sampler
from stepscope.store import Store, open_store

NODE = "n1"


class BlockingStore(Store):
    """A local store whose writes of system rows wait until ``gate`` opens."""

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self.gate, self.blocked = threading.Event(), threading.Event()

    def write_bytes(self, key: str, data: bytes) -> None:
        if key.startswith("system/"):
            self.blocked.set()
            self.gate.wait(60)
        super().write_bytes(key, data)


def wait_for(check: Callable[[], object], what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def test_sampling_goes_on_while_a_store_write_blocks(tmp_path: Path) -> None:
    store = BlockingStore(str(tmp_path))
    sampler = Sampler(store, NODE, interval_ms=100, flush_s=0.2, probe=SystemProbe())
    thread = threading.Thread(target=sampler.run)
    thread.start()
    try:
        wait_for(store.blocked.is_set, "a flush blocked in a write")
        blocked_at = sampler.samples
        # before the flush thread, a blocked write held the sampling loop: no sample
        wait_for(lambda: sampler.samples >= blocked_at + 5, "samples while the write blocks")
    finally:
        store.gate.set()
        sampler.stop()
        thread.join(60)
    assert not thread.is_alive()
    files = sorted((tmp_path / "system" / NODE).glob("*.parquet"))
    stored = sum(pq.read_metadata(f).num_rows for f in files)
    assert stored == sampler.samples, "every sample stored once the store answered"
    assert not (tmp_path / "faults" / f"{COMPONENT}-{NODE}-{os.getpid()}.json").exists()


def test_a_store_call_that_failed_slowly_is_a_stall(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    stalls = Stalls(FaultLog(store, NODE, 7))
    key = tmp_path / "faults" / f"{COMPONENT}-{NODE}-7.json"
    stalls.took("a flush", 100.0, 0.5, "OSError: refused", failed=True)  # quick: no stall
    stalls.took("a flush", 100.0, SLOW_S - 1, None, failed=False)  # slow but it worked
    assert not key.exists()
    stalls.took("a flush", 200.0, 4.0, "OSError: refused", failed=True)
    stalls.took("reading control requests", 210.0, SLOW_S + 1, None, failed=False)
    doc = json.loads(key.read_text())
    assert doc["count"] == 2 and doc["blocked_seconds"] == SLOW_S + 5
    assert doc["error"].startswith("reading control requests blocked the sampler's flush")
    assert "2 stall(s)" in doc["error"] and "longest 11.0 s" in doc["error"]
