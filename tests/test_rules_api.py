"""The rule API: results as JSON, parameters, rule sets, errors, custom rules, the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import rules_data as rd
import stepscope
from stepscope.cli import main
from stepscope.cli._rules import rules_text
from stepscope.rules import (
    BUILTIN,
    CPUBottleneck,
    Finding,
    Rule,
    RuleConfigError,
    RuleInput,
    RuleResult,
    Status,
    StepOutlier,
    build_rules,
    evaluate_job,
)
from stepscope.rules._registry import PROFILER_RULES

ROOT = Path(__file__).resolve().parents[1]
KEYS = {
    "rule",
    "status",
    "triggers",
    "datapoints",
    "message",
    "recommendation",
    "parameters",
    "findings",
    "description",
    "updated",
}


def test_result_round_trips_through_json() -> None:
    f = Finding("slow", "fix it", 1.7, node="a", rank=3, steps=(4, 5), value=float("nan"))
    res = RuleResult("X", Status.ISSUES_FOUND, 1, 10, "m", "r", {"k": 1}, (f,), "d", updated=5.0)
    data = json.loads(json.dumps(res.to_dict()))
    assert set(data) >= KEYS and data["status"] == "IssuesFound"
    assert data["findings"][0]["severity"] == 1.0 and data["findings"][0]["value"] is None
    assert RuleResult.from_dict(data).findings[0].steps == (4, 5)
    assert RuleResult.from_dict(data).status is Status.ISSUES_FOUND


def test_parameters_are_validated_and_converted() -> None:
    rule = CPUBottleneck(cpu_threshold="90", patience=5.0)
    assert rule.p("cpu_threshold") == 90.0 and rule.p("patience") == 5
    assert rule.p("scan_interval_us") == 2_000_000
    with pytest.raises(RuleConfigError, match="Valid parameters: cpu_threshold, gpu_threshold"):
        CPUBottleneck(cpu_treshold=90)
    with pytest.raises(RuleConfigError, match="expected a float"):
        CPUBottleneck(threshold="lots")
    with pytest.raises(RuleConfigError, match="one of train, eval, both"):
        StepOutlier(mode="test")
    assert StepOutlier(mode="TRAIN").p("mode") == "train"


def test_profiler_report_runs_every_rule_with_overrides() -> None:
    specs = build_rules(
        [{"name": "ProfilerReport", "parameters": {"CPUBottleneck_cpu_threshold": 80}}]
    )
    rules = {s.rule.rule_name: s.rule for s in specs}
    assert set(rules) == set(PROFILER_RULES) and set(PROFILER_RULES) <= set(BUILTIN)
    assert rules["CPUBottleneck"].p("cpu_threshold") == 80
    assert build_rules([]) and len(build_rules(None)) == len(PROFILER_RULES)
    with pytest.raises(RuleConfigError, match="<Rule>_<parameter>"):
        build_rules([{"name": "ProfilerReport", "parameters": {"cpu_threshold": 80}}])
    with pytest.raises(RuleConfigError, match="Valid parameters"):
        build_rules([{"name": "ProfilerReport", "parameters": {"CPUBottleneck_x": 80}}])


def test_rule_set_limits_and_errors() -> None:
    with pytest.raises(RuleConfigError, match="at most 20 rules"):
        build_rules([{"name": "StepOutlier"}] * 21)
    with pytest.raises(RuleConfigError, match="configured twice"):
        build_rules([{"name": "StepOutlier"}] * 2)
    with pytest.raises(RuleConfigError, match="Unknown rule 'Nope'"):
        build_rules([{"name": "Nope"}])
    with pytest.raises(
        RuleConfigError, match='Valid actions: "stop", a webhook table or a command table'
    ):
        build_rules([{"name": "StepOutlier", "actions": ["email"]}])
    specs = build_rules(
        [
            {"name": "ProfilerReport"},
            {"name": "StepOutlier", "actions": ["stop"], "parameters": {"stddev": 3}},
        ]
    )
    outlier = next(s for s in specs if s.rule.rule_name == "StepOutlier")
    assert outlier.actions == ("stop",) and outlier.rule.p("stddev") == 3


class Broken(Rule):
    def evaluate(self, data: RuleInput) -> RuleResult:
        raise ZeroDivisionError("oops")


def test_an_exception_in_a_rule_is_an_error_result(tmp_path: Path) -> None:
    from stepscope.rules import evaluate_rules

    store = rd.new_job(tmp_path / "j")
    rd.write_steps(store, rd.steps_frame(50))
    results = evaluate_rules(stepscope.open(str(tmp_path / "j")), [Broken(), StepOutlier()])
    assert results[0].status is Status.ERROR and "ZeroDivisionError: oops" in results[0].message
    assert results[1].status is Status.NO_ISSUES_FOUND


def test_custom_rule_from_a_file(tmp_path: Path) -> None:
    store = rd.new_job(tmp_path / "j")
    rd.write_steps(store, rd.steps_frame(50, duration=0.8))
    entry = {
        "name": "SlowSteps",
        "source": str(ROOT / "examples" / "custom_rule.py"),
        "rule_to_invoke": "SlowSteps",
        "parameters": {"max_seconds": "0.5"},
    }
    (res,) = evaluate_job(stepscope.open(str(tmp_path / "j")), [entry])
    assert res.rule == "SlowSteps" and res.status is Status.ISSUES_FOUND
    assert res.findings[0].rank == 0 and res.datapoints == 45
    (ok,) = evaluate_job(
        stepscope.open(str(tmp_path / "j")), [{**entry, "parameters": {"max_seconds": 2}}]
    )
    assert ok.status is Status.NO_ISSUES_FOUND and ok.datapoints == 45
    with pytest.raises(RuleConfigError, match="has no class 'Nope'"):
        build_rules([{**entry, "rule_to_invoke": "Nope"}])


def test_cli_support(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = rd.new_job(tmp_path / "j")
    rd.write_steps(store, rd.steps_frame(100, duration=0.2, data_wait=0.1))
    path = str(tmp_path / "j")
    text = rules_text(path, [], [], False)
    assert text.splitlines()[1].startswith("DataLoading")  # most severe first
    (res,) = json.loads(rules_text(path, ["DataLoading"], ["DataLoading.threshold=60"], True))
    assert set(res) >= KEYS and res["status"] == "NoIssuesFound"
    assert res["parameters"]["threshold"] == 60
    for params, names in (
        (["DataLoading:threshold=1"], []),
        (["DataLoading.nope=1"], []),
        ([], ["NoSuchRule"]),
        (["StepOutlier.stddev=3"], ["DataLoading"]),
    ):
        argv = ["rules", path, *(f"--rule={n}" for n in names), *(f"--param={p}" for p in params)]
        code = main(argv)
        out, err = capsys.readouterr()
        assert code == 2 and err.startswith("stepscope: error:") and out == "", err
