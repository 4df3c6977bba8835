"""Live verdicts agree with the offline evaluation of the same job."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import rules_data as rd
import stepscope
from stepscope.rules import Status, build_rules, evaluate_rules
from stepscope.rules.runner import Runner

T0 = rd.T0


def steps(rank: int, first: int, n: int, start: float) -> rd.pd.DataFrame:
    d = 1.0 + np.random.default_rng(rank * 100_000 + first).normal(0, 0.01, n)
    frame = rd.steps_frame(n, rank=rank, start=start, duration=d)
    frame["step"] = np.arange(first, first + n)
    return frame


@pytest.mark.parametrize("slow_start", [None, 1500.0])  # rank 1's first step after 25 min
def test_live_verdicts_agree_with_offline_over_many_chunks(
    tmp_path: Path, slow_start: float | None
) -> None:
    """45 minutes, scanned every 3 minutes: the live buffer drops its oldest chunk
    several times (chunks of 500 s), and the first steps leave it long before
    the end. MaxInitializationTime judged the buffer's first step as each rank's
    first: every rank 'took' over 20 min once its early steps were dropped."""
    path = tmp_path / "j"
    store = rd.new_job(path, status="Running", start=T0)
    rd.node_info(store, gpus=0)
    for rank in (0, 1):
        rd.write_process_start(store, rank=rank, time=T0)
    now = T0
    live = Runner(stepscope.open(str(path)), build_rules([]), clock=lambda: now)
    begun = {0: T0 + 10.0, 1: T0 + (slow_start or 12.0)}
    done = {0: 0, 1: 0}
    for minute in range(3, 46, 3):  # each scan judges all the rules: 15 scans, not 45
        now = T0 + 60.0 * minute
        for rank, began in begun.items():
            n = int(now - began) - done[rank]  # 1 s steps up to now
            if n > 0:
                rd.write_steps(store, steps(rank, done[rank], n, began + done[rank]))
                done[rank] += n
        results = live.scan()
    meta = store.read_json("job.json")
    store.write_json("job.json", {**meta, "status": "Completed", "end_time": now})
    offline = evaluate_rules(stepscope.open(str(path)), [s.rule for s in build_rules([])], now)
    assert {r.rule: r.verdict for r in results} == {r.rule: r.status for r in offline}

    by_name = {r.rule: r for r in results}
    init = by_name["MaxInitializationTime"]
    if slow_start is None:
        assert init.verdict is Status.NO_ISSUES_FOUND and init.datapoints == 2
    else:
        assert init.verdict is Status.ISSUES_FOUND
        assert [f.rank for f in init.findings] == [1] and init.triggers == 1
        assert init.findings[0].value == slow_start / 60
    assert by_name["StepOutlier"].verdict is Status.NO_ISSUES_FOUND
    assert by_name["StepOutlier"].datapoints > 0
