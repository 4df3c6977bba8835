"""Messages right to the letter (issue 30, item 5): every ``stepscope ...`` command a
rule's recommendation or message names runs as written against a finished job, and
no message or recommendation ends in a truncated clause ("; set num_workers")."""

from __future__ import annotations

import re
import shlex
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

import stepscope
from stepscope.cli import main
from stepscope.rules import RuleResult, evaluate_rules
from stepscope.rules._registry import BUILTIN, PROFILER_RULES

DATA = Path(__file__).parent / "data"
# Real recorded jobs (tests/data/README.md): CPU and GPU, healthy and with problems.
GOLDEN = ("starving", "healthy", *(f"{d}/{j}" for d in ("h200", "h200-sampled")
          for j in ("healthy", "leak", "loader", "stall")))  # fmt: skip
# A command in running text (a subcommand: "stepscope recorded them" is prose), up to
# the bracket, backtick, comma or semicolon that ends it.
SUBCOMMANDS = "run|ls|show|rules|report|demo|export|profile|config|ui|import"
COMMAND = re.compile(rf"\bstepscope (?:{SUBCOMMANDS})\b(?: [^)`;,\n]*)?")
# docs/profiling.md: a request to a job that has ended is refused with exit code 2.
REFUSED = "only a running job takes requests"


def rule_results() -> Iterator[tuple[str, RuleResult]]:
    for name in GOLDEN:
        job = stepscope.open(str(DATA / name))
        # every built-in rule, as ProfilerReport runs them (more than MAX_RULES entries)
        for res in evaluate_rules(job, [BUILTIN[r]() for r in PROFILER_RULES]):
            yield name, res


RESULTS = list(rule_results())


def texts() -> list[tuple[str, str]]:
    """Every built-in rule's recommendation and description, and what the rules said
    of the golden jobs: messages, reasons, findings and their recommendations."""
    out = [(f"{n}.recommendation", r.recommendation) for n, r in BUILTIN.items()]
    out += [(f"{n}.description", r.description) for n, r in BUILTIN.items()]
    for job, res in RESULTS:
        where = f"{res.rule} on {job}"
        out += [(f"{where}: message", res.message), (f"{where}: reason", res.reason or "")]
        out += [(f"{where}: finding", f.message) for f in res.findings]
        out += [(f"{where}: finding fix", f.recommendation) for f in res.findings]
    return [(k, v) for k, v in out if v]


def commands(text: str) -> list[str]:
    return [m.group(0).strip() for m in COMMAND.finditer(text)]


def run(command: str, job: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    """``command`` (JOB: the job's folder) through the CLI's entry point: exit code, stderr."""
    args = [str(job) if a == "JOB" else a for a in shlex.split(command)[1:]]
    try:
        code = main(args)
    except SystemExit as e:  # argparse's refusals
        code = int(e.code or 0)
    return code, capsys.readouterr().err


def test_every_named_command_runs_as_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    named = {c: where for where, text in texts() for c in commands(text)}
    assert "stepscope profile JOB --python cprofile" in named  # PythonOverhead's fix
    job = tmp_path / "job"
    shutil.copytree(DATA / "starving", job)  # a finished job, copied: never written to
    assert main(["show", str(job)]) == 0  # show's diagnosis names where the evidence is
    shown = commands(capsys.readouterr().out)
    assert f"stepscope rules {job}" in shown
    named |= {c: "show" for c in shown}
    for command, where in sorted(named.items()):
        shutil.rmtree(job)
        shutil.copytree(DATA / "starving", job)
        code, err = run(command, job, capsys)
        assert code == 0 or (code == 2 and REFUSED in err), (where, command, code, err)


def test_the_check_catches_a_wrong_flag(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The fix PythonOverhead named before issue 30 exits 2 with a usage error, which
    the test above tells from the refusal of a finished job."""
    shutil.copytree(DATA / "starving", tmp_path / "job")
    (old,) = commands("Profile a window of steps (stepscope profile --kind python) and move")
    code, err = run(old, tmp_path / "job", capsys)
    assert code == 2 and REFUSED not in err and "--kind" in err


# A sentence cut short: ends in punctuation that announces more, in a word that needs
# an object, or in "set X"/"add X" with X a bare name (what to set it to is missing).
DANGLING_END = re.compile(r"[;,:(\-]\s*$|\b(?:the|a|an|to|of|with|and|or|for|by|than)\W*$")
BARE_VERB = re.compile(r"(?:^|[;:]\s*)(?:set|add|use|raise|lower|increase|reduce)\s+[\w.]+\W*$")


def dangling(text: str) -> bool:
    text = text.strip()
    return bool(DANGLING_END.search(text) or BARE_VERB.search(text))


def test_the_dangling_check_catches_the_old_message() -> None:
    old = "rank 0 waited for data 89% of its step time (> 20%, 8.9 s in steps 5-319) with "
    old += "num_workers=0: every batch is made on the training thread; set num_workers"
    assert dangling(old) and dangling("the cores are busy;") and dangling("look at the")
    assert not dangling(old.replace("; set num_workers", "; set DataLoader(num_workers=N)"))


def test_no_message_or_recommendation_is_cut_short() -> None:
    said = texts()
    assert any(res.findings for _, res in RESULTS)  # the golden jobs make the rules speak
    cut = [(where, text) for where, text in said if dangling(text)]
    assert not cut
