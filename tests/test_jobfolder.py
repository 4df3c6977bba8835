"""The job folder's code (stepscope.jobfolder) and docs/format.md say the same thing."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from stepscope.errors import FormatVersionError, JobNotFoundError
from stepscope.jobfolder import (
    AGENT_STEPS_SCHEMA,
    EVENTS_SCHEMA,
    FORMAT_VERSION,
    HEARTBEAT_STALE_S,
    OTHERS_SCHEMA,
    SYSTEM_SCHEMA,
    FaultJson,
    Heartbeat,
    JobMeta,
    WindowJson,
    heartbeats,
    liveness,
    paths,
    read_all,
    read_meta,
    update_meta,
    write_heartbeat,
    write_meta,
)
from stepscope.rules import RuleResult, Status
from stepscope.store import open_store

FORMAT_MD = (Path(__file__).parents[1] / "docs" / "format.md").read_text()


def _section(title: str) -> str:
    """The text of the ``## title`` section of docs/format.md."""
    start = FORMAT_MD.index(f"\n## {title}")
    end = FORMAT_MD.find("\n## ", start + 1)
    return FORMAT_MD[start : end if end > 0 else None]


def _table_names(section: str) -> set[str]:
    """The backquoted names in the first column of the section's table."""
    names: set[str] = set()
    for line in section.splitlines():
        if line.startswith("| `"):
            names |= set(re.findall(r"`([^`]+)`", line.split("|")[1]))
    return names


def test_the_folder_listing_names_every_entry_of_the_code() -> None:
    listing = FORMAT_MD[
        FORMAT_MD.index("OUT/JOB/") : FORMAT_MD.index("```", FORMAT_MD.index("OUT/JOB/"))
    ]
    documented = [
        line.split()[0].split("/")[0] for line in listing.splitlines()[1:] if line.strip()
    ]
    assert documented == list(paths.ENTRIES)


def test_the_documented_version_is_the_code_s() -> None:
    assert FORMAT_MD.startswith(f"# The job folder, format version {FORMAT_VERSION}\n")
    assert f"`format_version` in `job.json` is {FORMAT_VERSION}." in FORMAT_MD


def test_documented_columns_are_the_schemas() -> None:
    templated = {"cpu<i>", "gpu<i>_util", "gpu<i>_mem_used", "gpu<i>_mem_total", "gpu<i>_mem_util"}
    templated |= {"gpu<i>_power_w", "gpu<i>_temp_c"}
    system = _table_names(_section("system/"))
    assert system - templated == set(SYSTEM_SCHEMA.names)
    assert _table_names(_section("others/")) == set(OTHERS_SCHEMA.names)
    steps = _table_names(_section("steps/")) | {"gpu_forward", "gpu_backward", "gpu_optimizer"}
    assert steps == set(AGENT_STEPS_SCHEMA.names)
    assert "`gpu_forward`, `gpu_backward`, `gpu_optimizer`" in _section("steps/")
    assert _table_names(_section("events/")) == set(EVENTS_SCHEMA.names)


def test_documented_job_json_is_the_record(tmp_path: Path) -> None:
    section = _section("job.json")
    example = json.loads(section[section.index("```json") + 7 : section.index("```\n", 10)])
    meta = JobMeta.new("bert-42", ["python", "train.py"], {}, ["node-a"])
    assert list(example) == list(meta.to_dict())
    documented = re.search(r"`heartbeat/<node>.json`\s*\(`(\{.*?\})`\)", section)
    assert documented is not None
    assert re.findall(r'"(\w+)":', documented.group(1)) == list(Heartbeat.now(2.0).__dict__)
    assert f"older than {HEARTBEAT_STALE_S:.0f} s" in section


def test_documented_rule_verdict_keys_are_the_rules() -> None:
    result = RuleResult(rule="StepOutlier", status=Status.NO_ISSUES_FOUND)
    assert _table_names(_section("rules/")) == set(result.to_dict())


def test_job_meta_round_trips_and_keeps_unknown_keys(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    meta = JobMeta.new("j", ["python", "t.py"], {"a": 1}, ["n"])
    meta.extra["distributed"] = {"launcher": "torchrun", "nnodes": "2"}
    write_meta(store, meta)
    body = read_meta(store)
    assert body["format_version"] == FORMAT_VERSION and body["status"] == "Running"
    assert body["stepscope_version"] and body["distributed"]["nnodes"] == "2"
    assert JobMeta.from_dict(body) == meta
    after = update_meta(store, status="Completed", exit_code=0)
    assert read_meta(store) == after and after["name"] == "j" and after["exit_code"] == 0


def test_a_folder_without_job_json_or_of_a_newer_format_is_refused(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    with pytest.raises(JobNotFoundError, match=r"no job\.json"):
        read_meta(store)
    store.write_json(paths.JOB_JSON, {"format_version": FORMAT_VERSION + 1})
    with pytest.raises(FormatVersionError, match="pip install -U stepscope"):
        read_meta(store)


def test_liveness_from_the_newest_heartbeat(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    write_heartbeat(store, "a", Heartbeat(100.0, 1, 2.0))
    write_heartbeat(store, "b", Heartbeat(110.0, 2, 2.0))
    store.write_bytes(paths.heartbeat_key("torn"), b"{")  # being rewritten: skipped
    assert heartbeats(store) == {"a": 100.0, "b": 110.0}
    running = {"status": "Running"}
    assert liveness(running, heartbeats(store), now=120.0)["alive"] is True
    lost = liveness(running, heartbeats(store), now=110.0 + HEARTBEAT_STALE_S + 1)
    assert lost["status"] == "Unknown" and "no heartbeat for 31 s" in lost["reason"]
    assert "launcher lost, training state unknown" in lost["reason"]
    assert (
        liveness(running, {}, now=1.0)["reason"]
        == "launcher lost, training state unknown (no heartbeat recorded)"
    )
    done = liveness({"status": "Completed"}, {}, now=1.0)
    assert done == {"status": "Completed", "alive": False}
    # killed before its first heartbeat: starting, not lost, until a heartbeat is due
    young = {"status": "Running", "start_time": 100.0}
    assert liveness(young, {}, now=100.0 + HEARTBEAT_STALE_S - 1)["status"] == "Running"
    assert liveness(young, {}, now=100.0 + HEARTBEAT_STALE_S + 1)["status"] == "Unknown"


def test_keys_and_damaged_records(tmp_path: Path) -> None:
    assert paths.fault_key("store", "steps.rank-0", 42) == "faults/store-steps.rank-0-42.json"
    assert paths.rank_key(3) == "ranks/rank-3.json" and paths.steps_stream(3) == "steps/rank-3"
    assert [paths.rank_of(n) for n in ("rank-12", "rank-", "node-1", "rank-x")] == [
        12,
        None,
        None,
        None,
    ]
    store = open_store(tmp_path)
    store.write_json(paths.fault_key("agent", "n", 1), {"count": 1})
    store.write_bytes(paths.fault_key("agent", "n", 2), b"not json")
    store.write_json(paths.fault_key("agent", "n", 3), [1, 2])  # not a record
    assert read_all(store, paths.FAULTS) == [{"count": 1}]


def test_documented_fault_and_window_records_are_the_types() -> None:
    faults = set(re.findall(r'"(\w+)"', _section("faults/")))
    assert faults == set(FaultJson.__annotations__)
    profiling = _section("profiling/")
    listed = profiling[profiling.index("is the window's record") :]
    listed = listed[: listed.index(", ...)")]
    assert set(re.findall(r"`(\w+)`", listed)) == set(WindowJson.__annotations__)
