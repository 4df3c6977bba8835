"""Docs that stay true: every command and snippet of README.md and docs/ is run.

The blocks are read from the Markdown (tests/doc_blocks.py says how a block is
marked). Each runs in a sandbox folder of its own holding what the docs' examples
name: ``train.py`` (tests/scripts/doc_train.py), a finished job ``runs/bert-42``
(also ``runs/job`` and ``stepscope-runs/bert-42``, the default folder) made once by a
real ``stepscope run``, ``examples/``, ``src/train.py`` and ``mypkg.train``. A Python
block finds ``job`` (that job, opened), ``t0`` and ``t1`` (its start and end) defined.
``stepscope profile``/``config`` reach a finished job here: their arguments are
checked, and the job's answer that only a running job takes requests is accepted.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import sagemaker_source
from conftest import BIN, ROOT, SCRIPTS, env_for_tests
from doc_blocks import (
    DOCS,
    RUN,
    Block,
    all_blocks,
    missing_output,
    runnable,
    segments,
)
from stepscope.config import StepscopeConfig

TIMEOUT_S = 180  # one block: the longest runs two short jobs

_WRAPPERS = r"""
stepscope() {  # a finished job: the request's arguments were checked, the job found
    case "$1" in
    profile|config)
        local out rc; out=$(command stepscope "$@" 2>&1) && rc=0 || rc=$?; printf '%s\n' "$out"
        [[ $rc == 2 && $out == *"only a running job takes requests"* ]] && return 0
        return $rc ;;
    ui)  # serves until stopped (Ctrl-C) on a free port: its URL, no traceback. The Ctrl-C
        # once it answers a request: uvicorn is up (one in its start-up printed a traceback;
        # a fixed wait was 15 s a block). set -m: a background job then takes a SIGINT.
        local log pid port out; log=$(mktemp); set -m
        command stepscope "$@" --port 0 >"$log" 2>&1 & pid=$!
        timeout 120 bash -c "until grep -q 'http://127.0.0.1:' '$log'; do
            kill -0 $pid 2>/dev/null || exit 0; sleep 0.1; done"
        port=$(grep -o 'http://127.0.0.1:[0-9]*' "$log" | head -1 | cut -d: -f3)
        [[ -z $port ]] || timeout 120 bash -c "exec 3<>/dev/tcp/127.0.0.1/$port &&
            printf 'GET / HTTP/1.0\r\n\r\n' >&3 && head -c 4 <&3" >/dev/null 2>&1
        kill -INT $pid 2>/dev/null; wait $pid; set +m; out=$(<"$log"); rm -f "$log"
        printf '%s\n' "$out"; [[ $out == *"http://127.0.0.1:"* && $out != *Traceback* ]] ;;
    compare)  # the gate's documented exit 1, when it says it failed (two single runs on a
        # busy host can differ past 5%: docs/compare.md, "Noise between runs")
        local out rc; out=$(command stepscope "$@" 2>&1) && rc=0 || rc=$?; printf '%s\n' "$out"
        [[ $rc == 1 && $out == *"stepscope compare: gate failed: "* ]] && return 0
        return $rc ;;
    *) command stepscope "$@" ;;
    esac
}
"""


def _ids(blocks: list[Block]) -> list[str]:
    return [b.id for b in blocks]


SHELL = [b for b in all_blocks() if b.lang in RUN]
PYTHON = [b for b in all_blocks() if b.lang == "python"]


def test_every_block_names_its_language_and_every_skip_says_why() -> None:
    from doc_blocks import LANGUAGES

    blocks = all_blocks()
    unnamed = [f"{b.id} ```{b.lang}" for b in blocks if b.lang not in LANGUAGES]
    assert not unnamed, f"fence languages must be one of {LANGUAGES}: {unnamed}"
    assert all(b.skip != "?" for b in blocks), [b.id for b in blocks if b.skip == "?"]


def test_a_block_copied_from_a_repository_file_is_that_files_code() -> None:
    copies = [b for b in all_blocks() if b.file and (ROOT / b.file).exists()]
    assert copies, "docs/custom-rules.md shows examples/custom_rule.py"
    for block in copies:
        assert (ROOT / block.file).read_text().endswith(block.body), block.id


def test_the_python_names_the_docs_give_exist() -> None:
    """``stepscope.x.y`` in backticks (prose too): each resolves, module then attributes."""
    import importlib

    missing = []
    for doc in [*DOCS, ROOT / "DEVELOPERS.md"]:
        for name in sorted(set(re.findall(r"`(stepscope(?:\.\w+)+)", doc.read_text()))):
            parts = name.split(".")
            for cut in range(len(parts), 0, -1):
                try:
                    found: object = importlib.import_module(".".join(parts[:cut]))
                    break
                except ImportError:
                    continue
            for attr in parts[cut:]:
                found = getattr(found, attr, None)
            if found is None:
                missing.append(f"{doc.name}: {name}")
    assert not missing, missing


@pytest.mark.parametrize("block", runnable(("toml",)), ids=_ids(runnable(("toml",))))
def test_toml_blocks_are_valid_configuration(block: Block) -> None:
    StepscopeConfig.from_dict(tomllib.loads(block.body))


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """What the docs' examples name, with one finished job made by ``stepscope run``."""
    base = tmp_path_factory.mktemp("docs")
    for where in ("train.py", "src/train.py", "mypkg/train.py"):
        (base / where).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(SCRIPTS / "doc_train.py", base / where)
    (base / "mypkg" / "__init__.py").write_text("")
    shutil.copytree(ROOT / "examples", base / "examples")
    (base / "rules").mkdir()
    shutil.copy(ROOT / "examples" / "custom_rule.py", base / "rules" / "slow_steps.py")
    weights = '[[debugger.collections]]\nname = "weights"\n"train.save_interval" = 10\n'
    (base / "fixture.toml").write_text(weights)
    cmd = ["stepscope", "run", "-o", "runs", "--job", "bert-42", "--config", "fixture.toml"]
    made = subprocess.run(
        [*cmd, "--", sys.executable, "train.py"],
        cwd=base, env=_env(), capture_output=True, text=True, timeout=TIMEOUT_S,
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    sagemaker_source.write_old_job(base / "old-job")  # docs/sagemaker.md imports it
    for copy in ("runs/job", "stepscope-runs/bert-42"):  # named as its folder, as ls shows
        shutil.copytree(base / "runs" / "bert-42", base / copy)
        meta = json.loads((base / copy / "job.json").read_text())
        (base / copy / "job.json").write_text(json.dumps({**meta, "name": Path(copy).name}))
    return base


def _env() -> dict[str, str]:
    env = env_for_tests()
    env["PATH"] = f"{BIN}:{env['PATH']}"
    env.pop("STEPSCOPE_OUTPUT", None)
    return env


def _home(env: dict[str, str], work: Path) -> dict[str, str]:
    return {**env, "HOME": str(work)}  # `-o ~/bert-42.html` writes into the sandbox


def _workdir(sandbox: Path, tmp_path: Path, block: Block) -> Path:
    """A copy of the sandbox without the jobs the block makes itself (``-o X --job Y``)."""
    work = tmp_path / "work"
    shutil.copytree(sandbox, work, symlinks=True)
    for out, job in re.findall(r"-o (\S+) --job (\S+)", block.body):
        shutil.rmtree(work / out / job, ignore_errors=True)
    for other in all_blocks():
        if other.doc == block.doc and other.file:
            (work / other.file).write_text(other.body)
    return work


def _bash(script: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "-c", f"set -eo pipefail\n{_WRAPPERS}\n{script}"],
        cwd=cwd, env=_home(_env(), cwd), capture_output=True, text=True, timeout=TIMEOUT_S,
    )  # fmt: skip


