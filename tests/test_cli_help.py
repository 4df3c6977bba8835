"""Help a newcomer can read (issue 32): every subcommand, argument and flag has a one-line
help text with its default; bare `stepscope` lists the subcommands and an example; a
mistyped subcommand, choice, rule name or rule parameter gets "did you mean"."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

import pytest

from stepscope.cli import main, parser
from stepscope.errors import RuleConfigError
from stepscope.rules import build_rules

NO_HELP = (None, "", argparse.SUPPRESS)


def _subcommands(p: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    return {
        name: sub
        for action in p._actions
        if isinstance(action, argparse._SubParsersAction)
        for name, sub in action.choices.items()
    }


def help_problems(p: argparse.ArgumentParser, path: str = "stepscope") -> list[str]:
    """What `--help` of ``p`` and of its subcommands, recursively, leaves unsaid: an
    argument or subcommand without help text, on more than one line, or one that can be
    left out and does not say its default."""
    problems = []
    for action in p._actions:
        if isinstance(action, argparse._SubParsersAction):
            said = {choice.dest: choice.help for choice in action._choices_actions}
            for name, sub in action.choices.items():
                if said.get(name) in NO_HELP or "\n" in str(said.get(name)):
                    problems.append(f"{path} {name}: no one-line help")
                problems += help_problems(sub, f"{path} {name}")
            continue
        where = f"{path} {'/'.join(action.option_strings) or action.dest}"
        text = action.help
        if text in NO_HELP or not isinstance(text, str):
            problems.append(f"{where}: no help")
        elif "\n" in text:
            problems.append(f"{where}: help of more than one line")
        elif isinstance(action, argparse._HelpAction | argparse._VersionAction):
            continue
        elif not action.required and not ("default" in text or "(required)" in text):
            problems.append(f"{where}: its help does not say its default")
    return problems


def test_every_subcommand_argument_and_flag_has_one_line_of_help_with_its_default() -> None:
    assert help_problems(parser()) == []


def test_the_help_walk_finds_what_is_missing() -> None:
    """The test above could fail: a parser with each kind of gap is caught, and its
    complete twin is not."""
    p = argparse.ArgumentParser(prog="x")
    sub = p.add_subparsers()
    bare = sub.add_parser("bare")  # no help
    bare.add_argument("--flag", action="store_true")  # no help
    bare.add_argument("--n", type=int, default=3, help="a count")  # no default said
    bare.add_argument("--two", help="one line\nand another (default 1)")
    good = sub.add_parser("good", help="a subcommand")
    good.add_argument("job", help="the job")  # required: no default to say
    good.add_argument("--n", type=int, default=3, help="a count (default 3)")
    assert help_problems(p, "x") == [
        "x bare: no one-line help",
        "x bare --flag: no help",
        "x bare --n: its help does not say its default",
        "x bare --two: help of more than one line",
    ]


def test_every_subcommand_and_kind_is_walked() -> None:
    subs = _subcommands(parser())
    assert {"run", "ls", "show", "rules", "report", "demo", "export", "profile"} <= set(subs)
    assert {"config", "ui", "import"} <= set(subs)
    assert {"tensorboard", "mlflow", "wandb"} <= set(_subcommands(subs["export"]))
    assert set(_subcommands(subs["import"])) == {"sagemaker"}


def test_bare_stepscope_lists_the_subcommands_and_an_example(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A help listing, not a mistake: stdout and exit code 0 (argparse's 2 before)."""
    assert main([]) == 0
    out, err = capsys.readouterr()
    assert err == ""
    description = out.split("\n\n")[1].splitlines()[0]
    assert "PyTorch" in description and "TensorFlow/Keras" in description
    listed = {line.split()[0]: line for line in out.splitlines() if line.startswith("    ")}
    for name in _subcommands(parser()):
        assert len(listed[name].split()) > 2, f"{name} has a line of its own, with text"
    assert "examples:" in out and "stepscope run -- python train.py" in out
    main_help = parser().format_help()
    assert out == main_help  # the same overview --help prints


def test_run_names_the_process_count_n() -> None:
    text = _subcommands(parser())["run"].format_help()
    assert "--nproc-per-node N " in text and "NODE" not in text


def test_profile_says_up_front_that_the_job_must_be_running() -> None:
    subs = _subcommands(parser())
    for name in ("profile", "config"):
        text = subs[name].format_help()
        usage_end = text.index("\n\n") + 2  # the line after the usage
        assert text[usage_end:].split("\n\n")[0].count("The job must be running") == 1
    actions = subs["profile"]._actions
    said = {s: a.help for a in actions for s in a.option_strings}  # --record-shapes/--no-...
    for flag in ("--record-shapes", "--profile-memory", "--with-stack"):
        assert str(said[flag]).startswith("with --detailed: record"), flag


@pytest.mark.parametrize(
    ("argv", "meant"),
    [
        (["shwo", "j"], "'show'"),
        (["rule", "j"], "'rules'"),
        (["export", "tensorbord", "j", "d"], "'tensorboard'"),
        (["profile", "j", "--python", "cprofil"], "'cprofile'"),
        (["xyzzy"], None),  # nothing close: no guess
    ],
)
def test_a_mistyped_subcommand_or_choice_gets_did_you_mean(
    capsys: pytest.CaptureFixture[str], argv: list[str], meant: str | None
) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and "invalid choice" in err
    if meant:
        assert f"Did you mean {meant}?" in err
    else:
        assert "Did you mean" not in err


@pytest.mark.parametrize(
    ("entry", "meant"),
    [
        ({"name": "StepOutlir"}, "'StepOutlier'"),
        ({"name": "LowGPUUtilisation"}, "'LowGPUUtilization'"),
        ({"name": "StepOutlier", "parameters": {"stdev": 3}}, "'stddev'"),
        (
            {"name": "ProfilerReport", "parameters": {"StepOutlir_stddev": 3}},
            "'StepOutlier_stddev'",
        ),
        ({"name": "Qwertyuiop"}, None),
        ({"name": "StepOutlier", "parameters": {"zzzzzz": 3}}, None),
    ],
)
def test_an_unknown_rule_or_parameter_in_rules_gets_did_you_mean(
    entry: dict[str, object], meant: str | None
) -> None:
    with pytest.raises(RuleConfigError) as error:
        build_rules([entry])
    message = str(error.value)
    assert "Unknown" in message and "\n" not in message
    if meant:
        assert f"Did you mean {meant}?" in message
    else:
        assert "Did you mean" not in message
    assert build_rules([{"name": "StepOutlier", "parameters": {"stddev": 3}}])  # the twin


# -- --help stays light -----------------------------------------------------------------

_HELPS = """
import json, sys
from stepscope.cli import main
for argv in json.loads(sys.argv[1]):
    try:
        main(argv)
    except SystemExit:
        pass
print(json.dumps([m for m in ("duckdb", "pandas", "torch") if m in sys.modules]))
"""


@pytest.mark.process
def test_every_help_imports_no_pandas_nor_duckdb() -> None:
    helps = [[], ["--help"]]
    for name, sub in _subcommands(parser()).items():
        helps.append([name, "--help"])
        helps += [[name, kind, "--help"] for kind in _subcommands(sub)]
    proc = subprocess.run(
        [sys.executable, "-c", _HELPS, json.dumps(helps)],
        capture_output=True, text=True, check=True, timeout=120,
    )  # fmt: skip
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == []
    assert proc.stdout.count("usage: stepscope") == len(helps)
