"""What a fix would save (``saving_seconds``): the idle cores' bound of the data-wait
rules, and every cost held to the time its evidence spans (issue 30, item 3).

Jobs are ``test_rules_cpu``'s: one node of 4 cores, 400 steps of 0.2 s of which 0.1 s
wait for data (steps 5-399 judged by DataLoaderWorkers: 79 s of steps, 39.5 s of
wait), with ``num_workers=0``. Each firing test has its twin with the same
parameters on a job where the bound does not bind.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import rules_data as rd
from stepscope.rules import Finding, RuleInput, Status
from stepscope.rules._cost import evidence_seconds, within_evidence
from stepscope.rules._host_base import StepEffect
from stepscope.rules._loader_rules import Priced, first_workers
from stepscope.rules._node_rule import NodeRule, Part
from test_rules_cpu import WAITING, N, cpu_job, events, fires, judge, loader, threads

T, W = 395 * 0.2, 395 * 0.1  # DataLoaderWorkers' steps and their wait, seconds
FACTS = [threads(4), loader(0)]


def test_more_workers_save_only_what_the_idle_cores_absorb(tmp_path: Path) -> None:
    # The job uses 1.5 cores decoding and computing; 0.2 core idle: its CPU work fits
    # in no less than T * 1.5 / 1.7 seconds of steps, whatever the workers.
    busy = judge(cpu_job(tmp_path / "busy", FACTS, WAITING, cpu=95.0), "DataLoaderWorkers")
    fires(busy)
    assert busy.cost_seconds == pytest.approx(W, rel=1e-3)
    assert busy.saving_seconds == pytest.approx(T * (1 - 1.5 / 1.7), rel=1e-3)
    why = str(busy.details["saving_bound"])
    assert why.startswith(
        "more workers only use idle cores: the job used 38% "
        "(1.50 cores) of the node's CPU with 5% (0.20 core) idle"
    )
    assert "which would save at most 9.3 s of it" in busy.findings[0].message
    # The twin: 2.2 cores idle absorb the whole wait.
    idle = judge(cpu_job(tmp_path / "idle", FACTS, WAITING, cpu=45.0), "DataLoaderWorkers")
    fires(idle)
    assert idle.saving_seconds == idle.cost_seconds == pytest.approx(W, rel=1e-3)
    assert "saving_bound" not in idle.details
    assert "would save at most" not in idle.findings[0].message


def test_a_wait_off_the_cpu_is_saved_on_a_busy_node(tmp_path: Path) -> None:
    """No core idle: a loader that decodes on the training thread saves nothing; one
    that sleeps (the job at 0.2 core) saves at least the wait its CPU cannot hold. The
    sleeping wait is mostly off the CPU, so its finding names the workers that overlap
    it (a batch fetched in the 0.1 s of a step's own work: one); the decoding one says
    cores."""
    decoding = cpu_job(tmp_path / "decoding", FACTS, WAITING, cpu=100.0, proc_cpu=150.0)
    sleeping = cpu_job(tmp_path / "sleeping", FACTS, WAITING, cpu=100.0, proc_cpu=20.0)
    dec, slept = judge(decoding, "DataLoaderWorkers"), judge(sleeping, "DataLoaderWorkers")
    fires(dec)
    fires(slept)
    assert dec.saving_seconds == pytest.approx(0.0, abs=1e-6)
    assert slept.saving_seconds == pytest.approx(W - T * 0.2, rel=1e-3)
    assert dec.cost_seconds == slept.cost_seconds == pytest.approx(W, rel=1e-3)
    said = "set DataLoader(num_workers=1): the wait is mostly off the CPU"
    assert said in slept.findings[0].message
    assert "num_workers=N), N up to the idle cores" in dec.findings[0].message


def sleeping_job(path: Path, pool_wait: float | None) -> Path:
    """No core idle, the job at 0.2 core (a loader that sleeps), its workers waiting
    ``pool_wait`` % of a core for one (None: not recorded, an older job)."""
    store = rd.new_job(path, end=rd.T0 + 5 + N * 0.2)
    rd.node_info(store, gpus=0)
    system = rd.system_frame(int((N * 0.2 + 10) / 0.5), cpu=100.0)
    system["proc_cpu"] = np.float32(20.0)
    if pool_wait is not None:
        system["proc_pool_run_wait"] = np.float32(pool_wait)
    rd.write_system(store, system)
    rd.write_steps(store, rd.steps_frame(N, **WAITING))
    events(store, FACTS)
    return path


def test_a_worker_waiting_for_a_core_is_no_wait_off_the_cpu(tmp_path: Path) -> None:
    """The sleeping loader's job, its workers queued 0.1 core: of the wait, T * 0.3 s
    needed a core (0.2 running, 0.1 waiting for one), not T * 0.2."""
    queued = judge(sleeping_job(tmp_path / "queued", 10.0), "DataLoaderWorkers")
    fires(queued)
    assert queued.saving_seconds == pytest.approx(W - T * 0.3, rel=1e-3)
    older = judge(sleeping_job(tmp_path / "older", None), "DataLoaderWorkers")
    fires(older)
    assert older.saving_seconds == pytest.approx(W - T * 0.2, rel=1e-3)


def contended_job(
    path: Path,
    run_queue: float | None,
    autogroup: bool | None = False,
    group: tuple[float, int] | None = None,
) -> Path:
    """No core idle, the job at 1.5 cores, its training thread waiting half the time
    for a core; ``run_queue`` runnable tasks on the node (None: not recorded), shared
    by task (``autogroup`` off) or first by session; ``group``: the others' CPU in the
    job's autogroup (% of a core) and the other busy autogroups, at every 6th sample
    (a scan of the other processes every 3 s)."""
    store = rd.new_job(path, end=rd.T0 + 5 + N * 0.2)
    rd.node_info(store, gpus=0, autogroup=autogroup)
    system = rd.system_frame(int((N * 0.2 + 10) / 0.5), cpu=100.0)
    system["proc_run_wait"] = np.float32(50.0)
    if run_queue is not None:
        system["run_queue"] = np.int32(run_queue)
    if group is not None:
        scans = np.arange(len(system)) % 6 == 5
        system["others_cpu_group"] = np.where(scans, group[0], np.nan).astype(np.float32)
        system["others_groups"] = pd.array(np.where(scans, group[1], 0), "Int32")
        system.loc[~scans, "others_groups"] = pd.NA
    rd.write_system(store, system)
    rd.write_steps(store, rd.steps_frame(N, **WAITING))
    events(store, FACTS)
    return path


def test_on_a_contended_node_workers_get_their_fair_share(tmp_path: Path) -> None:
    """8 runnable tasks on 4 cores, 2 of them the job's (1.5 running, 0.5 waiting): with
    4 workers the job's 6 of 12 tasks get 2 cores, so its CPU work takes 3/4 of the time."""
    res = judge(contended_job(tmp_path / "queued", 8), "DataLoaderWorkers")
    fires(res)
    assert res.saving_seconds == pytest.approx(T * (1 - 1.5 / 2.0), rel=1e-3)
    assert "workers would get it about 2.00 cores in all (its fair share)" in str(
        res.details["saving_bound"]
    )
    # The twin: the run queue unrecorded, only idle cores count, and none is idle.
    unknown = judge(contended_job(tmp_path / "unknown", None), "DataLoaderWorkers")
    fires(unknown)
    assert unknown.saving_seconds == pytest.approx(0.0, abs=1e-6)


@pytest.mark.parametrize("autogroup", [True, None])
def test_where_sessions_share_the_cores_first_workers_get_no_larger_share(
    tmp_path: Path, autogroup: bool | None
) -> None:
    """The same queue, but the kernel shares the busy cores among sessions (autogroup
    on, or not recorded): more workers split the job's share, only idle cores count,
    and none is idle."""
    res = judge(contended_job(tmp_path / "grouped", 8, autogroup), "DataLoaderWorkers")
    fires(res)
    assert res.saving_seconds == pytest.approx(0.0, abs=1e-6)
    assert "fair share" not in str(res.details["saving_bound"])


def test_with_autogroup_on_only_the_jobs_session_shares_by_task(tmp_path: Path) -> None:
    """The same queue, the kernel sharing by session first: where the others (2.5
    cores) are all in the job's autogroup, the workers get their fair share by task as
    with autogroup off; where they are in other busy autogroups (at least 2.5 of them:
    they keep 2.5 cores busy), the job's group, with a worker per core, weighs as one
    group beside each core's part of them: 4 / (1 + 2.5 / 4) = 2.46 cores against one
    other group, 2.29 against three; against twelve (three a core) a quarter of each
    core, 1 core, is less than the 1.5 cores the job has: nothing is saved."""
    fair = T * (1 - 1.5 / 2.0)
    same = judge(contended_job(tmp_path / "same", 8, True, (250.0, 0)), "DataLoaderWorkers")
    fires(same)
    assert same.saving_seconds == pytest.approx(fair, rel=1e-3)
    why = str(same.details["saving_bound"])
    assert "about 2.00 cores in all (its fair share in its session's autogroup)" in why
    for groups, rivals in ((1, 2.5), (3, 3.0)):
        res = judge(
            contended_job(tmp_path / f"g{groups}", 8, True, (0.0, groups)), "DataLoaderWorkers"
        )
        fires(res)
        share = 4 * 4 / (4 + rivals)
        assert res.saving_seconds == pytest.approx(T * (1 - 1.5 / share), rel=1e-3)
    twelve = judge(contended_job(tmp_path / "twelve", 8, True, (0.0, 12)), "DataLoaderWorkers")
    fires(twelve)
    assert twelve.saving_seconds == pytest.approx(0.0, abs=1e-6)
    assert "(its fair share" not in str(twelve.details["saving_bound"])


def test_competitors_split_between_sessions_share_in_proportion(tmp_path: Path) -> None:
    """Half the others (1.25 cores) in the job's autogroup, half in one other: the
    job's group takes 4 / (1 + 1.25 / 4) = 3.05 cores (more than the 2.75 the other
    leaves it); of the 6 runnable tasks not the job's, half (3) are taken as its
    group's: with 4 workers the job's 6 of 9 tasks get 2.03 cores. The twin without
    the split (an older job): the others keep what they use, none idle."""
    res = judge(contended_job(tmp_path / "half", 8, True, (125.0, 1)), "DataLoaderWorkers")
    fires(res)
    share = 16 / 5.25 * 6 / 9
    assert res.saving_seconds == pytest.approx(T * (1 - 1.5 / share), rel=1e-3)
    older = judge(contended_job(tmp_path / "older", 8, True), "DataLoaderWorkers")
    fires(older)
    assert older.saving_seconds == pytest.approx(0.0, abs=1e-6)


def test_without_the_jobs_cpu_the_nodes_busy_cpu_is_taken_as_the_jobs(tmp_path: Path) -> None:
    job = cpu_job(tmp_path / "j", FACTS, WAITING, cpu=95.0, proc_cpu=None)
    res = judge(job, "DataLoaderWorkers")
    fires(res)
    assert res.saving_seconds == pytest.approx(T * 0.05, rel=1e-3)  # 0.2 of 4 cores idle
    assert "the node (the job's own CPU unrecorded) used 95%" in str(res.details["saving_bound"])


def test_data_loading_bounds_its_saving_by_the_idle_cores_too(tmp_path: Path) -> None:
    busy = judge(cpu_job(tmp_path / "busy", FACTS, WAITING, cpu=100.0), "DataLoading")
    idle = judge(cpu_job(tmp_path / "idle", FACTS, WAITING, cpu=45.0), "DataLoading")
    assert busy.status is idle.status is Status.ISSUES_FOUND
    assert busy.cost_seconds == pytest.approx(idle.cost_seconds or 0.0)
    assert busy.saving_seconds == pytest.approx(0.0, abs=1e-6)
    assert "more workers only use idle cores" in str(busy.details["saving_bound"])
    assert idle.saving_seconds == idle.cost_seconds and "saving_bound" not in idle.details


# -- never a cost above the time its evidence spans ---------------------------------------


def _finding(start: float, end: float) -> Finding:
    return Finding("slow", "fix it", 0.5, node="n", rank=0, start=start, end=end)


class Fixed(NodeRule):
    """A rule that finds what it is given, at the cost it is given."""

    name = "Fixed"

    def __init__(self, cost: float, spans: list[tuple[float, float]]) -> None:
        super().__init__()
        self.given, self.spans = cost, spans

    def check(self, data: RuleInput) -> Part:
        findings = [_finding(a, b) for a, b in self.spans]
        return Part(findings, len(findings), 10, cost_seconds=self.given)


def test_a_cost_is_held_to_the_time_its_findings_span() -> None:
    spans = [(10.0, 12.0), (11.0, 13.0), (20.0, 21.0)]  # 3 s and 1 s: 4 s in all
    assert evidence_seconds([_finding(a, b) for a, b in spans]) == pytest.approx(4.0)
    held = Fixed(4.53, spans).combine([Fixed(4.53, spans).check(RuleInput())], RuleInput())
    assert held.status is Status.ISSUES_FOUND
    assert held.cost_seconds == pytest.approx(4.0) and held.saving_seconds == pytest.approx(4.0)
    within = Fixed(3.5, spans).combine([Fixed(3.5, spans).check(RuleInput())], RuleInput())
    assert within.cost_seconds == pytest.approx(3.5)  # the twin: below the span, kept
    # a finding without a time bounds nothing
    timeless = Finding("x", "y", 0.5)
    assert within_evidence(9.0, [timeless, _finding(0.0, 1.0)]) == 9.0


def test_host_contention_loses_no_more_than_it_lasted() -> None:
    effect = StepEffect(2.0, 0.5, 8, 20, cost=4.53, measured=4.53,
                        measured_as="its threads waited {} for a core during them")  # fmt: skip
    held = effect.held(4.0)
    assert held.cost == 4.0 and held.estimate == 4.53
    assert held.text().endswith("about 4 s lost (estimated 4.53 s, held to the time it lasted)")
    kept = effect.held(5.0)  # the twin: it lasted longer than it cost
    assert kept is effect and kept.text().endswith("about 4.53 s lost")


@pytest.mark.parametrize(
    ("wait", "duration", "off_cpu", "named"),
    [
        (0.03, 0.04, 0.9, "num_workers=3)"),  # 30 ms to fetch beside 10 ms of work
        (0.03, 0.04, 0.4, "num_workers=N), N up to the idle cores"),  # mostly on a CPU
        (0.2, 0.201, 0.9, "num_workers=16)"),  # at most 16: storage to name, not workers
    ],
)
def test_workers_for_a_wait_off_the_cpu_are_sized_by_the_steps_own_work(
    wait: float, duration: float, off_cpu: float, named: str
) -> None:
    rows = pd.DataFrame({"data_wait": [wait] * 50, "duration": [duration] * 50})
    cost = wait * 50
    priced = Priced(cost, cost, None, off_cpu=off_cpu * cost)
    assert f"set DataLoader({named}" in first_workers(rows, priced)