@pytest.mark.process
@pytest.mark.parametrize("block", SHELL, ids=_ids(SHELL))
def test_shell_block_runs_as_written(sandbox: Path, tmp_path: Path, block: Block) -> None:
    if block.skip:
        pytest.skip(f"marked in the doc: {block.skip}")
    work = _workdir(sandbox, tmp_path, block)
    for seg in segments(block):
        done = _bash(seg.command, work)
        out = done.stdout + done.stderr
        assert done.returncode == 0, f"{block.id}: `{seg.command}` exited {done.returncode}:\n{out}"
        missing = missing_output(seg.shown, out)
        assert not missing, (
            f"{block.id}: `{seg.command}` printed no line starting {missing}:\n{out}"
        )


_PRELUDE = """\
import stepscope
job = stepscope.open("runs/bert-42")
t0, t1 = job.meta["start_time"], job.meta["end_time"]
"""


@pytest.mark.process
@pytest.mark.parametrize("block", PYTHON, ids=_ids(PYTHON))
def test_python_block_runs_as_written(sandbox: Path, tmp_path: Path, block: Block) -> None:
    if block.skip:
        pytest.skip(f"marked in the doc: {block.skip}")
    work = _workdir(sandbox, tmp_path, block)
    (work / "snippet.py").write_text(_PRELUDE + block.body)
    done = subprocess.run(
        [sys.executable, "snippet.py"],
        cwd=work, env=_env(), capture_output=True, text=True, timeout=TIMEOUT_S,
    )  # fmt: skip
    assert done.returncode == 0, f"{block.id}:\n{done.stdout}{done.stderr}"
