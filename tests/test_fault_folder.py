"""The fault matrix, job folder rows (issue 31): the job folder deleted or made read-only
while the training runs, and hostile output paths. The training's result must be a bare
run's, ``stepscope run`` must return promptly after it with its exit code, and stderr
must say once what could not be recorded (the job folder cannot take a fault record)."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import BIN, env_for_tests
from stepscope.process import Word, give_word, word_pipe
from test_fault_matrix import ARGS, MLP, finish, start, state_hash, wait_for

pytestmark = pytest.mark.process
# The launcher's return after the training's: measured 1.5-5 s on 2 loaded cores (the
# helpers' last flush and the interpreter's exit); 150 s before issue 31.
RETURN_BOUND_S = 15.0


@pytest.fixture(scope="module")
def bare(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The hash of the state a bare run (no stepscope) saves."""
    save = tmp_path_factory.mktemp("bare") / "bare.pt"
    cmd = [sys.executable, MLP, *ARGS, "--save", str(save)]
    subprocess.run(cmd, check=True, capture_output=True, timeout=240, env=env_for_tests())
    return state_hash(save)


@contextlib.contextmanager
def read_only(folder: Path) -> Iterator[None]:
    """``folder`` made read-only by a read-only bind mount of itself (root only:
    chmod does not stop root); skips the test where mounts are not permitted."""
    done = subprocess.run(["mount", "--bind", str(folder), str(folder)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"a bind mount is not permitted here: {done.stderr.decode().strip()}")
    try:
        cmd = ["mount", "-o", "remount,ro,bind", str(folder)]
        subprocess.run(cmd, check=True, capture_output=True)
        yield
    finally:
        subprocess.run(["umount", "-l", str(folder)], capture_output=True)


def _delete(job: Path) -> contextlib.AbstractContextManager[None]:
    # A writer may add a file while rmtree empties the folder (not a re-creation: the
    # folder was not gone yet); the deletion is done again until it holds.
    for _ in range(5):
        shutil.rmtree(job, ignore_errors=True)
        if not job.exists():
            break
    assert not job.exists(), f"could not delete {job}"
    return contextlib.nullcontext()


@pytest.mark.parametrize(
    ("fault", "told"), [("deleted", "was deleted"), ("read-only", "is read-only")]
)
def test_a_job_folder_lost_mid_run_is_told_once_and_the_launcher_returns_promptly(
    tmp_path: Path, bare: str, fault: str, told: str
) -> None:
    job = tmp_path / "j"
    proc = start(str(tmp_path), tmp_path, live=True)
    with contextlib.ExitStack() as stack:
        try:
            wait_for(lambda: list((job / "rules").glob("*.json")), "the first verdicts")
            stack.enter_context(read_only(job) if fault == "read-only" else _delete(job))
            finish(proc)
            returned = time.time()
        finally:
            finish(proc)
        recreated = job.exists()
    stderr = (tmp_path / "stderr").read_text()
    assert proc.returncode == 0, stderr
    assert state_hash(tmp_path / "traced.pt") == bare, "training changed under stepscope"
    trained = os.path.getmtime(tmp_path / "traced.pt")  # saved as the training ends
    print(f"{fault}: returned {returned - trained:.1f} s after the training saved its state")
    assert returned - trained < RETURN_BOUND_S, stderr
    lines = stderr.splitlines()
    said = [line for line in lines if f"the job folder {job} {told}" in line]
    assert len(said) == 1, stderr
    assert "nothing more of this job can be recorded" in said[0]
    assert "recorded in the job's faults/" not in stderr and "Traceback" not in stderr
    assert "Completed (exit 0)" in lines[-1] and f"not recorded: the job folder {told}" in lines[-1]
    if fault == "deleted":
        assert not recreated, "a writer re-created the deleted job folder"


def _run_to(out: Path, job: str = "j") -> subprocess.CompletedProcess[str]:
    cmd = [str(BIN / "stepscope"), "run", "-o", str(out), "--job", job, "--no-rules"]
    cmd += ["--", sys.executable, "-c", "print('trained')"]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=240, env=env_for_tests())


@pytest.mark.parametrize(
    "name",
    ["with spaces", "ünïcödé-日本", "new\nline", "n" * 200],
    ids=["spaces", "unicode", "newline", "long"],
)
def test_hostile_output_paths_work_end_to_end(tmp_path: Path, name: str) -> None:
    out = tmp_path / name
    done = _run_to(out)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    code = subprocess.run(
        [str(BIN / "stepscope"), "show", str(out / "j")], capture_output=True, text=True,
        env=env_for_tests(), timeout=120,
    )  # fmt: skip
    assert code.returncode == 0, code.stderr
    assert "Completed" in code.stdout


def test_the_launchers_word_is_heard_once_given_and_kept() -> None:
    read_end, write_end = word_pipe()
    word = Word(read_end)
    assert word.heard() is False  # not yet: the job goes on
    give_word(write_end)
    assert word.heard() is True and word.heard() is True and word.fd is None


def test_the_twin_a_launcher_gone_without_its_word_is_not_the_word() -> None:
    read_end, write_end = word_pipe()
    word = Word(read_end)
    os.close(write_end)  # the launcher died: the runner watches job.json instead
    assert word.heard() is None and word.fd is None
