"""The end an orphaned sampler records for a torchrun node (sampler/_orphan.py); the
real run is tests/test_fault_matrix.py::test_a_killed_torchrun_launcher_...."""

from __future__ import annotations

from pathlib import Path

import pytest

from stepscope.jobfolder import paths
from stepscope.sampler._orphan import end_node
from stepscope.store import Store, open_store


def _job(tmp_path: Path, nodes: dict[str, str], ranks: list[dict[str, object]]) -> Store:
    store = open_store(tmp_path)
    store.write_json(paths.JOB_JSON, {"status": "Running", "format_version": 1})
    for node, status in nodes.items():
        store.write_json(paths.launcher_key(node), {"node": node, "status": status})
    for i, rank in enumerate(ranks):
        store.write_json(f"{paths.RANKS}/rank-{i}.json", {"rank": i, **rank})
    return store


@pytest.mark.parametrize(
    ("codes", "status", "worst"),
    [((0, 0), "Completed", 0), ((0, 3), "Failed", 3)],
)
def test_the_last_node_ends_its_record_and_lets_the_job_end(
    tmp_path: Path, codes: tuple[int, int], status: str, worst: int
) -> None:
    ranks = [{"node": "a", "status": "Exited", "exit_code": c} for c in codes]
    store = _job(tmp_path, {"a": "Running", "b": "Completed"}, ranks)
    assert end_node(store, "a", 50.0)  # no node runs any more: job.json is this sampler's
    record = store.read_json(paths.launcher_key("a"))
    assert (record["status"], record["exit_code"], record["end_time"]) == (status, worst, 50.0)
    assert record["reason"].startswith("launcher lost")


def test_a_node_still_running_keeps_the_job_for_its_launcher(tmp_path: Path) -> None:
    ranks = [{"node": "a", "status": "Exited", "exit_code": 0}, {"node": "b", "status": "Running"}]
    store = _job(tmp_path, {"a": "Running", "b": "Running"}, ranks)
    assert not end_node(store, "a", 50.0)  # b's launcher aggregates at its own end
    assert store.read_json(paths.launcher_key("a"))["status"] == "Completed"  # only a's ranks
    assert store.read_json(paths.launcher_key("b"))["status"] == "Running"


def test_a_plain_job_has_no_launcher_record_to_end(tmp_path: Path) -> None:
    store = _job(tmp_path, {}, [{"node": "a", "status": "Exited", "exit_code": 0}])
    assert end_node(store, "a", 50.0)
    assert not store.exists(paths.LAUNCHERS)
