"""``stepscope compare`` with several runs a side (docs/compare.md, "Several runs a
side"), on job folders written with the project's writer (tests/rules_data.py): runs
whose steps are steady but whose level differs from run to run, as on a shared host.

Each firing case has its silent twin with the same runs: a planted +15 ms in ``other``
is named though the step time's interval holds 0; +5% in ``backward``, within its
spread between runs, stays "no difference". Identical sides are "no difference" with
several runs, where one run against one is called slower; one run a side says the
spread between runs is unknown, several do not."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import stepscope
from rules_data import new_job, node_info, steps_frame, write_steps
from stepscope.analysis.compare import PhaseComparison, compare_sides
from stepscope.analysis.compare_runs import t_quantile
from stepscope.cli import main

N = 200
# Each run's compute runs this much slower or faster than the script's typical run
# (the host's run-to-run spread, about 12%); A's and B's levels come from one spread.
A_LEVELS = (0.90, 1.00, 1.15)
B_LEVELS = (0.95, 1.10, 0.88)


def run(
    path: Path,
    seed: int,
    level: float,
    other: float = 0.0,
    backward: float = 1.0,
    wait: float = 0.0,
) -> Path:
    """One run of ``N`` steady steps (2% step noise): forward 40 ms and backward 90 ms
    times ``level`` (``backward`` times more), data wait 5 ms plus ``wait``, optimizer
    4 ms and ``other`` 7 ms plus ``other`` seconds (a planted sleep)."""
    rng = np.random.default_rng(seed)

    def noisy(x: float) -> np.ndarray:
        return x * (1 + np.abs(rng.normal(0.0, 0.02, N)))

    parts = {
        "data_wait": noisy(0.005 + wait),
        "forward": noisy(0.040 * level),
        "backward": noisy(0.090 * level * backward),
        "optimizer": noisy(0.004),
        "other": noisy(0.007) + other,
    }
    duration = sum(parts.values())
    frame = steps_frame(N, duration=duration)
    for col, values in parts.items():
        frame[col] = values.astype(np.float32)
    store = new_job(path)
    node_info(store, gpus=0)
    write_steps(store, frame)
    return path


def side(tmp: Path, name: str, levels: tuple[float, ...], seed: int, **kw: float) -> list[Path]:
    return [run(tmp / f"{name}-{i}", seed + i, lvl, **kw) for i, lvl in enumerate(levels)]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[Path]]:
    tmp = tmp_path_factory.mktemp("runs")
    return {
        "a": side(tmp, "a", A_LEVELS, 10),
        "b": side(tmp, "b", B_LEVELS, 20),
        "slept": side(tmp, "slept", B_LEVELS, 20, other=0.015),
        "backward": side(tmp, "backward", B_LEVELS, 20, backward=1.05),
        "waited": side(tmp, "waited", A_LEVELS, 40, wait=0.015),  # A's runs, 15 ms more wait
        "big": side(tmp, "big", (1.0,), 30, other=0.15),  # one run, +150 ms a step: x2
    }


def train(base: list[Path], new: list[Path]) -> PhaseComparison:
    opened = ([stepscope.open(str(p)) for p in s] for s in (base, new))
    return compare_sides(*opened).phases[0]


def test_t_quantiles_are_student_s() -> None:
    """Table values of Student's t (two-sided): 12.706 (1 df), 4.303 (2), 2.228 (10)."""
    got = [round(t_quantile(0.95, df), 3) for df in (1, 2, 10)]
    assert got == [12.706, 4.303, 2.228]
    assert round(t_quantile(0.99, 4), 3) == 4.604


def test_identical_sides_with_a_spread_between_runs_are_no_difference(runs: Any) -> None:
    got = train(runs["a"], runs["b"])
    assert got.direction == "same" and got.mostly is None, got.verdict
    assert got.verdict.startswith("no difference beyond the noise of these runs")
    assert not any(p.beyond_noise for p in got.parts)
    assert got.runs is not None and got.runs.known and got.runs.df == 4
    assert 5 < (got.runs.spread_pct or 0) < 20  # the levels' spread, not the steps'
    assert "unknown" not in got.verdict
    assert got.base_left_out.total == 3 * N


