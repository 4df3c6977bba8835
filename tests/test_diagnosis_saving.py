"""The diagnosis says what a fix would save, and gives one entry per cause (issue 30,
item 3): a rule that prices next to nothing beyond its cause is folded into the
cause's entry, explained once."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from stepscope.jobfolder import RuleVerdict
from stepscope.jobfolder._validate import VERDICT_SPEC
from stepscope.rules import DataLoading, Finding, JobFacts, RuleResult, Status, diagnose
from stepscope.rules._live import merge

FACTS = JobFacts(wall_seconds=100.0, step_seconds=95.0)
WHY = "more workers only use idle cores: the job used 62% (1.24 cores) of the node's CPU"


def found(rule: str, cost: float, saving: float | None = None, why: str = "") -> RuleResult:
    finding = Finding(f"{rule} finding", f"fix {rule}", 0.5, node="n", rank=0,
                      start=10.0, end=90.0, steps=(3, 9))  # fmt: skip
    details = {"saving_bound": why} if why else {}
    return RuleResult(rule, Status.ISSUES_FOUND, 1, 10, f"{rule} fired", f"fix {rule}",
                      findings=(finding,), details=details, cost_seconds=cost,
                      saving_seconds=saving)  # fmt: skip


def test_an_entry_says_what_its_fix_would_save_when_less_than_its_cost() -> None:
    (e,) = diagnose([found("DataLoaderWorkers", 45.0, 12.0, WHY)], FACTS).entries
    assert e.saving_seconds == 12.0 and e.cost_seconds == 45.0
    assert e.message.startswith(
        "data loader workers: about 45 s of this 100 s job (45%); a fix would save about "
        f"12 s: {WHY}; DataLoaderWorkers finding"
    )
    assert e.to_dict()["saving_seconds"] == 12.0
    # The twin: the fix saves the whole cost; nothing more to say.
    (same,) = diagnose([found("DataLoaderWorkers", 45.0, 45.0)], FACTS).entries
    assert same.saving_seconds == 45.0 and "a fix would save" not in same.message
    # A verdict without a saving (older, or a custom rule) saves its cost.
    (old,) = diagnose([found("X", 5.0)], FACTS).entries
    assert old.saving_seconds == 5.0 and "a fix would save" not in old.message


def test_a_near_zero_duplicate_is_folded_into_its_cause() -> None:
    """DataLoading prices 1 s beyond DataLoaderWorkers' 45 s (< 5% of the job): one
    entry, the cause's, which counts it and names it once."""
    d = diagnose([found("DataLoading", 46.0, 10.5), found("DataLoaderWorkers", 45.0, 10.0, WHY)],
                 FACTS)  # fmt: skip
    (e,) = d.entries
    assert e.rule == "DataLoaderWorkers" and e.also == ("DataLoading",)
    assert e.cost_seconds == pytest.approx(46.0)
    assert e.saving_seconds == pytest.approx(10.5)  # 10 + the 0.5 s DataLoading saves beyond
    assert "DataLoading's finding of the same time included; a fix would save about 10 s" in (
        e.message
    )
    assert "beyond" not in e.message and d.summary.startswith("1 problem found")
    assert e.to_dict()["also"] == ["DataLoading"]
    # The twin: 15 s beyond it is a problem of its own, priced beyond the cause.
    two = diagnose([found("DataLoading", 60.0, 18.0), found("DataLoaderWorkers", 45.0, 10.0)],
                   FACTS)  # fmt: skip
    assert [(e.rule, e.cost_seconds, e.saving_seconds) for e in two.entries] == [
        ("DataLoaderWorkers", 45.0, 10.0),
        ("DataLoading", 15.0, 8.0),  # its saving less the 10 s counted under the cause
    ]
    assert two.entries[0].also == () and "beyond 45 s counted under" in two.entries[1].message


def test_savings_never_exceed_the_costs_the_job_leaves() -> None:
    d = diagnose([found("A", 80.0), found("B", 50.0, 40.0)], FACTS)
    by = {e.rule: e for e in d.entries}
    assert by["B"].cost_seconds == pytest.approx(20.0)  # the 100 s job less A's 80 s
    assert by["B"].saving_seconds == pytest.approx(20.0)


def test_the_verdict_carries_its_saving_in_json_and_live_chunks_add_it() -> None:
    res = found("DataLoading", 6.0, 2.0)
    back = RuleResult.from_dict(json.loads(json.dumps(res.to_dict())))
    assert back.saving_seconds == 2.0 and "saving_seconds" in VERDICT_SPEC
    verdict: RuleVerdict = res.to_dict()
    assert verdict["saving_seconds"] == 2.0
    merged = merge(DataLoading(), res, found("DataLoading", 3.0, 3.0))
    assert (merged.cost_seconds, merged.saving_seconds) == (9.0, 5.0)


def test_show_json_gives_each_entry_its_saving(tmp_path: Path) -> None:
    """The entry of ``show --json``'s ``diagnosis`` (docs/rules.md): saving_seconds, also."""
    (e,) = diagnose([found("DataLoaderWorkers", 45.0, 12.0, WHY)], FACTS).to_list()
    assert {"saving_seconds", "also", "cost_seconds"} <= set(e)
    assert (e["saving_seconds"], e["also"]) == (12.0, [])
