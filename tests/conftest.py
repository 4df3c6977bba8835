"""Shared fixtures: real jobs in subprocesses, and a guard against leaks."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
import pytest

# python-dateutil<3 (botocore's pin, the [s3] extra) imports six, whose first import adds
# an import hook: load it here, before any test's snapshot of sys.meta_path.
with contextlib.suppress(ImportError):
    import six  # noqa: F401

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = Path(__file__).parent / "scripts"
FAKES = Path(__file__).parent / "fakes"
BIN = Path(sys.executable).parent


def _torch_global_hooks() -> int:
    torch = sys.modules.get("torch")
    if torch is None:
        return 0
    from torch.nn.modules import module as m
    from torch.optim import optimizer as o

    return (
        len(m._global_forward_pre_hooks)
        + len(m._global_forward_hooks)
        + len(o._global_optimizer_pre_hooks)
        + len(o._global_optimizer_post_hooks)
    )


@pytest.fixture(autouse=True)
def healthy() -> Any:
    """Fail any test that leaks a thread, hook, profiler, import hook or child process."""
    threads = set(threading.enumerate())
    hooks, meta_path = _torch_global_hooks(), list(sys.meta_path)
    profile = sys.getprofile()
    yield
    leaked = [t for t in threading.enumerate() if t not in threads and t.is_alive()]
    assert not leaked, f"leaked threads: {leaked}"
    assert _torch_global_hooks() == hooks, "leaked torch global hooks"
    assert sys.meta_path == meta_path, "leaked import hooks"
    assert sys.getprofile() is profile, "leaked profiler"
    children = [
        c
        for c in psutil.Process().children(recursive=True)
        if c.is_running() and c.status() != psutil.STATUS_ZOMBIE
    ]
    assert not children, f"leaked processes: {children}"


@dataclass
class Run:
    """A finished ``stepscope run``: its exit code, output and job folder."""

    code: int
    stdout: str
    stderr: str
    job_path: Path

    def result(self) -> dict[str, Any]:
        """The JSON line the test script printed last."""
        return json.loads(self.stdout.strip().splitlines()[-1])


def env_for_tests(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    env.pop("STEPSCOPE_AGENT", None)
    env.update(extra)
    return env


def stepscope_run(
    tmp: Path,
    script_args: list[str],
    *opts: str,
    job: str = "job",
    timeout: float = 240,
    env: dict[str, str] | None = None,
) -> Run:
    """``stepscope run -o tmp --job job [opts] -- python <args>`` in a subprocess."""
    cmd = [
        str(BIN / "stepscope"),
        "run",
        "-o",
        str(tmp),
        "--job",
        job,
        *opts,
        "--",
        sys.executable,
        *script_args,
    ]
    p = subprocess.run(
        cmd, capture_output=True, text=True, timeout=timeout, env=env or env_for_tests()
    )
    return Run(p.returncode, p.stdout, p.stderr, tmp / job)


@pytest.fixture
def run_job(tmp_path: Path) -> Any:
    def go(script_args: list[str], *opts: str, **kw: Any) -> Run:
        return stepscope_run(tmp_path, script_args, *opts, **kw)

    return go