def test_one_run_against_one_calls_the_run_to_run_swing(runs: Any) -> None:
    """Why several runs: A's fastest run against B's slowest is called slower on its
    steps alone, and the verdict says that the spread between runs is unknown."""
    got = train(runs["a"][:1], runs["b"][1:2])
    assert got.direction == "slower", got.verdict
    assert "the spread between runs is unknown with one run a side" in got.verdict
    assert "stepscope compare A1,A2,A3 B1,B2,B3" in got.verdict
    assert got.runs is not None and not got.runs.known


def test_one_new_run_against_several_is_judged_on_their_spread(runs: Any) -> None:
    """A CI's case: a baseline of 3 runs, one new run twice as slow (+150 ms of `other`):
    judged on its step time against the spread of the baseline's runs (2 df)."""
    got = train(runs["a"], runs["big"])
    assert got.runs is not None and got.runs.known and got.runs.df == 2
    assert got.direction == "slower" and got.mostly == "other", got.verdict
    assert got.verdict.startswith("big-0 is slower by"), got.verdict
    assert "B's one run judged against the spread of A's 3 runs" in got.verdict
    assert "unknown" not in got.verdict


def test_its_silent_twin_one_identical_run_against_several(runs: Any) -> None:
    got = train(runs["a"], runs["b"][:1])
    assert got.runs is not None and got.runs.known and got.runs.df == 2
    assert got.direction == "same", got.verdict
    assert "B's one run judged against the spread of A's 3 runs" in got.verdict


def test_a_part_of_one_run_is_not_judged(runs: Any) -> None:
    """+15 ms of `other` in one run, named beyond the noise with 3 runs a side (above),
    is not called with one: a part of one process swings past the others' spread."""
    got = train(runs["a"], runs["slept"][:1])
    assert got.direction == "same" and not any(p.beyond_noise for p in got.parts), got.verdict
    assert "a part of one run is not judged" in got.verdict
    other = next(p for p in got.parts if p.part == "other")
    assert other.change.low > 0.01  # its own interval still shows the change, uncalled


def test_one_baseline_run_against_several_says_whose_spread(runs: Any) -> None:
    got = train(runs["a"][:1], runs["b"])
    assert "A's one run judged against the spread of B's 3 runs" in got.verdict
    assert got.runs is not None and len(got.runs.new_medians) == 3 and got.runs.df == 2


def test_a_planted_cost_in_other_is_named_beyond_its_noise(runs: Any) -> None:
    got = train(runs["a"], runs["slept"])
    assert got.ratio is not None and got.ratio.low < 1 < got.ratio.high  # the total hides it
    assert got.direction == "slower" and got.mostly == "other", got.verdict
    assert got.verdict.startswith("slept-0,slept-1,slept-2 is slower, mostly other: other +15")
    assert "99% interval" in got.verdict and "within the noise of these runs" in got.verdict
    assert [p.part for p in got.parts if p.beyond_noise] == ["other"]
    other = next(p for p in got.parts if p.part == "other")
    assert other.family is not None and other.family.level == pytest.approx(0.99)
    assert other.family.low < other.change.low  # the family's interval is the wider


def test_its_twin_a_compute_change_within_the_spread_is_no_difference(runs: Any) -> None:
    """The same runs with backward 5% slower instead: within backward's own spread
    between runs (about 12%), so no part is named."""
    got = train(runs["a"], runs["backward"])
    assert got.direction == "same" and got.mostly is None, got.verdict
    backward = next(p for p in got.parts if p.part == "backward")
    assert backward.change.value > 0 and not backward.beyond_noise
    assert backward.family is not None and backward.family.low < 0 < backward.family.high


