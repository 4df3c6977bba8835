"""The CLI as a user meets it: what `ls` expects, `run`'s checks before a job exists,
closed pipes, what `show` counts, and what `ls`/`show` import (issues 20 and 21)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import rules_data as rd
from stepscope.cli import main


def _job(root: Path, name: str = "job-a") -> Path:
    """A finished job: 30 training and 5 evaluation steps of rank 0, 20 of rank 1."""
    store = rd.new_job(root / name, end=rd.T0 + 60)
    rd.write_process_start(store, time=rd.T0 + 0.2)
    rd.write_steps(store, rd.steps_frame(30))
    rd.write_steps(store, rd.steps_frame(5, start=rd.T0 + 20, phase="eval"))
    rd.write_steps(store, rd.steps_frame(20, rank=1))
    rd.write_system(store, rd.system_frame(40))
    return root / name


# -- ls --------------------------------------------------------------------------------


def test_ls_counts_the_training_steps_of_rank_0_as_show_does(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    job = _job(tmp_path)
    assert main(["ls", "--json", str(tmp_path)]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert main(["show", "--json", str(job)]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert row["steps"] == summary["steps"]["count"] == 30
    assert summary["steps"]["by_rank"] == {"0": 30, "1": 20}
    assert set(summary["steps"]["phases"]) == {"train", "eval"}


def test_ls_of_a_job_folder_says_it_takes_the_folder_of_jobs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    job = _job(tmp_path)
    assert main(["ls", str(job)]) == 2
    err = capsys.readouterr().err
    assert "is a job folder, not an output folder" in err and f"stepscope show {job}" in err


@pytest.mark.parametrize("what", ["missing", "file"])
def test_ls_of_a_missing_folder_or_a_file_is_a_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], what: str
) -> None:
    path = tmp_path / what
    if what == "file":
        path.write_text("x")
    assert main(["ls", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("stepscope: error: no folder") and "stepscope run -o FOLDER" in err


def test_ls_of_a_folder_without_jobs_says_what_it_expected(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "not-a-job").mkdir()
    assert main(["ls", str(tmp_path)]) == 0
    out, err = capsys.readouterr()
    where, head = out.splitlines()  # where the folder is, then the table's header only
    assert where == f"Jobs in {tmp_path}" and head.startswith("JOB")
    assert "no jobs in" in err and "one folder per job" in err


_DAMAGE = {
    "not-json": ('{"name": ', "not valid JSON"),
    "not-an-object": ("[1, 2]", "not a JSON object"),
    "wrong-type": (None, "status is 7, expected a string"),
    "a-folder": (None, "is a folder, not a file"),
}


@pytest.mark.parametrize("damage", sorted(_DAMAGE))
@pytest.mark.parametrize("as_json", [False, True])
def test_ls_lists_every_readable_job_and_names_the_damaged_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], damage: str, as_json: bool
) -> None:
    """One bad job.json stopped the whole listing with one error line."""
    _job(tmp_path, "job-a")
    _job(tmp_path, "job-c")
    meta = _job(tmp_path, "job-b") / "job.json"
    body, why = _DAMAGE[damage]
    if damage == "wrong-type":
        body = json.dumps({**json.loads(meta.read_text()), "status": 7})
    if damage == "a-folder":
        meta.unlink()
        meta.mkdir()
    else:
        meta.write_text(body or "")
    assert main(["ls", *(["--json"] if as_json else []), str(tmp_path)]) == 0
    out = capsys.readouterr().out
    if as_json:
        rows = {r["name"]: r for r in json.loads(out)}
        assert [rows[n]["status"] for n in ("job-a", "job-c")] == ["Completed"] * 2
        assert rows["job-a"]["steps"] == 30 and rows["job-a"]["problem"] is None
        assert rows["job-b"]["status"] == "Damaged" and why in rows["job-b"]["problem"]
    else:
        lines = {line.split()[0]: line for line in out.splitlines()[2:]}
        assert set(lines) == {"job-a", "job-b", "job-c"}
        assert lines["job-a"].split()[1] == "Completed" and lines["job-a"].endswith(" 30")
        assert lines["job-b"].split()[1] == "Damaged" and why in lines["job-b"]


# -- show: initialization never longer than the job ----------------------------------


@pytest.mark.parametrize(
    ("process_start", "init"),
    [
        (rd.T0 - 100.0, 5.0),  # stepscope.init() 100 s into the process: from the job's start
        (rd.T0 + 0.2, 4.8),  # stepscope run: the process starts just after the job
    ],
)
def test_show_initialization_is_within_the_job(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], process_start: float, init: float
) -> None:
    store = rd.new_job(tmp_path / "job", end=rd.T0 + 20)
    rd.write_process_start(store, time=process_start)
    rd.write_steps(store, rd.steps_frame(50, start=rd.T0 + 5))  # 10 s of steps
    assert main(["show", "--json", str(tmp_path / "job")]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["init_seconds"] == pytest.approx(init, abs=1e-3)
    assert summary["init_seconds"] <= summary["duration_seconds"] == 20.0


@pytest.mark.parametrize("kind", ["float32", "float64", "int32", "int64", "bool", "null"])
def test_show_reads_numbers_from_arrow_buffers_as_arrow_does(kind: str) -> None:
    """`show` reads Arrow buffers itself (pyarrow's to_numpy imports pandas): nulls,
    slices (an offset into the buffers) and chunks must come out as pyarrow gives them."""
    import numpy as np
    import pyarrow as pa

    from stepscope.analysis._arrow import Columns

    values = [1.5, None, 3.0, 4.0, None, 6.0, 7.0, 8.0, 9.0, 10.0] * 3
    if kind == "null":
        values = [None] * 30
    elif kind.startswith("int") or kind == "bool":
        values = [None if v is None else int(v) for v in values]
        values = [v % 2 == 1 if kind == "bool" and v is not None else v for v in values]
    array = pa.array(values, type=getattr(pa, "bool_" if kind == "bool" else kind)())
    chunked = pa.chunked_array([array.slice(3, 11), array.slice(17, 9)])
    got = Columns(pa.table({"x": chunked})).floats("x")
    want = np.array([np.nan if v is None else float(v) for v in chunked.to_pylist()])
    np.testing.assert_array_equal(got, want)
    assert Columns(pa.table({"x": chunked})).floats("absent").shape == (20,)


@pytest.mark.parametrize("damage", [b"", b"PAR1 not parquet", "truncated"])
def test_show_and_ls_leave_out_a_segment_they_cannot_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], damage: bytes | str
) -> None:
    """`show` and `ls` read segments without DuckDB: a damaged one is skipped, not fatal."""
    job = _job(tmp_path)
    good = sorted((job / "steps/rank-0").glob("part-*.parquet"))[0]
    bad = good.with_name("part-9999999999999-1-00000.parquet")
    bad.write_bytes(good.read_bytes()[:100] if damage == "truncated" else bytes(damage))
    assert main(["show", "--json", str(job)]) == 0
    assert json.loads(capsys.readouterr().out)["steps"]["count"] == 30
    assert main(["ls", "--json", str(tmp_path)]) == 0
    assert json.loads(capsys.readouterr().out)[0]["steps"] == 30


# -- report ----------------------------------------------------------------------------


def test_report_prints_its_path_once(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    job = _job(tmp_path)
    assert main(["report", str(job)]) == 0
    out, err = capsys.readouterr()
    assert out.splitlines() == [str(job / "report.html")] and str(job) not in err
    assert (job / "report.html").is_file()


# -- run: refused before the job exists ------------------------------------------------


def _program(tmp_path: Path, kind: str) -> str:
    path = tmp_path / f"prog-{kind}"
    if kind == "folder":
        path.mkdir()
    elif kind == "missing":
        return str(path)
    else:
        body = {"no-x": b"print(1)\n", "bad-interpreter": b"#!/no/such/python\nprint(1)\n"}
        path.write_bytes(body.get(kind, b"\x00\x01 not a program"))
        path.chmod(0o644 if kind == "no-x" else 0o755)
    return str(path)


@pytest.mark.parametrize(
    ("kind", "said"),
    [
        ("missing", "command not found"),
        ("folder", "is a folder, not a command"),
        ("no-x", "is not executable"),
        ("bad-interpreter", "its #! line names '/no/such/python'"),
        ("not-a-program", "neither a program nor a script"),
    ],
)
def test_run_refuses_a_command_that_cannot_start_before_any_job_exists(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], kind: str, said: str
) -> None:
    out = tmp_path / "runs"
    assert main(["run", "-o", str(out), "--", _program(tmp_path, kind)]) == 2
    err = capsys.readouterr().err
    assert said in err and err.count("\n") == 1
    assert not out.exists()


def test_run_starts_a_command_that_can(tmp_path: Path) -> None:
    """The silent twin of the checks: a real program and a #! script pass them."""
    from stepscope.cli._preflight import check_command

    script = Path(_program(tmp_path, "no-x"))
    script.write_text(f"#!{sys.executable}\nprint(1)\n")
    script.chmod(0o755)
    assert check_command(str(script)) == str(script)
    assert check_command("true").endswith("/true")


@pytest.mark.parametrize("output", ["{file}", "{file}/sub"])
def test_run_refuses_an_output_that_is_a_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], output: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # a short relative path: a long one is cut in the message
    file = Path("hostname")
    file.write_text("x")
    out = output.format(file=file)
    assert main(["run", "-o", out, "--job", "j", "--", "true"]) == 2
    err = capsys.readouterr().err
    # The folder as given, then the file in the way (resolved, so cut where the path is long).
    assert f"into '{out}'" in err and "is a file, not a folder" in err and "-o" in err
    assert file.read_text() == "x"


