"""Supervision pieces without processes: fault records, the end of a job whose launcher
died, sampling gaps, and a rule runner that survives a failing scan."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from stepscope.jobfolder import FaultLog, JobMeta, end_without_launcher, read_meta, write_meta
from stepscope.launch._helpers import describe_exit
from stepscope.sampler._gaps import GAP_COMPONENT, GapWatch
from stepscope.store import open_store


def test_fault_log_counts_and_keeps_unsaved_records(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    log = FaultLog(store, "n1", 42, wall=lambda: 5.0)
    log.record("helper-sampler", "sampler killed by SIGKILL", exit_code=None, signal="SIGKILL")
    doc = log.record("helper-sampler", "sampler exited with code 3", exit_code=3, signal=None)
    assert doc["count"] == 2 and doc["exit_code"] == 3 and doc["first_time"] == 5.0
    assert store.read_json("faults/helper-sampler-n1-42.json")["error"].endswith("code 3")
    assert log.pending() == []
    broken = FaultLog(open_store(tmp_path / "file"), "n1", 1)
    (tmp_path / "file").write_text("not a folder")  # every write fails
    broken.record("disk", "No space left on device")
    assert [d["component"] for d in broken.pending()] == ["disk"]


def test_gaps_from_an_unscheduled_sampler_and_a_restart(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    watch = GapWatch(FaultLog(store, "n1", 7))
    for t in (100.0, 100.5, 101.0):
        watch.sampled(t, 0.5)
    watch.save()
    assert not store.exists(f"faults/{GAP_COMPONENT}-n1-7.json")  # silent twin: no gap
    watch.sampled(110.5, 0.5)
    watch.restarted(111.0, "sampler killed by SIGKILL")
    watch.sampled(114.0, 0.5)
    assert not store.exists(f"faults/{GAP_COMPONENT}-n1-7.json")  # noted, written by save
    watch.save()
    doc = store.read_json(f"faults/{GAP_COMPONENT}-n1-7.json")
    assert [(g["start"], g["end"]) for g in doc["gaps"]] == [(101.0, 110.5), (111.0, 114.0)]
    assert "not scheduled" in doc["gaps"][0]["cause"]
    assert "SIGKILL" in doc["gaps"][1]["cause"] and doc["gap_seconds"] == 12.5


@pytest.mark.parametrize(
    ("ranks", "status", "code"),
    [
        ([{"status": "Exited", "exit_code": 0}], "Completed", 0),
        ([{"status": "Exited", "exit_code": 3}], "Failed", 3),
        ([{"status": "Failed", "exit_code": 1, "error": "ValueError: x"}], "Failed", 1),
        ([{"status": "Running"}], "Unknown", None),
        ([], "Unknown", None),
    ],
)
def test_end_without_launcher_from_the_ranks_records(
    tmp_path: Path, ranks: list[dict[str, object]], status: str, code: int | None
) -> None:
    store = open_store(tmp_path)
    write_meta(store, JobMeta.new("j", ["python", "t.py"], {}, ["n1"]))
    for r, body in enumerate(ranks):
        store.write_json(f"ranks/rank-{r}.json", {"rank": r, **body})
    end_without_launcher(store, 123.0)
    meta = read_meta(store)
    assert (meta["status"], meta["exit_code"], meta["end_time"]) == (status, code, 123.0)
    assert "launcher lost" in str(meta["reason"])
    assert end_without_launcher(store, 200.0) is None  # ended once: left as it is


def test_describe_exit() -> None:
    assert describe_exit(-9) == ("killed by SIGKILL", None, "SIGKILL")
    assert describe_exit(2) == ("exited with code 2", 2, None)


def test_a_reserved_record_is_rewritten_in_place_on_a_full_disk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import errno

    from stepscope.store import _store

    store = open_store(tmp_path)
    write_meta(store, JobMeta.new("j", ["python", "t.py"], {}, ["n1"]))
    store.write_json("small.json", {"a": 1})

    def full(*_: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(_store, "write_atomic", full)
    end_without_launcher(store, 5.0)  # job.json: room kept, rewritten in place
    assert read_meta(store)["end_time"] == 5.0 and (tmp_path / "job.json").stat().st_size == 16384
    with pytest.raises(OSError, match="No space"):  # no room kept: the error stays
        store.write_json("small.json", {"a": 1, "b": "longer than the file is"})
    assert store.read_json("small.json") == {"a": 1}


def test_show_says_which_of_the_three_states_a_job_is_in() -> None:
    from typing import Any, cast

    from stepscope.cli._text import job_state

    def state(**kw: object) -> str:
        return job_state(cast(Any, {"end_time": None, **kw}))

    assert state(status="Running") == "still running"
    assert state(status="Completed", end_time=5.0) == "ended"
    assert state(status="Unknown") == "launcher lost, training state unknown"
    assert state(status="Unknown", end_time=5.0) == "ended"  # ended, without a record


def test_a_helper_that_keeps_dying_is_restarted_with_backoff_up_to_the_limit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from typing import Any, cast

    from stepscope.launch import _supervise
    from stepscope.launch._helpers import MAX_RESTARTS, Helper

    class Dead:
        pid, returncode = 99, -9

        def poll(self) -> int:
            return self.returncode

    starts: list[float] = []

    def start(self: Helper) -> None:  # no process: a helper that dies at once
        starts.append(clock[0])
        self.proc, self.started, self.restart_at = cast(Any, Dead()), clock[0], None

    monkeypatch.setattr(Helper, "start", start)
    clock = [0.0]
    helpers = _supervise.Helpers.__new__(_supervise.Helpers)
    helpers.faults = FaultLog(open_store(tmp_path), "n1", 1, wall=lambda: clock[0])
    helpers.helpers, helpers._forwarded = [Helper("sampler", lambda extra: [])], 0.0
    helpers.start()
    while clock[0] < 1000:
        helpers.check(clock[0])
        clock[0] += 0.25
    assert len(starts) == MAX_RESTARTS + 1  # the first start and every restart
    delays = [b - a for a, b in itertools.pairwise(starts)]
    # the first death is seen at once, the others at the next check (0.25 s later)
    assert delays[0] == 0.5 and delays[-1] == 30.0 + 0.25
    assert all(b >= a for a, b in itertools.pairwise(delays))  # never shorter than before
    doc = helpers.faults.records["helper-sampler"]
    assert doc["count"] == MAX_RESTARTS + 1 and "not restarted" in str(doc["error"])
