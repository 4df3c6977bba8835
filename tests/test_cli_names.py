"""Job names work wherever a job is taken (issue 32): every subcommand that takes a job
takes the name `stepscope ls` prints, looked up in the folder `ls` lists (-o, then
$STEPSCOPE_OUTPUT, then ./stepscope-runs); a path or URL still works; a name that
matches several jobs, or none, is one line (exit 2) naming the folder searched."""

from __future__ import annotations

import argparse
import json
import re
import time
from pathlib import Path

import pytest

import rules_data as rd
from stepscope.cli import main
from stepscope.cli._jobs import OUTPUT_ENV, resolve_job, side_arg
from stepscope.errors import JobNotFoundError, UsageError
from stepscope.store import open_store


def _job(root: Path, name: str, status: str = "Completed", steps: int = 30) -> Path:
    """A job of ``steps`` training steps; a Running one started now (alive: no heartbeat
    due yet)."""
    running = status == "Running"
    store = rd.new_job(root / name, status=status, start=time.time() if running else rd.T0,
                       end=None if running else rd.T0 + 60)  # fmt: skip
    rd.write_steps(store, rd.steps_frame(steps))
    return root / name


def _ls_names(capsys: pytest.CaptureFixture[str], *argv: str) -> list[str]:
    assert main(["ls", "--json", *argv]) == 0
    return [row["name"] for row in json.loads(capsys.readouterr().out)]


@pytest.fixture
def elsewhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The current folder, with no job and no stepscope-runs in it, and no $STEPSCOPE_OUTPUT."""
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    monkeypatch.delenv(OUTPUT_ENV, raising=False)
    return cwd


# -- every command that takes a job takes its name ----------------------------------------

READERS = {"show": ["show", "--json"], "rules": ["rules", "--json"]}


@pytest.mark.parametrize("command", sorted(READERS))
def test_a_reader_takes_the_name_ls_prints_and_answers_as_for_the_path(
    tmp_path: Path, elsewhere: Path, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    out = tmp_path / "out"
    path, other = _job(out, "bert-42"), _job(out, "gpt-7", steps=12)
    (name,) = [n for n in _ls_names(capsys, str(out)) if n.startswith("bert")]
    answers = []
    for argv in ([str(path)], [name, "-o", str(out)], [str(other)]):
        assert main([*READERS[command], *argv]) == 0
        answer = capsys.readouterr().out.replace(str(out), "OUT").replace("./", "")
        answers.append(re.sub(r'"updated": [0-9.]+', "", answer))  # when the rules ran
    by_path, by_name, other_job = answers
    assert by_name == by_path != other_job


def test_export_takes_a_name(
    tmp_path: Path, elsewhere: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _job(tmp_path / "out", "bert-42")
    argv = ["export", "tensorboard", "-o", str(tmp_path / "out")]
    assert main([*argv, "bert-42", str(tmp_path / "tb")]) == 0
    assert "tensorboard --logdir" in capsys.readouterr().out
    assert main([*argv, "gpt-7", str(tmp_path / "tb")]) == 2  # its twin: no job of that name
    assert "No stepscope job 'gpt-7'" in capsys.readouterr().err


def test_report_takes_a_name_with_in_as_its_folder(
    tmp_path: Path, elsewhere: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """report's -o is the file it writes; its folder of jobs is --in."""
    out = tmp_path / "out"
    _job(out, "bert-42")
    assert main(["report", "bert-42", "--in", str(out), "-o", str(tmp_path / "r.html")]) == 0
    assert capsys.readouterr().out.strip() == str(tmp_path / "r.html")
    assert (tmp_path / "r.html").stat().st_size > 0