def test_parts_that_moved_both_ways_are_named_and_no_difference_called(runs: Any) -> None:
    """15 ms less data wait, 15 ms more other: the step did not move, both parts did."""
    got = train(runs["waited"], runs["slept"])
    assert got.direction == "same" and got.mostly is None, got.verdict
    assert got.verdict.startswith("no difference: the step time's change")
    assert "parts moved both ways beyond the spread between runs: " in got.verdict
    assert {p.part for p in got.parts if p.beyond_noise} == {"data_wait", "other"}


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["compare", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def names(paths: list[Path]) -> str:
    return ",".join(p.name for p in paths)


def test_sides_on_the_command_line_and_json(runs: Any, capsys: Any) -> None:
    folder = str(runs["a"][0].parent)
    argv = ["-o", folder, names(runs["a"]), names(runs["b"]), names(runs["slept"]), "--json"]
    code, out, _ = cli(capsys, *argv)
    assert code == 0
    same, slept = json.loads(out)
    assert same["base_runs"] == ["a-0", "a-1", "a-2"] and same["new_runs"] == ["b-0", "b-1", "b-2"]
    spread = same["phases"][0]["runs"]
    assert spread["known"] and spread["df"] == 4 and len(spread["base_medians"]) == 3
    assert same["phases"][0]["direction"] == "same"
    other = next(p for p in slept["phases"][0]["parts"] if p["part"] == "other")
    assert other["beyond_noise"] and other["family"]["level"] == pytest.approx(0.99)


def test_the_table_shows_the_runs(runs: Any, capsys: Any) -> None:
    code, out, _ = cli(capsys, "-o", str(runs["a"][0].parent), names(runs["a"]), "slept-0,slept-1")
    assert code == 0
    assert "A: a-0,a-1,a-2 (baseline, 3 runs)   B: slept-0,slept-1 (2 runs)" in out
    assert "run medians" in out and "spread between runs" in out and "(3 df)" in out


def test_the_gate_reads_the_interval_between_runs(runs: Any, capsys: Any) -> None:
    """B's runs 50% slower in every part fail the gate; the twin, the identical sides,
    pass it. A part named beyond its noise does not fail it (the total's bound)."""
    tmp = runs["a"][0].parent
    slow = side(tmp, "slow", tuple(1.5 * x for x in B_LEVELS), 30)
    base = [str(p) for p in runs["a"]]
    assert cli(capsys, ",".join(base), ",".join(map(str, slow)), "--fail-if-slower", "5")[0] == 1
    for new in ("b", "slept"):
        got = cli(capsys, ",".join(base), ",".join(map(str, runs[new])), "--fail-if-slower", "5")
        assert got[0] == 0, got[1]


@pytest.mark.parametrize(
    ("side_b", "said"),
    [
        (",", "side 2 ',' names no job between its commas"),
        ("b-0,,b-1", "names no job between its commas"),
        ("b-0,nope", "No stepscope job 'nope'"),
        ("b-0,b-0", "side 2 'b-0,b-0' names the same job twice (b-0)"),
    ],
)
def test_bad_sides_are_one_line(runs: Any, capsys: Any, side_b: str, said: str) -> None:
    code, out, err = cli(capsys, "-o", str(runs["a"][0].parent), "a-0,a-1", side_b)
    assert code == 2 and not out and said in err and len(err.strip().splitlines()) == 1


def test_good_sides_are_read_the_twin(runs: Any, capsys: Any) -> None:
    code, out, err = cli(capsys, "-o", str(runs["a"][0].parent), "a-0,a-1", "b-0,b-1")
    assert code == 0 and not err and out.startswith("no difference")


def test_a_run_without_steady_steps_is_said_not_judged(runs: Any, tmp_path: Path) -> None:
    short = tmp_path / "short"
    write_steps(new_job(short), steps_frame(15))
    got = train(runs["a"], [*runs["b"][:1], short])
    assert got.direction == "unknown" and got.ratio is None
    assert got.verdict == "too few steady train steps to compare (190 and 5 in a run; 10 needed)"
    assert math.isfinite(got.base_median)
