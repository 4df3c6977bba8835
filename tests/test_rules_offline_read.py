"""The offline evaluation's reads (issue 30: a day of a node judged in bounded memory).

``evaluate_job`` reads each node's segments with pyarrow (``rules._data.read_streams``)
instead of DuckDB, keeps no node's frames past its check (``NodeRule.forget``) and
at most :data:`SHARED_ENTRIES` shared framings per node: the verdicts must not change.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import pytest

import stepscope
from rules_data import busy_gpu, new_job, steps_frame, system_frame, write_steps, write_system
from stepscope.rules import evaluate_job
from stepscope.rules._data import SKIPPED_SYSTEM_COLUMNS, read_segments, read_streams
from stepscope.rules._evaluate import (
    _node_infos,
    evaluate_input,
    evaluate_rules,
    job_rules,
    whole_events,
    whole_steps,
    whole_system,
)
from stepscope.rules._input import RuleInput
from stepscope.rules._system_base import SystemRule
from stepscope.rules._trace_source import JobTraces
from stepscope.rules._windows import SHARED_ENTRIES, shared
from stepscope.store import open_store

DATA = Path(__file__).resolve().parent / "data"
JOBS = ("healthy", "starving", "h200/loader", "h200/leak", "h200-sampled/stall")


def _in_memory(job: stepscope.Job, now: float) -> list[dict[str, object]]:
    """The same rules over the reader's frames, held whole in memory."""
    events = job.events()
    data = RuleInput(
        steps=job.steps(), system=job.system(), events=events, others=job.others(),
        nodes=_node_infos(job), now=now, origin=job.meta.get("start_time"),
        meta=job.meta, tensors=job.tensors, traces=JobTraces(job),
    )  # fmt: skip
    return [r.to_dict() for r in evaluate_input([s.rule for s in job_rules(job)], data)]


@pytest.mark.parametrize("name", JOBS)
def test_offline_evaluation_gives_the_verdicts_of_the_frames_in_memory(
    name: str, tmp_path: Path
) -> None:
    path = shutil.copytree(DATA / name, tmp_path / "job")
    job = stepscope.open(path)
    now = float(job.meta.get("end_time") or 0.0)
    offline = [r.to_dict() for r in evaluate_job(job, now=now)]
    assert offline == _in_memory(job, now)
    assert any(r["datapoints"] for r in offline)  # judged, not all NotApplicable


def test_every_fixture_has_a_firing_rule_among_those_compared(tmp_path: Path) -> None:
    fired = set()
    for name in JOBS:
        job = stepscope.open(shutil.copytree(DATA / name, tmp_path / name))
        fired |= {r.rule for r in evaluate_job(job, now=0.0) if r.status.value == "IssuesFound"}
    assert {"DataLoading", "PythonOverhead"} <= fired  # the comparison covers findings


def test_segments_out_of_order_and_of_other_columns_read_as_duckdb_reads_them(
    tmp_path: Path,
) -> None:
    store = new_job(tmp_path / "job")
    frame = system_frame(120, gpu_util=[busy_gpu(120)])
    frame.loc[5, "cpu"] = np.nan
    # Rows out of order in each segment, one lacking the GPU columns: union by name.
    shuffled = frame.sample(frac=1.0, random_state=0)
    write_system(store, shuffled.iloc[60:])
    write_system(store, shuffled.iloc[:60].drop(columns=["gpu0_util", "gpu0_mem_util"]))
    store = open_store(str(tmp_path / "job"))
    keys = store.list("system", suffix=".parquet")
    assert len(keys) >= 2
    mine = read_streams(store, ["system/" + keys[0].split("/")[1]], ("time",),
                        SKIPPED_SYSTEM_COLUMNS)  # fmt: skip
    theirs = read_segments(store, keys, order="time", con=duckdb.connect())
    assert mine is not None and theirs is not None
    theirs = theirs[[c for c in theirs.columns if c in mine.columns]]
    pd.testing.assert_frame_equal(mine[list(theirs.columns)], theirs, check_dtype=False)
    assert not any(c.startswith(("disk_", "net_")) for c in mine.columns)


def test_whole_job_steps_are_the_readers_steps(tmp_path: Path) -> None:
    store = new_job(tmp_path / "job")
    steps = pd.concat([steps_frame(30, phase="eval"), steps_frame(40)], ignore_index=True)
    steps.loc[3, "forward"] = np.inf  # read as null, as the reader's views read it
    shuffled = steps.sample(frac=1.0, random_state=1)
    write_steps(store, shuffled.iloc[35:])
    write_steps(store, shuffled.iloc[:35])
    job = stepscope.open(tmp_path / "job")
    mine = whole_steps(job)
    pd.testing.assert_frame_equal(mine[list(job.steps().columns)], job.steps())


def test_no_rule_keeps_a_nodes_frames_after_the_evaluation(tmp_path: Path) -> None:
    job = stepscope.open(shutil.copytree(DATA / "h200/loader", tmp_path / "job"))
    rules = [s.rule for s in job_rules(job)]
    evaluate_rules(job, rules, now=0.0)
    system = [r for r in rules if isinstance(r, SystemRule)]
    assert len(system) >= 5
    assert [r.rule_name for r in system if getattr(r, "_windows", (None,))[0] is not None] == []


def test_shared_keeps_the_entries_used_last() -> None:
    data, made = RuleInput(), []
    frame = object()

    def make(key: str) -> str:
        made.append(key)
        return key

    for key in ("gpus", "a", "gpus", "b", "gpus", "b", "a"):
        assert shared(data, key, frame, lambda k=key: make(k)) == key
    assert len(data.cache) == SHARED_ENTRIES == 2  # the GPUs and the last framing
    assert list(data.cache) == ["b", "a"]
    assert made == ["gpus", "a", "b", "a"]  # "gpus" and "b" were shared; "a" was dropped


@pytest.mark.parametrize("name", JOBS)
def test_whole_job_events_and_samples_are_the_readers(name: str, tmp_path: Path) -> None:
    """The final evaluation reads them with pyarrow (no DuckDB import in the runner)."""
    job = stepscope.open(shutil.copytree(DATA / name, tmp_path / "job"))
    for mine, theirs in ((whole_events(job), job.events()), (whole_system(job), job.system())):
        assert len(theirs)
        pd.testing.assert_frame_equal(mine[list(theirs.columns)], theirs)