@pytest.mark.parametrize(
    "argv",
    [
        ["profile", "NAME", "--detailed", "--steps", ":2", "--no-wait"],
        ["config", "NAME", "--interval-ms", "100", "--no-wait"],
    ],
)
def test_profile_and_config_write_their_request_into_the_named_running_job(
    tmp_path: Path, elsewhere: Path, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    out = tmp_path / "out"
    target, other = _job(out, "live-1", "Running"), _job(out, "live-2", "Running")
    assert main([a.replace("NAME", "live-1") for a in argv] + ["-o", str(out)]) == 0
    assert "requested:" in capsys.readouterr().out
    assert list((target / "control").rglob("*.json")), "the request is in the named job"
    assert not (other / "control").exists(), "and in no other"


# -- where a name is looked up ----------------------------------------------------------


def test_a_name_is_looked_up_in_the_folder_ls_lists_o_then_env_then_default(
    tmp_path: Path, elsewhere: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    default, env, given = elsewhere / "stepscope-runs", tmp_path / "env", tmp_path / "given"
    for root in (default, env, given):
        _job(root, "j")
    assert resolve_job("j", None) == "./stepscope-runs/j"
    monkeypatch.setenv(OUTPUT_ENV, str(env))
    assert resolve_job("j", None) == f"{env}/j"
    assert resolve_job("j", str(given)) == f"{given}/j"


def test_a_path_or_url_is_taken_as_it_is(tmp_path: Path, elsewhere: Path) -> None:
    path = _job(tmp_path / "out", "j")
    assert resolve_job(str(path), None) == str(path)
    # a URL is never looked up as a name (no request is made: the bucket does not exist)
    assert resolve_job("s3://no-such-bucket/runs/j", None) == "s3://no-such-bucket/runs/j"


def test_a_name_in_an_output_folder_given_as_a_url_resolves_to_its_url(
    elsewhere: Path,
) -> None:
    """The shape of `show NAME -o s3://bucket/runs`, on fsspec's memory store."""
    store = open_store("memory://s32-names/runs")
    store.sub("j").write_json("job.json", {"name": "j", "status": "Completed"})
    assert resolve_job("j", "memory://s32-names/runs") == "memory://s32-names/runs/j"


def test_the_name_in_job_json_and_a_unique_start_find_the_job(
    tmp_path: Path, elsewhere: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """ls prints job.json's name, which an imported job's folder need not have."""
    out = tmp_path / "out"
    meta = _job(out, "old-folder") / "job.json"
    meta.write_text(json.dumps({**json.loads(meta.read_text()), "name": "imported-1"}))
    _job(out, "bert-20250101-120000")
    assert sorted(_ls_names(capsys, str(out))) == ["bert-20250101-120000", "imported-1"]
    assert resolve_job("imported-1", str(out)) == f"{out}/old-folder"
    assert resolve_job("bert-2025", str(out)) == f"{out}/bert-20250101-120000"


def test_a_damaged_job_json_does_not_stop_the_lookup(tmp_path: Path, elsewhere: Path) -> None:
    out = tmp_path / "out"
    (_job(out, "broken") / "job.json").write_text("{not json")
    _job(out, "fine-1")
    assert resolve_job("fine", str(out)) == f"{out}/fine-1"
    assert resolve_job("broken", str(out)) == f"{out}/broken"  # its folder's name


# -- a name that finds several jobs, or none ----------------------------------------------


def test_a_name_several_jobs_start_with_is_ambiguous_and_names_them(
    tmp_path: Path, elsewhere: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    _job(out, "train-1")
    _job(out, "train-2")
    assert main(["show", "train", "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("stepscope: error: 'train' names 2 jobs")
    assert f"in {out}:" in err and "train-1, train-2" in err
    with pytest.raises(UsageError):
        resolve_job("train", str(out))
    assert resolve_job("train-2", str(out)) == f"{out}/train-2"  # the whole name: no doubt


@pytest.mark.parametrize("where", ["default", "env", "given"])
def test_a_missing_name_says_which_folders_were_searched(
    tmp_path: Path,
    elsewhere: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    where: str,
) -> None:
    folder = {"default": elsewhere / "stepscope-runs", "env": tmp_path / "e", "given": tmp_path}
    _job(folder[where], "present")
    if where == "env":
        monkeypatch.setenv(OUTPUT_ENV, str(folder[where]))
    given = ["-o", str(folder[where])] if where == "given" else []
    assert main(["rules", "absent", *given]) == 2
    err = capsys.readouterr().err
    why = {"default": " (the default folder)", "env": f" (from ${OUTPUT_ENV})", "given": ""}
    assert err.count("\n") == 1 and "No stepscope job 'absent'" in err
    assert f"in {folder[where]}{why[where]}, and the folder 'absent' here does not exist" in err
    assert main(["rules", "present", *given]) == 0  # its twin, in the same folder, is found


def test_a_path_that_is_not_a_job_says_so(tmp_path: Path, elsewhere: Path) -> None:
    (tmp_path / "empty").mkdir()
    with pytest.raises(JobNotFoundError, match=r"it has no job\.json"):
        resolve_job(str(tmp_path / "empty"), None)
    with pytest.raises(JobNotFoundError, match="no such folder"):
        resolve_job(str(tmp_path / "absent"), None)


# -- ls says where the folder is ----------------------------------------------------------


@pytest.mark.parametrize("where", ["default", "env", "positional", "o"])
def test_ls_says_which_folder_it_lists_and_why(
    tmp_path: Path,
    elsewhere: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    where: str,
) -> None:
    folder = elsewhere / "stepscope-runs" if where == "default" else tmp_path / "runs"
    _job(folder, "j")
    argv = {"default": [], "env": [], "positional": [str(folder)], "o": ["-o", str(folder)]}
    if where == "env":
        monkeypatch.setenv(OUTPUT_ENV, str(folder))
    assert main(["ls", *argv[where]]) == 0
    first, _, row = capsys.readouterr().out.splitlines()
    why = {"default": " (the default folder)", "env": f" (from ${OUTPUT_ENV})"}.get(where, "")
    assert first == f"Jobs in {folder}{why}" and row.startswith("j ")


def test_ls_refuses_two_different_folders(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _job(tmp_path / "a", "j")
    assert main(["ls", str(tmp_path / "a"), "-o", str(tmp_path / "b")]) == 2
    assert "two folders" in capsys.readouterr().err
    assert main(["ls", str(tmp_path / "a"), "-o", str(tmp_path / "a")]) == 0


def test_ui_serves_the_folder_ls_lists_by_default(
    tmp_path: Path,
    elsewhere: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """No folder there: refused before anything is bound, naming the folder it took."""
    monkeypatch.setenv(OUTPUT_ENV, str(tmp_path / "from-env"))
    assert main(["ui", "--port", "0"]) == 2
    assert f"no folder {str(tmp_path / 'from-env')!r}" in capsys.readouterr().err
    monkeypatch.delenv(OUTPUT_ENV)
    assert main(["ui", "--port", "0"]) == 2
    assert "no folder './stepscope-runs'" in capsys.readouterr().err


def test_a_url_holding_a_comma_that_is_a_job_is_one_job() -> None:
    """An object key may hold a comma: a URL that is itself a job is one job, not two
    runs. Twin: two URLs separated by a comma, which together name no job, are two."""
    runs = open_store("memory://s-commas/runs")
    for name in ("a,b", "a", "b"):
        runs.sub(name).write_json("job.json", {"name": name, "status": "Completed"})
    args = argparse.Namespace(jobs_in=None, jobs_in_flag="-o")
    whole = "memory://s-commas/runs/a,b"
    assert side_arg(whole, "the baseline", args) == [whole]
    two = "memory://s-commas/runs/a,memory://s-commas/runs/b"
    assert side_arg(two, "the baseline", args) == two.split(",")
