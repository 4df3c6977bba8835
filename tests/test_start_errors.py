"""Every failure to start is one line and exit 2 (issue 31): an OS error creating the job
folder or its first file, a TOML file the parser rejects or that is nested too deep, and
values quoted in errors cut to a readable length. Also what the readers say of a folder
of job records without job.json, and that no writer re-creates a deleted job folder."""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from stepscope.cli._main import main
from stepscope.store import FolderGoneError, open_store

MB1 = "k" * 1_000_000  # big enough to be cut in the message, small to parse


def run(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    return code, out.getvalue(), err.getvalue()


def start(tmp: Path, output: str, *opts: str) -> tuple[int, str]:
    """``stepscope run`` in-process (it fails before it starts anything)."""
    argv = ["run", "-o", output, "--job", "j", "--no-rules", *opts, "--", "true"]
    with contextlib.chdir(tmp):
        code, _, err = run(argv)
    return code, err


def one_line(code: int, err: str, *words: str) -> None:
    assert code == 2, err
    assert "Traceback" not in err
    assert err.endswith("\n") and err.count("\n") == 1, err
    assert err.startswith("stepscope: error: ") and len(err) < 600, err[:2000]
    for word in words:
        assert word in err, err


def _dangling(tmp: Path) -> str:
    (tmp / "out").symlink_to(tmp / "nowhere" / "x")
    return "out"


def _loop(tmp: Path) -> str:
    (tmp / "loop").symlink_to(tmp / "loop")
    return "loop"


def _file_in_path(tmp: Path) -> str:
    (tmp / "a-file").write_text("")
    return "a-file/out"


def _long_name(tmp: Path) -> str:
    return "n" * 300


def _not_writable(tmp: Path) -> str:
    if os.geteuid() == 0:
        pytest.skip("root writes through any permission: the bind-mount tests cover it")
    (tmp / "locked").mkdir(mode=0o500)
    return "locked/out"


FOLDERS: dict[str, tuple[Callable[[Path], str], str]] = {
    "dangling symlink": (_dangling, "dangling link"),
    "symlink loop": (_loop, "symbolic link on the path loops"),
    "/proc": (lambda _: "/proc/x", "missing"),
    "a file in the path": (_file_in_path, "is a file, not a folder"),
    "name too long": (_long_name, "the path is too long"),
    "permission denied": (_not_writable, "not writable"),
}


@pytest.mark.parametrize("case", list(FOLDERS))
def test_a_job_folder_that_cannot_be_created_is_one_line(tmp_path: Path, case: str) -> None:
    make, says = FOLDERS[case]
    code, err = start(tmp_path, make(tmp_path))
    one_line(code, err, says, "-o")
    assert not list(tmp_path.rglob("job.json"))


TOML = {
    "arrays 1000 deep": ("a = " + "[" * 1000 + "]" * 1000, "nested too deep"),
    "tables 1000 deep": ("a = " + "{b = " * 1000 + "1" + "}" * 1000, "nested too deep"),
    "syntax": ("x = \n", "Invalid TOML at line 1"),
    "not UTF-8": ("\udcff", "Cannot read configuration file"),
    "1 MB key": (f"[job]\n{MB1} = 1\n", "Unknown key 'kkk"),
    "1 MB job name": (f'[job]\nname = "{MB1}"\n', "(1,000,002 characters)"),
}


@pytest.mark.parametrize("case", list(TOML))
def test_a_config_the_parser_rejects_is_one_short_line(tmp_path: Path, case: str) -> None:
    text, says = TOML[case]
    (tmp_path / "c.toml").write_bytes(text.encode(errors="surrogateescape"))
    code, err = start(tmp_path, "out", "--config", "c.toml")
    one_line(code, err, says, "c.toml")


def test_a_long_job_name_on_the_command_line_is_cut_in_its_error(tmp_path: Path) -> None:
    code, err = start(tmp_path, "out", "--job", "j" * 100_000)
    one_line(code, err, "--job 'jjj", "(100,002 characters)", "job name")


@pytest.mark.process
@pytest.mark.parametrize(("fs", "says"), [("ro", "read-only"), ("full", "no space left")])
def test_a_read_only_or_full_file_system_is_one_line(tmp_path: Path, fs: str, says: str) -> None:
    where = tmp_path / fs
    where.mkdir()
    opts = "ro,size=64k" if fs == "ro" else "size=64k"
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", opts, "tmpfs", str(where)], capture_output=True
    )
    if done.returncode != 0:
        pytest.skip(f"mounting a tmpfs is not permitted here: {done.stderr.decode().strip()}")
    try:
        if fs == "full":
            with contextlib.suppress(OSError), open(where / "fill", "wb") as f:
                while True:
                    f.write(b"\0" * 4096)
        code, err = start(tmp_path, fs)
    finally:
        subprocess.run(["umount", "-l", str(where)], capture_output=True)
    one_line(code, err, "-o", says if fs == "full" else "not writable")


def test_ls_and_show_say_what_a_folder_of_records_without_job_json_is(tmp_path: Path) -> None:
    (tmp_path / "lost" / "steps" / "rank-0").mkdir(parents=True)
    (tmp_path / "lost" / "rules").mkdir()
    (tmp_path / "not-a-job").mkdir()  # no job records either: not listed
    code, out, err = run(["ls", str(tmp_path)])
    assert code == 0, err
    (row,) = [line for line in out.splitlines() if line.startswith("lost")]
    assert "Damaged" in row and "no job.json, but job records (steps/, rules/)" in row
    assert "not-a-job" not in out
    code, _, err = run(["show", str(tmp_path / "lost")])
    one_line(code, err, "damaged", "no job.json", "remove the folder")


def test_the_healthy_twin_a_job_with_job_json_is_listed_as_it_is(tmp_path: Path) -> None:
    store = open_store(tmp_path / "ok")
    from stepscope.jobfolder import JobMeta, write_meta

    write_meta(store, JobMeta.new("ok", ["true"], {}, ["n"]))
    (tmp_path / "ok" / "steps").mkdir()
    code, out, _ = run(["ls", str(tmp_path)])
    assert code == 0 and "Damaged" not in out and out.count("\nok ") == 1


def test_no_writer_re_creates_a_deleted_job_folder(tmp_path: Path) -> None:
    store = open_store(tmp_path).sub("j")
    store.write_json("job.json", {})  # the first write makes the folder
    writer = open_store(tmp_path / "j").keep_root()  # the agent's, the sampler's
    shutil.rmtree(tmp_path / "j")
    for s in (store, writer):
        for key in ("job.json", "steps/rank-0/x.json", "faults/f.json"):
            with pytest.raises(FolderGoneError, match="the job folder was deleted"):
                s.write_json(key, {})
    assert not (tmp_path / "j").exists()
    late = open_store(tmp_path / "j").keep_root()  # a helper restarted after the deletion
    with pytest.raises(FolderGoneError):
        late.write_json("faults/f.json", {})
    assert not (tmp_path / "j").exists()


def test_the_twin_a_new_store_still_makes_its_folders(tmp_path: Path) -> None:
    store = open_store(tmp_path / "a" / "b").sub("j")
    store.write_json("steps/rank-0/x.json", {"x": 1})
    assert (tmp_path / "a" / "b" / "j" / "steps" / "rank-0" / "x.json").exists()
