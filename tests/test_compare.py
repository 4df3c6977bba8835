"""``stepscope compare`` on synthetic jobs (tests/rules_data.py): the same noisy step
distribution twice is "no difference" and passes the gate; a planted +15% in forward is
"slower, mostly forward" and fails it. Each firing case has its silent twin."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import stepscope
from rules_data import (
    T0,
    new_job,
    node_info,
    steps_frame,
    system_frame,
    write_event,
    write_steps,
    write_system,
)
from stepscope.analysis.compare import LeftOut, PhaseComparison, compare, compare_jobs
from stepscope.cli import main

N = 400


def job(
    path: Path,
    seed: int,
    forward_extra: float | np.ndarray = 0.0,
    workers: int = 0,
    gpu: tuple[float, float, float] | None = None,
    host: tuple[float | np.ndarray, float, float | np.ndarray | None] | None = None,
) -> Path:
    """A CPU job of ``N`` training steps of 0.2 s with correlated noise (a slow spell of
    the host every so often), a few stalls, and ``forward_extra`` seconds in forward.
    ``host``: (node CPU %, job CPU % of a core, % of the time the job's busiest thread
    waited for a core, None: not measured) sampled every 0.5 s."""
    rng = np.random.default_rng(seed)
    spell = np.repeat(rng.normal(0.0, 0.006, N // 20), 20)  # neighbouring steps move together
    noise = rng.normal(0.0, 0.01, N) + spell
    forward = 0.06 + forward_extra + np.abs(rng.normal(0.0, 0.002, N))
    duration = 0.2 + forward_extra + noise
    duration[rng.choice(np.arange(20, N), 4, replace=False)] += 2.0  # stalls: outliers
    store = new_job(path, end=T0 + 200)
    node_info(store, gpus=0)
    write_steps(store, steps_frame(N, duration=duration, forward=forward, gpu=gpu))
    if host is not None:
        n = np.size(host[0]) if np.ndim(host[0]) else int(duration.sum() / 0.5) + 40
        system = system_frame(n, cpu=host[0], proc_cpu=host[1])
        if host[2] is not None:
            system["proc_thread_run_wait"] = np.float32(host[2])
        write_system(store, system)
    write_event(
        store, "dataloader", {"num_workers": workers, "batch_size": 32, "pin_memory": False}
    )
    return path


def planted(tmp: Path) -> dict[str, Path]:
    """The comparison tests' jobs under ``tmp``: ``a``, its silent twin ``same`` (the
    same distribution, another seed) and ``slow`` (+0.03 s in forward, 2 workers)."""
    return {
        "a": job(tmp / "a", 1),
        "same": job(tmp / "same", 2),
        "slow": job(tmp / "slow", 3, forward_extra=0.03, workers=2),
    }


@pytest.fixture(scope="module")
def jobs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return planted(tmp_path_factory.mktemp("cmp"))


def phase(base: Path, new: Path) -> PhaseComparison:
    (train,) = compare(stepscope.open(str(base)), stepscope.open(str(new))).phases
    return train


def test_the_same_distribution_twice_is_no_difference(jobs: dict[str, Path]) -> None:
    train = phase(jobs["a"], jobs["same"])
    assert train.direction == "same" and train.mostly is None
    assert train.verdict.startswith("no difference beyond the noise of these runs (95% interval")
    assert train.ratio is not None and train.ratio.low < 1 < train.ratio.high
    assert train.base_left_out == LeftOut(total=N, warmup=10, profiled=0, outliers=4)
    assert train.new_left_out.kept > 300


def test_a_planted_slower_forward_is_slower_mostly_forward(jobs: dict[str, Path]) -> None:
    train = phase(jobs["a"], jobs["slow"])
    assert train.direction == "slower" and train.mostly == "forward"
    assert train.verdict.startswith("slow is slower by 1") and "mostly forward" in train.verdict
    assert train.ratio is not None and 1.10 < train.ratio.low < train.ratio.value < 1.20
    forward = next(p for p in train.parts if p.part == "forward")
    assert forward.change.low > 0.02 and forward.new_share > forward.base_share


def test_the_other_way_round_is_faster(jobs: dict[str, Path]) -> None:
    train = phase(jobs["slow"], jobs["a"])
    assert train.direction == "faster" and train.mostly == "forward"
    assert train.verdict.startswith("a is faster by 1")


def test_the_output_is_deterministic(jobs: dict[str, Path]) -> None:
    assert phase(jobs["a"], jobs["slow"]) == phase(jobs["a"], jobs["slow"])


def test_setup_differences_and_what_is_the_same(jobs: dict[str, Path]) -> None:
    a, same, slow = (stepscope.open(str(jobs[k])) for k in ("a", "same", "slow"))
    assert compare(a, slow).setup.facts == [("dataloader0.num_workers", "0", "2")]
    assert compare(a, same).setup.facts == []  # the silent twin: identical setups
    setup = compare(a, same).base_setup.facts
    assert setup["command"] == "python train.py" and setup["dataloader0.batch_size"] == "32"
    assert setup["node0.cores"] == "4" and setup["node0.gpus"] == "none"


def test_several_jobs_each_against_the_first(jobs: dict[str, Path]) -> None:
    opened = [stepscope.open(str(jobs[k])) for k in ("a", "same", "slow")]
    got = compare_jobs(opened)
    assert [(c.base, c.new) for c in got] == [("a", "same"), ("a", "slow")]
    assert [c.phases[0].direction for c in got] == ["same", "slower"]


def test_too_few_steady_steps_is_said_not_judged(tmp_path: Path) -> None:
    short = tmp_path / "short"
    store = new_job(short)
    write_steps(store, steps_frame(15))
    train = phase(short, short)
    assert train.direction == "unknown" and train.ratio is None
    assert train.verdict == "too few steady train steps to compare (5 and 5; 10 needed)"


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["compare", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_the_gate_passes_the_same_distribution(jobs: dict[str, Path], capsys: Any) -> None:
    code, out, _ = cli(capsys, str(jobs["a"]), str(jobs["same"]), "--fail-if-slower", "5%")
    assert code == 0
    assert out.splitlines()[0].startswith("no difference beyond the noise of these runs")
    assert "setup: no differences recorded" in out


def test_the_gate_fails_the_planted_slowdown(jobs: dict[str, Path], capsys: Any) -> None:
    code, out, _ = cli(capsys, str(jobs["a"]), str(jobs["slow"]), "--fail-if-slower", "5")
    assert code == 1
    first = out.splitlines()[0]
    said = first.split(";")[0]  # then that the spread between runs is unknown (one run a side)
    assert said.startswith("slow is slower by") and said.endswith("mostly forward")
    assert "dataloader0.num_workers: 0 -> 2" in out and "forward" in out


def test_a_limit_past_the_slowdown_passes_it(jobs: dict[str, Path], capsys: Any) -> None:
    """The gate's silent twin on the same jobs: a 15% slowdown is within a 20% limit;
    without the flag there is no gate."""
    assert cli(capsys, str(jobs["a"]), str(jobs["slow"]), "--fail-if-slower", "20%")[0] == 0
    assert cli(capsys, str(jobs["a"]), str(jobs["slow"]))[0] == 0


def test_json_for_scripts(jobs: dict[str, Path], capsys: Any) -> None:
    code, out, _ = cli(capsys, str(jobs["a"]), str(jobs["same"]), str(jobs["slow"]), "--json")
    assert code == 0
    doc = json.loads(out)
    assert [(c["base"], c["new"]) for c in doc] == [("a", "same"), ("a", "slow")]
    slow = doc[1]["phases"][0]
    assert slow["direction"] == "slower" and slow["mostly"] == "forward"
    assert slow["slower_low_pct"] > 10 and slow["samples_per_s"][0] > slow["samples_per_s"][1]


def test_names_are_resolved_in_the_output_folder(jobs: dict[str, Path], capsys: Any) -> None:
    folder = str(jobs["a"].parent)
    code, out, _ = cli(capsys, "a", "slow", "-o", folder)
    assert code == 0 and out.startswith("slow is slower")


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["a"], "compare needs two jobs or more (got 1)"),
        (["a", "nope"], "No stepscope job 'nope'"),
    ],
)
def test_bad_input_is_one_line(
    jobs: dict[str, Path], capsys: Any, argv: list[str], said: str
) -> None:
    code, out, err = cli(capsys, *argv, "-o", str(jobs["a"].parent))
    assert code == 2 and not out and said in err and len(err.strip().splitlines()) == 1


def test_a_bad_percentage_says_the_form(jobs: dict[str, Path], capsys: Any) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["compare", str(jobs["a"]), str(jobs["a"]), "--fail-if-slower", "five"])
    assert exc.value.code == 2
    assert "'five' is not a percentage: give a number >= 0, e.g. 5% or 5" in capsys.readouterr().err


def test_on_a_gpu_job_the_device_parts_name_the_change(tmp_path: Path) -> None:
    """The device's forward took 30 ms more: "mostly gpu_forward", not a host part; its
    silent twin, the same device times twice, is no difference."""
    base = job(tmp_path / "a", 1, gpu=(0.05, 0.08, 0.01))
    same = job(tmp_path / "same", 2, gpu=(0.05, 0.08, 0.01))
    slow = job(tmp_path / "slow", 3, forward_extra=0.03, gpu=(0.08, 0.08, 0.01))
    fired = phase(base, slow)
    assert fired.direction == "slower" and fired.mostly == "gpu_forward"
    assert {p.part for p in fired.parts} >= {"gpu_forward", "gpu_backward", "device_idle"}
    twin = phase(base, same)
    assert twin.direction == "same" and twin.mostly is None and twin.parts


def test_jobs_without_a_common_phase_are_said_so(jobs: dict[str, Path], capsys: Any) -> None:
    evaluated = jobs["a"].parent / "eval-only"
    store = new_job(evaluated)
    write_steps(store, steps_frame(40, phase="eval"))
    c = compare(stepscope.open(str(jobs["a"])), stepscope.open(str(evaluated)))
    assert c.phases == []
    code, out, _ = cli(capsys, str(jobs["a"]), str(evaluated), "--fail-if-slower", "5%")
    assert code == 0 and out.startswith("no phase recorded by both jobs")


# A busy host: each step waits 0.08 s for a core (29% of a 0.28 s step) while other
# processes use 70% of the node (95% node CPU, the job 100% of one of 4 cores).
WAITED = 100 * 0.08 / 0.28


@pytest.fixture(scope="module")
def hosts(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    tmp = tmp_path_factory.mktemp("hosts")
    return {
        "quiet": job(tmp / "quiet", 1, host=(30.0, 100.0, 0.5)),
        "hogged": job(tmp / "hogged", 2, forward_extra=0.08, host=(95.0, 100.0, WAITED)),
        "unmeasured": job(tmp / "unmeasured", 2, forward_extra=0.08, host=(95.0, 100.0, None)),
        # the same waits, but the job's own threads took the cores (others at 5%)
        "own": job(tmp / "own", 2, forward_extra=0.08, host=(30.0, 100.0, WAITED)),
    }


def test_a_run_slowed_by_other_processes_is_judged_on_its_own_time(
    hosts: dict[str, Path],
) -> None:
    train = phase(hosts["quiet"], hosts["hogged"])
    assert train.basis == "own time" and train.direction == "same", train.verdict
    assert "judged on the steps' own time" in train.verdict
    assert "B waited for a core 29% of the step, others at 70% of the node" in train.verdict
    assert train.contention is not None and train.contention[1].contended
    assert not train.contention[0].contended


def test_the_same_slowdown_without_the_wait_measured_is_called(hosts: dict[str, Path]) -> None:
    """The twin: the same steps, the wait for a core not recorded (an older job)."""
    train = phase(hosts["quiet"], hosts["unmeasured"])
    assert train.basis == "step time" and train.direction == "slower", train.verdict
    assert train.ratio is not None and train.ratio.low > 1.3


def test_waits_for_the_job_s_own_threads_are_not_excused(hosts: dict[str, Path]) -> None:
    """The same waits with the node's other processes idle: the job oversubscribed its
    own cores, a change the comparison must show."""
    train = phase(hosts["quiet"], hosts["own"])
    assert train.basis == "step time" and train.direction == "slower", train.verdict
    assert train.contention is not None and not train.contention[1].contended


def spelled(path: Path, seed: int, extra: float) -> Path:
    """A hog for the first half of the job (the steps wait 0.08 s for a core, others at
    70%), a quiet host after it; ``extra`` seconds more forward in every step."""
    first = np.arange(N) < N // 2
    d = np.where(first, 0.28, 0.2) + extra
    edge = 5.0 + float(d[: N // 2].sum())  # the spell's end, seconds after T0
    t = 0.5 * np.arange(int((5.0 + d.sum()) / 0.5) + 40)
    hog = t <= edge
    cpu, wait = np.where(hog, 95.0, 30.0), np.where(hog, WAITED, 0.5)
    return job(path, seed, forward_extra=np.where(first, 0.08, 0.0) + extra,
               host=(cpu, 100.0, wait))  # fmt: skip


def test_steps_taken_under_a_hog_are_left_out_where_enough_calm_ones_remain(
    hosts: dict[str, Path], tmp_path: Path
) -> None:
    train = phase(hosts["quiet"], spelled(tmp_path / "same", 2, 0.0))
    assert train.basis == "uncontended steps" and train.direction == "same", train.verdict
    assert "judged on the steps taken while other processes were nearly idle" in train.verdict


def test_a_real_change_is_still_called_on_the_calm_steps(
    hosts: dict[str, Path], tmp_path: Path
) -> None:
    """The twin: the same spell, and 0.02 s more forward in every step (+10%)."""
    train = phase(hosts["quiet"], spelled(tmp_path / "slower", 2, 0.02))
    assert train.basis == "uncontended steps" and train.direction == "slower", train.verdict
    assert train.mostly == "forward"


def test_a_node_s_ranks_share_the_wait_its_processes_summed(tmp_path: Path) -> None:
    """The sampler sums the waits of a node's training processes: with two ranks each
    waiting 40% of a step, every step waited 0.4 of itself, not 0.8 (as the rules)."""
    from stepscope.analysis.compare_contention import WAIT, with_core_wait

    store = new_job(tmp_path / "two", end=T0 + 60)
    node_info(store, gpus=0)
    for rank in (0, 1):
        write_steps(store, steps_frame(100, rank=rank, duration=0.4))
    system = system_frame(100)
    system["proc_thread_run_wait"] = np.float32(80.0)  # 40% each, summed
    write_system(store, system)
    job = stepscope.open(str(tmp_path / "two"))
    steps = with_core_wait(job, job.steps(phase="train"))
    inside = steps[steps["end"] < T0 + 45]  # steps the samples cover
    assert len(inside) > 100 and {0, 1} <= set(inside["rank"])
    assert np.allclose(inside[WAIT], 0.4 * 0.4, rtol=0.02)