def test_run_names_the_interval_flag_in_its_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "runs"
    assert main(["run", "-o", str(out), "--interval-ms", "123", "--", "true"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("stepscope: error: --interval-ms 123: ") and "100, 200, 500" in err
    assert "interval_ms" not in err and not out.exists()


@pytest.mark.parametrize(
    ("table", "said"),
    [
        ("detailed_profiling_config", "A planned detailed window of 1,000 steps"),
        ("python_profiling_config", "A planned python (cprofile) window of 100,001 steps"),
        ("dataloader_profiling_config", "A planned dataloader window of 4e+03 s"),
    ],
)
def test_run_refuses_a_planned_window_over_the_live_limits(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    table: str,
    said: str,
) -> None:
    """The configuration's windows are held to the limits of a live request."""
    monkeypatch.chdir(tmp_path)
    span = {
        "detailed_profiling_config": "start_step = 5\nnum_steps = 1000",
        "python_profiling_config": "start_step = 5\nnum_steps = 100001",
        "dataloader_profiling_config": "start_unix_time = 1800000000\nduration = 4000",
    }[table]
    (tmp_path / "c.toml").write_text(f"[profiler.framework_profile_params.{table}]\n{span}\n")
    out = tmp_path / "runs"
    assert main(["run", "-o", str(out), "--config", "c.toml", "--", "true"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("stepscope: error: ") and said in err and err.count("\n") == 1
    assert "over the limit of" in err and "plan a shorter window, or several" in err
    assert not out.exists()


def test_a_planned_window_at_the_limits_is_accepted() -> None:
    """The silent twin: the longest window of each kind passes, as a live one would."""
    from stepscope.config import LIVE_WINDOW_LIMITS, FrameworkProfile, ProfilingCostWarning

    with pytest.warns(ProfilingCostWarning, match="costly"):  # still said, not refused
        profile = FrameworkProfile.from_dict(
            {
                "detailed_profiling_config": {"start_step": 5, "num_steps": 200},
                "python_profiling_config": {"start_step": 5, "num_steps": 100_000},
                "dataloader_profiling_config": {"start_unix_time": 1.8e9, "duration": 3600},
            }
        )
    sizes = [w.num_steps or w.duration for w in profile.windows()]
    assert sizes == [200, 3600, 100_000]
    assert LIVE_WINDOW_LIMITS["detailed"].steps == 200


@pytest.mark.process
@pytest.mark.parametrize(
    "rules",
    [
        "[[rules]]\nparameters = {}\n",  # no name
        '[[rules]]\nname = "Mine"\nsource = "boom.py"\nrule_to_invoke = "Mine"\n',  # raises
        '[[rules]]\nname = "Mine"\nsource = "syntax.py"\nrule_to_invoke = "Mine"\n',
    ],
)
def test_run_refuses_rules_that_cannot_be_built(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], rules: str
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "boom.py").write_text("raise RuntimeError('boom at import')\n")
    (tmp_path / "syntax.py").write_text("def (:\n")
    (tmp_path / "c.toml").write_text(rules)
    out = tmp_path / "runs"
    assert main(["run", "-o", str(out), "--config", "c.toml", "--", "true"]) == 2
    err = capsys.readouterr().err
    assert "No job was started" in err and "Traceback" not in err and err.count("\n") == 1
    assert not out.exists()


# -- every command on a closed pipe ----------------------------------------------------


@pytest.mark.process
@pytest.mark.parametrize(
    "argv",
    [
        ["ls", "{out}"],
        ["ls", "--json", "{out}"],
        ["show", "{job}"],
        ["show", "--json", "{job}"],
        ["rules", "{job}"],
        ["rules", "--json", "{job}"],
        ["report", "{job}"],
        ["--help"],
        ["--version"],
        ["ls", "--help"],
    ],
)
def test_every_command_ends_quietly_on_a_closed_pipe(tmp_path: Path, argv: list[str]) -> None:
    job = _job(tmp_path / "out")
    args = [a.format(out=tmp_path / "out", job=job) for a in argv]
    read, write = os.pipe()
    os.close(read)  # the reader (`| head -1`) is gone before the first line is written
    proc = subprocess.run(
        [sys.executable, "-m", "stepscope.cli", *args],
        stdout=write,
        stderr=subprocess.PIPE,
        text=True,
        timeout=120,
        check=False,
    )
    os.close(write)
    assert proc.returncode in (0, 141) and proc.stderr == ""


# -- what ls and show import -----------------------------------------------------------

_IMPORTED = """
import json, sys
from stepscope.cli import main
code = main(sys.argv[1:])
heavy = ("duckdb", "pandas", "pyarrow", "numpy", "starlette", "torch")
print(json.dumps([code, [m for m in heavy if m in sys.modules]]), file=sys.stderr)
"""


def _imported(*argv: str) -> list[str]:
    proc = subprocess.run(
        [sys.executable, "-c", _IMPORTED, *argv], capture_output=True, text=True, check=True
    )
    code, modules = json.loads(proc.stderr.strip().splitlines()[-1])
    assert code == 0, proc.stderr
    return list(modules)


@pytest.mark.process
def test_ls_and_show_read_without_duckdb_or_pandas(tmp_path: Path) -> None:
    """Importing them was most of the time `ls` and `show` took (BENCHMARKS.md)."""
    job = _job(tmp_path / "out")
    (tmp_path / "empty").mkdir()
    assert _imported("ls", str(tmp_path / "out")) == ["pyarrow", "numpy"]  # the step counts
    assert _imported("show", str(job)) == ["pyarrow", "numpy"]
    assert _imported("ls", str(tmp_path / "empty")) == []  # no segment read, no pyarrow
    version = subprocess.run(
        [sys.executable, "-c", "import sys; import stepscope.cli; "
         "print(sorted(m for m in ('duckdb', 'pandas', 'pyarrow') if m in sys.modules))"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert version.stdout.strip() == "[]"


# -- the documentation -----------------------------------------------------------------

REPO = Path(__file__).resolve().parent.parent
DOCS = [REPO / "README.md", REPO / "DEVELOPERS.md", *sorted((REPO / "docs").glob("*.md"))]


def _repo_files() -> set[str]:
    skip = {".git", ".venv", "__pycache__", ".mypy_cache", ".pytest_cache", ".ruff_cache"}
    found = set()
    for root, dirs, files in os.walk(REPO):
        dirs[:] = [d for d in dirs if d not in skip]
        found.update(os.path.relpath(os.path.join(root, f), REPO) for f in files + dirs)
    return found


def test_the_docs_point_only_at_files_in_the_repository() -> None:
    import re

    files = _repo_files()
    link = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")
    path = re.compile(
        r"(?<![\w./-])((?:\.\./)?(?:docs|benchmarks|scripts|examples|tests|src|\.ci)/[\w./-]*\w)"
    )
    source = re.compile(r"`([\w-]+(?:/[\w.-]+)+\.(?:py|md|toml))`")  # `read/_job.py`
    missing = []
    for doc in DOCS:
        text = doc.read_text()
        here = os.path.relpath(doc.parent, REPO)
        for m in link.finditer(text):
            target = m.group(1)
            local = "://" not in target and not target.startswith("mailto:")
            if local and os.path.normpath(os.path.join(here, target)) not in files:
                missing.append((doc.name, target))
        for m in path.finditer(text):
            target = os.path.normpath(os.path.join(here, m.group(1)))
            if target not in files and os.path.normpath(m.group(1)) not in files:
                missing.append((doc.name, m.group(1)))
        for m in source.finditer(text):  # a module named from its package: anywhere in src
            if not any(f.endswith("/" + m.group(1)) or f == m.group(1) for f in files):
                missing.append((doc.name, m.group(1)))
        missing += [(doc.name, p) for p in re.findall(r"/work/[\w./-]+", text)]
    assert not missing


def test_the_quick_start_installs_every_extra_the_readme_uses() -> None:
    import re

    readme = (REPO / "README.md").read_text()
    install = re.search(r"pip install [^\n]*-e '\.\[([\w,]+)\]'", readme)
    assert install is not None
    extras = set(install.group(1).split(","))
    needs = {
        "stepscope export tensorboard": "tensorboard",
        "stepscope ui": "dashboard",
        "--python pyinstrument": "profiling",
        "stepscope demo": "torch",
        "s3://": "s3",
    }
    for line in readme.splitlines():
        for used, extra in needs.items():
            if used in line and line.lstrip().startswith("stepscope"):
                assert extra in extras or f"[{extra}]" in line, (line, extra)


# -- rules --save -----------------------------------------------------------------------


def test_rules_save_rewrites_the_verdicts_of_a_copied_golden_job(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``rules --save`` records what ``rules`` prints: every rule's rules/<Rule>.json,
    a stale verdict replaced; without --save nothing is written."""
    import shutil

    job = tmp_path / "starving"
    shutil.copytree(Path(__file__).parent / "data" / "starving", job)
    stale = job / "rules" / "StepOutlier.json"
    body = json.loads(stale.read_text())
    stale.write_text(json.dumps({**body, "status": "Error", "message": "stale"}))
    assert main(["rules", str(job), "--json"]) == 0
    printed = {r["rule"]: r for r in json.loads(capsys.readouterr().out)}
    assert json.loads(stale.read_text())["message"] == "stale"  # nothing written
    assert sorted(p.stem for p in (job / "rules").glob("*.json")) == [
        "DataLoading",
        "StepOutlier",
    ]
    assert main(["rules", str(job), "--save"]) == 0
    assert f"saved {len(printed)} verdict(s)" in capsys.readouterr().out
    written = {p.stem: json.loads(p.read_text()) for p in (job / "rules").glob("*.json")}
    assert set(written) == set(printed) == {"DataLoading", "StepOutlier"}  # its rule set
    assert {k: v["status"] for k, v in written.items()} == {
        k: v["status"] for k, v in printed.items()
    }
    assert written["StepOutlier"]["message"] != "stale"
    assert written["DataLoading"]["status"] == "IssuesFound"


def test_rules_save_refuses_a_running_job_and_says_when_to(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import time

    store = rd.new_job(tmp_path / "live", status="Running")
    store.write_json(f"heartbeat/{rd.NODE}.json", {"time": time.time(), "pid": 1, "interval_s": 2})
    rd.write_steps(store, rd.steps_frame(30))
    assert main(["rules", str(tmp_path / "live"), "--save"]) == 2
    err = capsys.readouterr().err
    assert "is running" in err and "after the job has ended" in err
    assert not list((tmp_path / "live").glob("rules/*.json"))
